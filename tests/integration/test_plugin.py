"""`kubectl specserve` as a user types it: the real kubectl finds the plugin on PATH (kubectl-specserve) and runs
it against specserve_kubefake with KUBECONFIG, while the real operator runs. pause/resume go through the
operator: it honours the annotation (Switching=False, reason Paused) and lets go of it."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.config import OperatorConfig
from specserve_kubefake import SPECSERVES, FakeApiServer
from tests.chart.chartlib import tool
from tests.integration.kube_emulator import eventually, operator_cluster, running_operator

NS = "llm"
NAME = "kimi-k25"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
async def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeApiServer]:
    async with operator_cluster(NS, tmp_path, monkeypatch, auto_ready=True) as api:
        yield api


@pytest.fixture()
def plugin_path(tmp_path: Path) -> str:
    """A PATH with kubectl and a `kubectl-specserve` as `pip install` makes it (the console script runs
    specserve.plugin.main:main) using this checkout."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "kubectl-specserve"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO / 'operator')!r})\n"
        "from specserve.plugin.main import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{Path(tool('kubectl')).parent}{os.pathsep}{os.environ.get('PATH', '')}"


async def kubectl(path: str, *args: str) -> tuple[int, str, str]:
    """`kubectl ARGS` in a subprocess (the operator keeps running in this loop meanwhile)."""
    proc = await asyncio.create_subprocess_exec(
        "kubectl", *args, env={**os.environ, "PATH": path},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def doc(kimi_doc: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(kimi_doc)
    body["metadata"] = {"name": NAME, "namespace": NS}
    body["spec"]["switching"] = {"crossoverConcurrency": 6, "evaluationIntervalSeconds": 1, "minDwellSeconds": 0}
    return body


def switching_condition(api: FakeApiServer) -> dict[str, Any]:
    obj = api.get(SPECSERVES, NS, NAME) or {}
    return next((c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == "Switching"), {})


async def test_the_plugin_against_a_running_operator(
    fake: FakeApiServer, plugin_path: str, kimi_doc: dict[str, Any], tmp_path: Path
) -> None:
    config = OperatorConfig(namespaces=(NS,), resync_seconds=5.0)
    async with running_operator(config) as operator:
        fake.create(doc(kimi_doc))
        await eventually(lambda: (fake.get(SPECSERVES, NS, NAME) or {}).get("status", {}).get("pools"), 30, "pools")
        # No Prometheus: after 3 unknown rounds the loop writes its state (MetricsAvailable=False).
        await eventually(lambda: switching_condition(fake).get("reason") == "Stable", 30, "Switching=Stable")

        code, out, err = await kubectl(plugin_path, "specserve", "status", NAME, "-n", NS)
        assert code == 0, err
        assert f"SpecServe {NS}/{NAME}  (TrafficSplit)" in out
        assert f"{NAME}-spec" in out and f"{NAME}-base" in out and "ready 1/1" in out
        assert "crossover 6/replica" in out
        assert "MetricsAvailable=False" in out  # a condition that is not fine, with its reason

        code, out, err = await kubectl(plugin_path, "specserve", "status", "-A", "-o", "json")
        assert code == 0, err
        (listed,) = json.loads(out)
        assert (listed["namespace"], listed["name"], listed["paused"]) == (NS, NAME, False)

        code, out, err = await kubectl(plugin_path, "specserve", "pause", NAME, "-n", NS)
        assert code == 0, err
        obj = fake.get(SPECSERVES, NS, NAME) or {}
        assert obj["metadata"]["annotations"]["specserve.io/paused"] == "true"
        await eventually(lambda: switching_condition(fake).get("reason") == "Paused", 30, "Switching=Paused")
        code, out, _ = await kubectl(plugin_path, "specserve", "status", NAME, "-n", NS)
        assert "PAUSED" in out and "Switching=False Paused" in out

        # what-if: the policy on the live state (paused, it holds).
        code, out, err = await kubectl(plugin_path, "specserve", "what-if", NAME, "-n", NS, "--demand", "1000",
                                       "-o", "yaml")  # fmt: skip
        assert code == 0, err
        answer = yaml.safe_load(out)
        assert answer["action"] == "Hold" and answer["reason"].startswith("paused")

        code, out, err = await kubectl(plugin_path, "specserve", "resume", NAME, "-n", NS)
        assert code == 0, err
        obj = fake.get(SPECSERVES, NS, NAME) or {}
        assert "specserve.io/paused" not in (obj["metadata"].get("annotations") or {})
        await eventually(lambda: switching_condition(fake).get("reason") == "Stable", 30, "Switching=Stable again")
        code, out, err = await kubectl(plugin_path, "specserve", "what-if", NAME, "-n", NS, "--demand", "1000",
                                       "-o", "json")  # fmt: skip
        assert code == 0, err
        answer = json.loads(out)
        assert answer["action"] == "SetWeights" and answer["weights"]["speculative"] < 100, answer

        png = tmp_path / "explain.png"
        code, out, err = await kubectl(plugin_path, "specserve", "explain", NAME, "-n", NS, "--png", str(png))
        assert code == 0, err
        assert "Curves: modelled from crossoverConcurrency." in out and "speculative" in out
        assert png.read_bytes().startswith(b"\x89PNG")

        code, out, err = await kubectl(plugin_path, "specserve", "history", NAME, "-n", NS)
        assert code == 0, err
        assert out.startswith("No decisions recorded yet.") or out.startswith("TIME")

        code, out, err = await kubectl(plugin_path, "specserve", "status", "missing", "-n", NS)
        assert code == 1 and 'specserve "missing" not found in namespace "llm"' in err and "Traceback" not in err
        assert not operator.done(), "the operator stopped during the test"

"""`kubectl specserve` when the cluster is not well, through real kubectl plugin discovery: an API server that is
down (a closed port) or silent (a socket that accepts and never answers) is one line naming the server and the
fix with a non-zero exit, never a traceback or a hang; a SpecServe with a field this plugin does not know does
not hide the others; kubectl's global flags before the command."""

from __future__ import annotations

import asyncio
import copy
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from specserve_kubefake import FakeApiServer
from specserve_kubefake.server import default_crds
from tests.integration.kube_emulator import operator_cluster
from tests.integration.test_plugin import REPO, kubectl, plugin_path

__all__ = ["plugin_path"]  # the fixture, used by name

NS = "llm"


def kubeconfig_for(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "dead-kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\n"
        "contexts: [{name: a, context: {cluster: c, user: u, namespace: llm}}]\n"
    )
    return path


@pytest.fixture()
def closed_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture()
def silent_port() -> Iterator[int]:
    """A socket that accepts connections (the kernel completes the handshake) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


async def test_a_dead_api_server_is_one_line_and_exit_1(plugin_path: str, tmp_path: Path, closed_port: int) -> None:
    config = kubeconfig_for(tmp_path, f"http://127.0.0.1:{closed_port}")
    for command in (["status"], ["status", "-A"], ["explain", "m"], ["pause", "m"]):
        code, out, err = await kubectl(plugin_path, "specserve", *command, "--kubeconfig", str(config))
        assert code == 1, (command, out, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        assert f"cannot reach the API server http://127.0.0.1:{closed_port}" in err
        assert "kubectl cluster-info" in err


async def test_a_silent_api_server_times_out(plugin_path: str, tmp_path: Path, silent_port: int) -> None:
    config = kubeconfig_for(tmp_path, f"http://127.0.0.1:{silent_port}")
    started = time.monotonic()
    code, out, err = await kubectl(
        plugin_path, "specserve", "--kubeconfig", str(config), "--request-timeout", "1s", "status", "m"
    )
    assert code == 1, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"the API server http://127.0.0.1:{silent_port} did not answer within 1s" in err
    assert "--request-timeout" in err
    assert time.monotonic() - started < 55  # kubectl() itself gives up at 60 s: this did not hang


def newer_crd() -> dict[str, Any]:
    """The CRD of a newer operator than this plugin: a new spec field, a new strategy."""
    crd = default_crds()[0]
    version = crd["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["futureField"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    spec["properties"]["strategy"]["enum"].append("SomethingNew")
    spec.pop("x-kubernetes-validations", None)  # the CEL rules know no SomethingNew either
    return crd


@pytest.fixture()
async def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeApiServer]:
    async with operator_cluster(NS, tmp_path, monkeypatch, crds=[newer_crd()]) as api:
        yield api


def named(kimi_doc: dict[str, Any], name: str) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(kimi_doc)
    body["metadata"] = {"name": name, "namespace": NS}
    return body


async def test_one_newer_specserve_does_not_hide_the_others(
    fake: FakeApiServer, plugin_path: str, kimi_doc: dict[str, Any]
) -> None:
    fake.create(named(kimi_doc, "plain"))
    newer = named(kimi_doc, "newer")
    newer["spec"]["futureField"] = {"enabled": True}  # a newer operator's CRD admits it
    fake.create(newer)
    broken = named(kimi_doc, "broken")
    broken["spec"]["strategy"] = "SomethingNew"
    fake.create(broken)
    await asyncio.sleep(0)
    # Global flags before the command, as with kubectl's own.
    code, out, err = await kubectl(plugin_path, "specserve", "-n", NS, "status")
    assert code == 1, err  # one object could not be shown
    assert f"SpecServe {NS}/plain" in out and f"SpecServe {NS}/newer" in out
    assert f"{NS}/newer has fields this plugin does not know (spec.futureField)" in err
    assert f"error: specserve {NS}/broken: this plugin cannot read its spec" in err
    assert "spelling" not in err and "Traceback" not in err
    code, out, err = await kubectl(plugin_path, "specserve", "-A", "status", "-o", "json")
    assert code == 1 and '"name": "plain"' in out and '"name": "newer"' in out
    code, out, err = await kubectl(plugin_path, "specserve", "--namespace=llm", "status", "newer")
    assert code == 0 and f"SpecServe {NS}/newer" in out, err
    code, out, err = await kubectl(plugin_path, "specserve", "version")
    assert code == 0 and out.startswith("kubectl-specserve ")


async def test_kubectl_completes_the_plugin(plugin_path: str) -> None:
    """kubectl 1.26+ asks `kubectl_complete-specserve` (beside the plugin on PATH) for `kubectl specserve <TAB>`."""
    bin_dir = Path(plugin_path.split(os.pathsep, maxsplit=1)[0])
    script = bin_dir / "kubectl_complete-specserve"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO / 'operator')!r})\n"
        "from specserve.plugin.main import complete_main\nsys.exit(complete_main())\n"
    )
    script.chmod(0o755)
    code, out, err = await kubectl(plugin_path, "__complete", "specserve", "-n", "llm", "st")
    assert code == 0, err
    assert out.splitlines()[:2] == ["status", ":4"]
    code, out, err = await kubectl(plugin_path, "__complete", "specserve", "status", "--request-t")
    assert out.splitlines()[:2] == ["--request-timeout", ":4"], (out, err)

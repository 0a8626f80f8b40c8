"""`specserve demo --cluster`: the demo on a real control plane (tools/specserve_tools/demo/realplane.py), briefly.

It starts its own control plane (the demo's controller-manager runs without its Deployment controller: the demo's
kubelet runs the pods as processes), so it does not use the tier's `plane` fixture; it is opt-in as the tier is
(SPECSERVE_CLUSTER=1). The error without the binaries is checked everywhere: it needs no control plane."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import needs_haproxy, needs_prometheus

DEMO = [sys.executable, "-m", "specserve.cli", "demo", "--plain", "--cluster"]


def _control_plane_processes() -> list[str]:
    """Processes of a demo's control plane still running (their working directory is in the demo's temp dir)."""
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            comm = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if "specserve-demo-" in cwd and "/control-plane" in cwd:
            left.append(f"{pid} {comm} {cwd}")
    return left


@needs_haproxy
@needs_prometheus
def test_without_the_binaries_the_demo_says_how_to_build_them(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBEBUILDER_ASSETS"}
    env["SPECSERVE_KUBE_CACHE"] = str(tmp_path / "empty-cache")  # scripts/kube-binaries.sh's cache: nothing built
    proc = subprocess.run([*DEMO, "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                          env=env, check=False)  # fmt: skip
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "step 'start the real control plane' failed" in proc.stderr
    assert "not built" in proc.stderr and "bash scripts/kube-binaries.sh" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@needs_haproxy
@needs_prometheus
def test_the_demo_runs_on_the_real_control_plane(tmp_path: Path) -> None:
    if os.environ.get("SPECSERVE_CLUSTER") != "1":
        pytest.skip("the real control plane tier is opt-in: SPECSERVE_CLUSTER=1 (after bash scripts/kube-binaries.sh)")
    out = tmp_path / "out"
    proc = subprocess.run([*DEMO, "--duration", "20", "--time-compression", "60", "--out", str(out)],
                          capture_output=True, text=True, timeout=420, start_new_session=True, check=False)  # fmt: skip
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, log
    assert "kube-apiserver on https://127.0.0.1:" in proc.stdout, log
    assert "against the real API server, as the chart's ServiceAccount" in proc.stdout, log
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["failed"] == 0 and summary["requests"] > 0, log
    # The operator's decisions reached status through the real API server, and the route it wrote was followed.
    assert summary["history"] and summary["status_view"][0].startswith("SpecServe demo/"), log
    assert {p["pool"] for p in summary["pools"] if p["requests"] > 0}, log
    assert _control_plane_processes() == []

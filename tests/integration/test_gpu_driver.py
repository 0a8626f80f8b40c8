"""scripts/gpu/real_engine.py, the real-engine driver, on the CPU: FAKE_ENGINE swaps SGLang for `specserve emulate`
(same rendered args, same ports), so the render -> launch -> kubelet probes -> preStop drain path cannot rot between
GPU runs. What it measures on a GPU is in docs/real-engine.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_driver_runs_the_rendered_pods_and_drains_without_loss(tmp_path: Path) -> None:
    env = dict(os.environ, FAKE_ENGINE="20", PYTHONPATH=os.pathsep.join(str(ROOT / d) for d in ("operator", "tools")))
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts/gpu/real_engine.py"),
            "extra",
            "--example",
            str(ROOT / "examples/llama31-8b-h200.yaml"),
            "--out",
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "extra.json").read_text())
    assert "error" not in result, result["error"]
    pods = {p["pod"]: p for p in result["pods"]}
    assert pods["baseline"]["ready"], pods["baseline"]
    assert pods["baseline"]["readiness_probe"] == {"path": "/health_generate", "http": 200}
    # every difference from the rendered container is recorded with its reason
    assert any(
        s.startswith("--model-path meta-llama/Llama-3.1-8B-Instruct -> /tmp/model")
        for s in pods["baseline"]["substituted"]
    )
    assert any("isolation variant" in s for s in pods["adaptive-flashinfer"]["substituted"])
    drain = result["drain"]
    assert drain["sent"] > 0
    assert drain["lost"] == 0, drain
    assert drain["prestop_rc"] == 0

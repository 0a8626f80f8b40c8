"""scripts/gpu/loop.py, the driver of "The loop on real engines" (docs/real-engine.md), with the emulator standing
in for SGLang (FAKE_ENGINE) and a short schedule: the real operator, the demo's kubelet and HAProxy gateway, the
Direct metrics path over per-pod loopback addresses, calibration by `specserve bench` + `calibrate`, and two
policies measured per phase. CI's guard that the GPU driver still runs end to end (CPU only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.helpers import needs_haproxy

LOOP = Path(__file__).resolve().parents[2] / "scripts" / "gpu" / "loop.py"


@needs_haproxy
def test_the_loop_driver_runs_end_to_end_on_the_emulator(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "FAKE_ENGINE": "h200-llama31-8b-ngram4-dummy"}
    argv = [sys.executable, str(LOOP), "--out", str(out), "--ramp-seconds", "16", "--peak", "64",
            "--policies", "specserve,baseline,specserve", "--ready-timeout", "120", "--deadline", "400"]  # fmt: skip
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "loop.json").read_text())
    assert result["errors"] == [] and result["not_run"] == []
    # every pod started from its rendered container, each substitution recorded
    assert len(result["pods"]) == 2
    for pod in result["pods"].values():
        assert any(s.startswith("--host 0.0.0.0 -> 127.0.") for s in pod["substituted"])
    spec_argv = next(p["argv"] for p in result["pods"].values() if "-spec-" in p["pod"])
    assert spec_argv[spec_argv.index("--speculative-algorithm") + 1] == "NGRAM"
    # calibrated as a user would: bench on both pools (a sweep with spread output lengths recorded beside it),
    # calibrate wrote curves the SpecServe now holds
    assert result["calibration"]["calibrate"]["rc"] == 0
    assert result["calibration"]["bench-spread_baseline"]["curve"]
    assert result["switching"]["curves"]["speculative"] and result["switching"]["curves"]["baseline"]
    # and the accept length the speculative curve was measured at (the operator's reference for its scale)
    assert result["switching"]["calibratedAcceptLength"] > 1
    # the operator read the live pods through Direct and moved the weights: the pools share the GPU
    # (placement.gpuSharing Shared), so all of the weight went to one pool or the other, each in one step, past the
    # crossover (~24 in flight) and back; the static run stayed pinned
    loop = result["policies"]["specserve"]
    weights = {row["weights"].get("speculative") for row in loop["timeline"] if row["weights"]}
    assert weights == {0, 100}, weights
    assert any(row.get("load") for row in loop["timeline"])
    # and what the policy decided with, every 2 s (the accept length and its reference, the drift condition)
    rows = [row["learning"] for row in loop["timeline"] if row.get("learning")]
    assert any(r["lastEvaluation"] and r["curveDrift"] for r in rows), rows[-3:]
    # a repeated SpecServe run starts on fresh learning: status.learning removed, the loop writes its fresh start
    # at once (what it remembered would only have been written a persist period after its last write)
    again = result["policies"]["specserve#2"]
    forgot = again["forgot_learning"]["lastUpdate"]
    first = next(row["learning"] for row in again["timeline"] if row.get("learning"))
    assert forgot is not None and first["lastUpdate"] > forgot, (forgot, first)
    # each request's length spread over 64-192 (mean 128), the same sequence in every run: equal lengths advance in
    # lockstep in the engine's batch and complete in waves, which a stage counts whole (docs/real-engine.md)
    for policy in ("specserve", "specserve#2"):
        done = [r for r in result["policies"][policy]["requests"] if r["error"] is None]
        assert all(r["tokens"] == r["max_tokens"] and 64 <= r["tokens"] <= 192 for r in done)
        assert len({r["tokens"] for r in done}) > 10
    drawn = [[r["max_tokens"] for r in sorted(result["policies"][p]["requests"], key=lambda r: r["start"])]
             for p in ("specserve", "specserve#2")]  # fmt: skip
    assert drawn[0][:50] == drawn[1][:50]
    static = result["policies"]["baseline"]
    assert {row["weights"].get("speculative") for row in static["timeline"]} == {0}
    assert static["phases"]["all"]["served_by"] == {"baseline": static["phases"]["all"]["requests"]}
    for policy in ("specserve", "baseline", "specserve#2"):
        phases = result["policies"][policy]["phases"]
        assert phases["all"]["failed"] == 0 and phases["all"]["tokens"] > 0
        assert phases["ramp-peak"]["tpot_p50_ms"] is not None
    assert (out / "loop.png").stat().st_size > 0

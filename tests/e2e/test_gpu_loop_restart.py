"""scripts/gpu/loop.py's Restart run ("The loop on real engines", docs/real-engine.md) with the emulator standing in
for SGLang: one NGRAM pool under sustained high load is restarted into plain by the real operator, and back into
NGRAM when the load falls, the restart priced at the start-up the operator read from the pods. CI's guard that the
GPU driver's Restart path still runs end to end (CPU only)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.helpers import needs_haproxy

LOOP = Path(__file__).resolve().parents[2] / "scripts" / "gpu" / "loop.py"
# the H200 calibration of the NGRAM-4 and plain pools (docs/real-engine/loop/bench-*.json), which the emulator
# profile below was made from
CURVES = {
    "curves": {
        "speculative": [
            {"concurrency": 1, "tokensPerSecond": 525.3},
            {"concurrency": 4, "tokensPerSecond": 2067.8},
            {"concurrency": 16, "tokensPerSecond": 3712.0},
            {"concurrency": 64, "tokensPerSecond": 4376.1},
        ],
        "baseline": [
            {"concurrency": 1, "tokensPerSecond": 212.6},
            {"concurrency": 4, "tokensPerSecond": 819.9},
            {"concurrency": 16, "tokensPerSecond": 2962.3},
            {"concurrency": 64, "tokensPerSecond": 7856.4},
        ],
    },
    "crossoverConcurrency": 24.5,
    "initialMode": "Speculative",
}


@needs_haproxy
def test_the_loop_driver_restarts_one_pool_into_plain_and_back_on_the_emulator(tmp_path: Path) -> None:
    out = tmp_path / "out"
    curves = tmp_path / "curves.json"
    curves.write_text(json.dumps(CURVES))
    env = {**os.environ, "FAKE_ENGINE": "h200-llama31-8b-ngram4-dummy"}
    argv = [sys.executable, str(LOOP), "--out", str(out), "--policies", "", "--restart", "--curves", str(curves),
            "--restart-settle", "6", "--ready-timeout", "120", "--deadline", "240"]  # fmt: skip
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=400, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "loop.json").read_text())
    assert result["errors"] == []
    run = result["restart"]
    # high load restarted the NGRAM pool into plain, low load restarted it back, each new pod serving alone
    assert [(s["stage"], s["restarted"]) for s in run["stages"]] == [("restart-high", True), ("restart-low", True)]
    modes = [p["mode"] for p in sorted(run["pods"].values(), key=lambda p: p["launched"])]
    assert modes[-3:] == ["speculative", "baseline", "speculative"], run["pods"]
    assert all("ready_s" in p for p in run["pods"].values())
    # the ski-rental numbers are in the decision history, the restart priced at the start-up read from the pods
    # (the emulator's seconds, not the spec's 600 s startup timeout)
    restarts = [h for h in run["history"] if h.get("action") == "Restart" and h.get("applied")]
    assert [h["toMode"] for h in restarts] == ["Baseline", "Speculative"], run["history"]
    for h in restarts:
        found = re.search(r"regret (\d+) tokens vs restart cost (\d+) \((\d+) s of lost serving\)", h["reason"])
        assert found, h["reason"]
        regret, cost, seconds = (int(g) for g in found.groups())
        # the reactive rule buys at the cost; the demand's own regimes at the factor the reason names (EARLY x the
        # cost when the regime is expected to outlast the roll, policy/restart.py)
        priced = re.search(r"\((\d+\.\d+)x the cost", h["reason"])
        factor = float(priced.group(1)) if priced else 1.0
        assert regret >= factor * cost > 0 and 0 < seconds < 60, h["reason"]
    # no request failed through the gateway, both modes served
    phases = run["phases"]
    assert phases["all"]["failed"] == 0 and phases["all"]["tokens"] > 0
    assert set(phases["all"]["served_by"]) == {"speculative", "baseline"}
    assert (out / "restart.png").stat().st_size > 0

"""`specserve demo`, compressed: the real operator moves the HTTPRoute weights both ways as load crosses the
crossover and back, the decision history is in status, no request through the gateway failed, the timeline PNG
was written, and no process the demo started is left. Ctrl-C and a failing step stop everything too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from specserve_tools.demo.procs import group_alive
from tests.e2e.helpers import needs_haproxy, needs_prometheus

DEMO = [sys.executable, "-m", "specserve.cli", "demo", "--plain"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with open(f"/proc/{pid}/stat", encoding="utf-8") as f:  # a zombie is gone for our purposes
        return f.read().split(")")[-1].split()[0] != "Z"


def _left_behind(out: Path) -> list[int]:
    pids: list[int] = json.loads((out / "pids.json").read_text(encoding="utf-8"))
    assert pids, "the demo started no process?"
    return [p for p in pids if _alive(p) or group_alive(p)]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        DEMO + args, capture_output=True, text=True, timeout=timeout, start_new_session=True, check=False
    )


@needs_haproxy
@needs_prometheus
def test_compressed_demo_moves_the_weights_both_ways_without_a_failed_request(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _run(["--duration", "60", "--time-compression", "60", "--out", str(out)], timeout=220)
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, log
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["failed"] == 0, log
    assert summary["requests"] > 100, log
    # HAProxy's own counters agree: no 5xx at the gateway, every request answered 2xx (plus the readiness checks).
    gateway = summary["gateway_responses"]
    assert gateway.get("5xx") == 0 and gateway.get("2xx", 0) >= summary["requests"] * 0.95, log
    assert summary["weight_changes"] >= 2, log
    assert summary["speculative_weight_min"] < summary["speculative_weight_max"], log
    assert summary["weights_moved_both_ways"], log
    # Both pools served traffic through the gateway.
    assert {p["pool"] for p in summary["pools"] if p["requests"] > 0} == {"speculative", "baseline"}, log
    history = summary["history"]
    assert history and all(h.get("reason") and h.get("time") for h in history), log
    assert any(h.get("action") == "SetWeights" for h in history), log
    # It ends with the `kubectl specserve status` view of its SpecServe.
    assert summary["status_view"][0].startswith("SpecServe ") and "kubectl specserve status:" in proc.stdout, log
    png = (out / "timeline.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert _left_behind(out) == []


@needs_haproxy
@needs_prometheus
def test_ctrl_c_stops_every_process_the_demo_started(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [*DEMO, "--duration", "120", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        for line in proc.stdout:  # wait until every piece runs and the load has begun
            if "t=" in line and "demand" in line:
                break
            assert time.monotonic() < deadline, "the demo never started its load"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted during step 'run the load'" in err
    assert _left_behind(out) == []


@needs_prometheus
def test_a_failing_step_is_named_and_what_started_before_it_is_stopped(tmp_path: Path) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    haproxy = fake_bin / "haproxy"
    haproxy.write_text("#!/bin/sh\necho 'haproxy: cannot bind socket' >&2\nexit 1\n", encoding="utf-8")
    haproxy.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"}
    proc = subprocess.run([*DEMO, "--out", str(out)], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 1
    assert "step 'start HAProxy' failed" in proc.stderr
    assert "cannot bind socket" in proc.stderr
    assert _left_behind(out) == []  # the fake API started before HAProxy is gone too

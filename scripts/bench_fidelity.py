#!/usr/bin/env python3
"""Bench fidelity: does `specserve bench` against `specserve emulate` reproduce the profile's tokens/s?

For each profile and mode (speculative, baseline) it starts the emulator as its own process on loopback with a
time scale K (the emulated clock runs K times faster; bench reports in emulated time), runs the default sweep
(1, 2, 5, 10, 30, 70, 100, 250) with one wave of warm-up and one measured wave per level, and compares each
level's output tok/s with the profile curve at that concurrency. Prints a Markdown table and the worst error per
profile; exits 1 when any error exceeds --tolerance. Timing-sensitive: not part of the unit tests.

    .venv/bin/python scripts/bench_fidelity.py            # both shipped profiles, about 5 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from specserve_tools.emulator.profile import load_profile
from specserve_tools.emulator.testing import free_port

# K per profile: long enough requests at C=1 (client round trips stay < 2% of a request), short enough at C=250.
DEFAULT_TIME_SCALE = {"seed-kimi-k25-rtxpro6000": 10.0, "eagle3-llama31-8b-h100": 2.0}
LEVELS = "1,2,5,10,30,70,100,250"


def wait_ready(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"emulator at {url} did not become healthy within {timeout:g} s")


def run_mode(profile: str, mode: str, time_scale: float, args: argparse.Namespace, out: Path) -> Path:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    emulator = subprocess.Popen(
        [sys.executable, "-m", "specserve.cli", "emulate", "--profile", profile, "--mode", mode,
         "--port", str(port), "--time-scale", str(time_scale), "--startup-seconds", "0",
         "--duration", str(args.max_seconds)],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_ready(url)
        name = f"{profile}-{mode}"
        cmd = [sys.executable, "-m", "specserve.cli", "bench", "--url", url, "--levels", args.levels,
               "--max-tokens", str(args.max_tokens), "--output-dir", str(out), "--name", name, "--quiet",
               "--label", mode]  # fmt: skip
        if args.requests:
            cmd += ["--requests", str(args.requests)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=args.max_seconds)
        return out / f"{name}.json"
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profiles", default=",".join(DEFAULT_TIME_SCALE), help="comma-separated profiles")
    parser.add_argument("--levels", default=LEVELS)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--requests", type=int, help="measured requests per level (default: bench's)")
    parser.add_argument("--time-scale", type=float, help="one K for all profiles (default: per profile)")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--max-seconds", type=float, default=900.0, help="bound on each emulator/bench run")
    parser.add_argument("--out", help="keep the bench results here (default: a temporary directory)")
    args = parser.parse_args()

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="fidelity-"))
    out.mkdir(parents=True, exist_ok=True)
    worst: dict[str, float] = {}
    print("| profile | mode | K | concurrency | profile tok/s | measured tok/s | error |")
    print("|---|---|---|---|---|---|---|")
    for profile in args.profiles.split(","):
        curves = load_profile(profile)
        k = args.time_scale or DEFAULT_TIME_SCALE.get(profile, 10.0)
        for mode in ("speculative", "baseline"):
            started = time.monotonic()
            result = json.loads(run_mode(profile, mode, k, args, out).read_text())
            curve = curves.speculative if mode == "speculative" else curves.baseline
            for level in result["levels"]:
                c, measured = level["concurrency"], level["output_tokens_per_s"]
                expected = curve.at(c)
                error = measured / expected - 1
                worst[profile] = max(worst.get(profile, 0.0), abs(error))
                print(f"| {profile} | {mode} | {k:g} | {c} | {expected:.1f} | {measured:.1f} | {error:+.1%} |")
            print(f"<!-- {profile} {mode}: {time.monotonic() - started:.0f} s wall -->", flush=True)
    print()
    for profile, error in worst.items():
        print(f"worst |error| {profile}: {error:.1%}")
    print(f"results in {out}")
    return 0 if all(e <= args.tolerance for e in worst.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""`specserve demo`: the operator's whole loop on one machine, live (no GPU, no cluster).

A fake Kubernetes API, the real operator, emulated SGLang pods, Debian's Prometheus and HAProxy, and a load that
ramps across the crossover and back. See docs/demo.md for what is emulated and what is real."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from specserve_tools.demo.procs import INTERRUPTED_IN, StepFailedError
from specserve_tools.demo.runner import Options, print_summary, run_demo
from specserve_tools.demo.scenario import STRATEGIES
from specserve_tools.demo.view import PlainView
from specserve_tools.emulator.profile import shipped_profiles


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--strategy", choices=STRATEGIES, default="TrafficSplit")
    parser.add_argument(
        "--profile",
        default="illustrative-crossover-8b",
        help="emulator profile (default illustrative-crossover-8b, where the switch is visible; "
        "seed-kimi-k25-rtxpro6000 shows the operator staying on baseline)",
    )
    parser.add_argument("--duration", type=float, default=150.0, help="seconds of load (default 150: ~3 min in all)")
    parser.add_argument(
        "--time-compression",
        type=float,
        default=20.0,
        help="divide the operator's windows and dwell, and the pods' start-up, by this (default 20)",
    )
    parser.add_argument("--out", type=Path, default=Path("out/demo"), help="where the PNG and summary go")
    parser.add_argument("--plain", action="store_true", help="plain lines instead of the live view")
    parser.add_argument("--keep-workdir", action="store_true", help="keep the temp dir (logs, configs) for a look")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="a real control plane (kube-apiserver, etcd, controller-manager, scheduler, kwok; the chart installed) "
        "instead of the fake API: needs a checkout and the binaries of scripts/kube-binaries.sh",
    )


def _check(args: argparse.Namespace) -> str | None:
    if args.profile not in shipped_profiles() and not Path(args.profile).is_file():
        return f"--profile {args.profile}: not a shipped profile ({', '.join(shipped_profiles())}) or a file"
    if args.duration < 20:
        return f"--duration must be >= 20 s, got {args.duration:g}"
    if args.time_compression < 1:
        return f"--time-compression must be >= 1, got {args.time_compression:g}"
    return None


async def _main(opts: Options) -> int:
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signal.SIGTERM, task.cancel)  # as Ctrl-C: stop everything, then exit
    try:
        summary = await run_demo(opts)
    except StepFailedError as exc:
        print(f"specserve demo: {exc}", file=sys.stderr)
        return 1
    view = PlainView()
    print_summary(summary, view, opts.out)
    return 0 if summary.failed == 0 else 3


def run(args: argparse.Namespace) -> int:
    problem = _check(args)
    if problem:
        print(f"specserve demo: {problem}", file=sys.stderr)
        return 2
    opts = Options(
        strategy=args.strategy,
        profile=args.profile,
        duration=args.duration,
        compression=args.time_compression,
        out=args.out,
        plain=args.plain,
        keep_workdir=args.keep_workdir,
        cluster=args.cluster,
    )
    try:
        return asyncio.run(_main(opts))
    except (KeyboardInterrupt, asyncio.CancelledError):
        during = f" during step '{INTERRUPTED_IN[0]}'" if INTERRUPTED_IN else ""
        print(f"specserve demo: interrupted{during}; every process it started was stopped", file=sys.stderr)
        return 130

"""`specserve simulate`: replay a trace through simulated pools under the SpecServe policy, the static and naive
policies and a replayed offline plan, and report how much of the gain up to an upper bound on any policy (the
optimum) each captures (docs/simulate.md)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import yaml

from specserve.api import yamlfile
from specserve.api.models import SpecServe, Strategy
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve_tools.emulator.profile import Profile, ProfileError, load_profile, profile_from_bench, shipped_profiles
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.scenario import DEFAULT_SLO_TPOT, DEFAULT_SLO_TTFT, DEFAULT_SPEC, scenario, with_strategy
from specserve_tools.simulate.setup import bin_trace
from specserve_tools.simulate.synthetic import SHIPPED, shipped_trace
from specserve_tools.simulate.traces import Trace, TraceError, TraceFormat, load_trace, scale

PROG = "specserve simulate"
DEFAULT_PROFILE = "illustrative-crossover-8b"
DEFAULT_TRACE = "diurnal"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spec", metavar="FILE", help="a SpecServe YAML: strategy, pools and knobs (default: defaults)"
    )
    parser.add_argument("--strategy", choices=[s.value for s in Strategy], help="override the spec's strategy")
    parser.add_argument(
        "--profile", default=DEFAULT_PROFILE, help=f"shipped profile or a profile JSON file (default {DEFAULT_PROFILE})"
    )
    parser.add_argument("--from-bench", nargs=2, metavar=("SPEC.json", "BASE.json"),
                        help="serve like two `specserve bench` results instead of a profile")  # fmt: skip
    parser.add_argument(
        "--trace",
        default=DEFAULT_TRACE,
        help=f"a trace file, or a shipped trace: {', '.join(SHIPPED)} (default {DEFAULT_TRACE})",
    )
    parser.add_argument("--format", choices=[f.value for f in TraceFormat], help="trace format (default: detected)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the shipped traces and of --rate-scale")
    parser.add_argument("--time-scale", type=float, default=1.0, help="stretch the trace's time by this factor")
    parser.add_argument("--rate-scale", type=float, default=1.0, help="multiply the load (requests or clients)")
    parser.add_argument("--tokens-per-request", type=float, default=None,
                        help="closed-loop traces: mean output tokens per request (default 512)")  # fmt: skip
    parser.add_argument("--slo-ttft", type=float, default=DEFAULT_SLO_TTFT,
                        help=f"TTFT SLO in seconds for goodput (default {DEFAULT_SLO_TTFT:g})")  # fmt: skip
    parser.add_argument("--slo-tpot", type=float, default=DEFAULT_SLO_TPOT,
                        help=f"time per output token SLO, seconds (default {DEFAULT_SLO_TPOT:g})")  # fmt: skip
    parser.add_argument(
        "--no-policy-slo",
        action="store_true",
        help="simulate the spec as written (the policy gets a TPOT SLO only from switching.tpotSloSeconds)",
    )
    parser.add_argument("--step", type=float, default=1.0, help="simulation step in seconds (default 1)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="policies simulated in parallel")
    parser.add_argument("--out", metavar="DIR", help="write result.json, result.csv, timeline.png and gain.png here")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="what it is doing and for how long, on stderr (default: when stderr is a terminal)",
    )
    parser.add_argument("--suite", type=int, metavar="N",
                        help="the randomized suite instead: N drawn deployments and days, seeded by --seed "
                        "(docs/simulate.md; --out FILE.json keeps every case)")  # fmt: skip


class UsageError(ValueError):
    pass


PROGRESS_EVERY = 1.0  # seconds between updates on a terminal
PROGRESS_EVERY_LOG = 10.0  # between lines when stderr is not a terminal (--progress into a log)


@contextmanager
def progress(what: str | None, stream: TextIO) -> Iterator[None]:
    """`what` and the time spent on it, on `stream` until the block ends (None: nothing). The policies run in
    worker processes with no finer account, so it says it is alive and for how long, not a fraction."""
    if what is None:
        yield
        return
    terminal = stream.isatty()
    started = time.monotonic()
    done = threading.Event()

    def tick() -> None:
        every = PROGRESS_EVERY if terminal else PROGRESS_EVERY_LOG
        while not done.wait(every):
            line = f"{PROG}: {what}: {time.monotonic() - started:.0f} s"
            stream.write(f"\r{line}" if terminal else f"{line}\n")
            stream.flush()

    stream.write(f"{PROG}: {what}...\n")
    stream.flush()
    ticker = threading.Thread(target=tick, name="simulate-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        stream.write(("\r" if terminal else "") + f"{PROG}: {what}: done in {time.monotonic() - started:.1f} s\n")
        stream.flush()


def _spec(args: argparse.Namespace) -> SpecServe:
    if args.spec is None:
        obj = parse_object(DEFAULT_SPEC)
    else:
        try:
            with open(args.spec, encoding="utf-8") as fh:
                docs = yamlfile.load_all(fh)
        except OSError as exc:
            raise UsageError(f"cannot read {args.spec}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise UsageError(f"{args.spec} is not valid YAML: {exc}") from exc
        if len(docs) != 1:
            raise UsageError(f"{args.spec}: expected one SpecServe document, found {len(docs)}")
        try:
            obj = parse_object(docs[0])
        except InvalidSpecServe as exc:
            raise UsageError(f"{args.spec}: {exc}") from exc
    return with_strategy(obj, Strategy(args.strategy) if args.strategy else None)


def _profile(args: argparse.Namespace) -> Profile:
    if args.from_bench:
        return profile_from_bench(*args.from_bench)
    return load_profile(args.profile)


def _trace(args: argparse.Namespace) -> Trace:
    if args.trace in SHIPPED and not Path(args.trace).exists():
        trace = shipped_trace(args.trace, args.seed)
    elif not Path(args.trace).exists():
        raise UsageError(
            f"--trace {args.trace}: no such file, and not a shipped trace; the shipped ones: {', '.join(SHIPPED)} "
            f"(or a trace file: {', '.join(f.value for f in TraceFormat)})"
        )
    else:
        trace = load_trace(args.trace, TraceFormat(args.format) if args.format else None)
    if args.tokens_per_request is not None:
        if args.tokens_per_request <= 0:
            raise UsageError("--tokens-per-request must be > 0")
        if trace.closed_loop:  # open-loop traces carry their own output lengths
            trace = replace(trace, tokens_per_request=args.tokens_per_request)
    return scale(trace, args.time_scale, args.rate_scale, args.seed)


def _check(args: argparse.Namespace) -> None:
    for flag, value in (("--slo-ttft", args.slo_ttft), ("--slo-tpot", args.slo_tpot), ("--step", args.step)):
        if not value > 0:
            raise UsageError(f"{flag} must be > 0, got {value:g}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {args.jobs}")


def run(args: argparse.Namespace) -> int:
    if args.suite is not None:
        from specserve_tools.simulate.suite import main as suite  # noqa: PLC0415 (the bound needs numpy)

        more = ["--json", args.out] if args.out else []
        return suite(["--cases", str(args.suite), "--seed", str(args.seed), "--jobs", str(args.jobs), *more])
    started = time.perf_counter()
    try:
        _check(args)
        obj = _spec(args)
        profile = _profile(args)
        trace = _trace(args)
    except (UsageError, ProfileError, TraceError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        if isinstance(exc, ProfileError) and not args.from_bench:
            print(f"{PROG}: shipped profiles: {', '.join(shipped_profiles())}", file=sys.stderr)
        return 2
    try:
        from specserve_tools.simulate.compare import compare  # noqa: PLC0415 (the bound needs numpy: the bench extra)
        from specserve_tools.simulate.report import csv_text, document, print_table, write_json, write_plots  # noqa: PLC0415
    except ImportError as exc:
        print(f"{PROG}: needs {exc.name or 'numpy'}: pip install 'specserve-tools[bench]'", file=sys.stderr)
        return 2
    slo = Slo(args.slo_ttft, args.slo_tpot)
    scen = scenario(obj, profile, slo, args.step, policy_slo=not args.no_policy_slo)
    load = bin_trace(trace, args.step)
    show = sys.stderr.isatty() if args.progress is None else args.progress
    what = f"simulating {trace.duration / 3600:.1f} h of trace {trace.name} ({scen.setup.strategy}, --jobs {args.jobs})"
    with progress(what if show else None, sys.stderr):
        result = compare(scen.setup, load, scen.knobs, scen.curves, jobs=args.jobs)
    result.notes[:0] = scen.notes
    elapsed = time.perf_counter() - started
    context: dict[str, Any] = {
        "strategy": scen.setup.strategy.value,
        "profile": profile.name,
        "trace": trace.name,
        "closed_loop": trace.closed_loop,
        "requests": trace.requests if not trace.closed_loop else None,
        "duration_seconds": trace.duration,
        "slo": {"ttft_seconds": args.slo_ttft, "tpot_seconds": args.slo_tpot},
        "crossover_per_replica": scen.setup.crossover,
        "replicas": {"speculative": scen.setup.speculative_replicas, "baseline": scen.setup.baseline_replicas},
        "elapsed_seconds": round(elapsed, 2),
    }
    title = f"{scen.setup.strategy} on {profile.name}, trace {trace.name} ({elapsed:.1f} s)"
    if args.json:
        import json  # noqa: PLC0415

        print(json.dumps(document(result, context), indent=2))
    else:
        print_table(result, title)
        print(f"best static policy: {result.best_static}")
        for note in result.notes:
            print(f"note: {note}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_json(result, context, out / "result.json")
        (out / "result.csv").write_text(csv_text(result))
        written = write_plots(result, out, title)
        if not args.json:
            print(f"wrote {out / 'result.json'}, {out / 'result.csv'}" + "".join(f", {p}" for p in written))
    return 0

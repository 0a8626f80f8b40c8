"""`specserve bench`: closed-loop concurrency sweep against an OpenAI-compatible endpoint, or (with --plot)
a PNG of results already measured. Writes NAME.json, NAME.csv and NAME.png after every level, so an interrupted
or failing sweep leaves its partial results behind."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from specserve.api.curves import CurveError
from specserve_tools.bench.client import BenchError, Endpoint, get_json, probe
from specserve_tools.bench.plot import plot_curves
from specserve_tools.bench.prompts import PromptFileError, load_prompts
from specserve_tools.bench.results import (
    BenchFileError,
    BenchResult,
    load_result,
    plot_labels,
    write_csv,
    write_json,
)
from specserve_tools.bench.sweep import DEFAULT_LEVELS, Callbacks, SweepPlan, parse_levels, run_sweep

PROG = "specserve bench"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="http://127.0.0.1:30000", help="server base URL (no /v1)")
    parser.add_argument("--model", help="model name to request (default: the first of /v1/models)")
    parser.add_argument(
        "--levels", default=",".join(map(str, DEFAULT_LEVELS)), help="concurrency levels, comma-separated"
    )
    parser.add_argument("--requests", type=int, help="measured requests per level (default max(8, 2 x level))")
    parser.add_argument("--warmup", type=int, help="warm-up requests per level (default: the level)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="measurement windows of --requests each per level, at least (default 3)"
    )
    parser.add_argument(
        "--max-repeats",
        type=int,
        help="at most this many windows while the CI is wider than --ci-target (default 6; 1 with --repeats 1)",
    )
    parser.add_argument(
        "--ci-target",
        type=float,
        default=0.05,
        help="stop repeating a level once its 95%% CI half-width is below this fraction of the mean (0: never early)",
    )
    parser.add_argument("--max-tokens", type=int, default=256, help="max output tokens per request")
    parser.add_argument("--ignore-eos", action="store_true", help="ask for fixed-length outputs (SGLang/vLLM)")
    parser.add_argument(
        "--length-spread",
        type=float,
        default=0.0,
        help="spread output lengths evenly over max-tokens x (1 +- F), mean unchanged, 0 <= F < 1 (default 0): "
        "desynchronizes the workers, whose fixed-length requests otherwise start and finish in lockstep",
    )
    parser.add_argument("--api", choices=["chat", "completions"], default="chat")
    parser.add_argument("--prompts", metavar="FILE", help="prompt file (lines, JSON lines or a JSON list)")
    parser.add_argument("--label", help="curve label, e.g. speculative or baseline (default: from the server)")
    parser.add_argument("--name", default="bench", help="output file stem: NAME.json, NAME.csv, NAME.png")
    parser.add_argument("--output-dir", default=".", help="where the files go")
    parser.add_argument(
        "--time-scale",
        type=float,
        help="the server's clock speed-up (the emulator's --time-scale); default: read from /server_info, else 1",
    )
    parser.add_argument("--request-timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--level-timeout", type=float, default=3600.0, help="seconds per level")
    parser.add_argument("--max-errors", type=int, default=10, help="failed requests in a level that stop the sweep")
    parser.add_argument("--wait-ready", type=float, default=0.0, help="wait up to this many seconds for /health")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--plot",
        nargs="+",
        metavar="RESULT.json",
        help="do not measure: plot these results (one curve each) into OUTPUT_DIR/NAME.png",
    )


def _fail(message: str, code: int = 2) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


def _check_args(args: argparse.Namespace) -> SweepPlan:
    levels = parse_levels(args.levels)
    for flag, value, least in (
        ("--requests", args.requests, 1),
        ("--warmup", args.warmup, 0),
        ("--max-tokens", args.max_tokens, 1),
        ("--max-errors", args.max_errors, 1),
        ("--repeats", args.repeats, 1),
        ("--max-repeats", args.max_repeats, 1),
    ):
        if value is not None and value < least:
            raise ValueError(f"{flag} must be >= {least}, got {value}")
    top = max(levels)
    if args.requests is not None and args.requests < top:
        # A window shorter than one wave of completions closes inside a burst of them (samples of 3x the rate).
        raise ValueError(
            f"--requests ({args.requests}) is below the largest level ({top}): a window must hold at least one "
            f"completion per stream; pass --requests {top} or more, or leave it out (2 x the level)"
        )
    for flag, fvalue in (
        ("--time-scale", args.time_scale),
        ("--request-timeout", args.request_timeout),
        ("--level-timeout", args.level_timeout),
    ):
        if fvalue is not None and fvalue <= 0:
            raise ValueError(f"{flag} must be > 0, got {fvalue:g}")
    if not 0 <= args.length_spread < 1:
        raise ValueError(f"--length-spread must be in [0, 1) (a fraction of --max-tokens), got {args.length_spread:g}")
    if not 0 <= args.ci_target < 1:
        raise ValueError(f"--ci-target must be in [0, 1) (a fraction of the mean), got {args.ci_target:g}")
    # --repeats 1 alone is the old single window (no CI); otherwise up to 6 windows while the CI is too wide
    default_max = 1 if args.repeats == 1 else max(args.repeats, 6)
    max_repeats = args.max_repeats if args.max_repeats is not None else default_max
    if max_repeats < args.repeats:
        raise ValueError(f"--max-repeats ({max_repeats}) must be >= --repeats ({args.repeats})")
    if max_repeats > 1:
        try:
            import scipy.stats  # noqa: F401, PLC0415 (the CI of repeated levels; fail before measuring)
        except ImportError:
            raise ValueError(
                "repeated levels need scipy for their confidence intervals: pip install 'specserve-tools[bench]' "
                "(or pass --repeats 1 --max-repeats 1)"
            ) from None
    return SweepPlan(
        levels=levels,
        requests=args.requests,
        warmup=args.warmup,
        level_timeout_s=args.level_timeout,
        max_errors=args.max_errors,
        repeats=args.repeats,
        max_repeats=max_repeats,
        ci_target=args.ci_target or None,
        length_spread=args.length_spread,
    )


def _plot_only(args: argparse.Namespace) -> int:
    try:
        results = [load_result(path) for path in args.plot]
    except BenchFileError as exc:
        return _fail(str(exc))
    out = Path(args.output_dir) / f"{args.name}.png"
    try:
        labels = plot_labels(list(zip(args.plot, results, strict=True)))
        plot_curves([(label, r.curve()) for label, r in zip(labels, results, strict=True)], out)
    except (OSError, CurveError) as exc:
        return _fail(f"cannot write {out}: {exc}", 1)
    print(f"wrote {out}")
    return 0


def _table(result: BenchResult) -> Table:
    table = Table(title=f"{result.label}: {result.model} at {result.url}")
    for col in ("conc.", "tok/s +-95% CI", "n", "req/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "errors",
                "accept"):  # fmt: skip
        table.add_column(col, justify="right")

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v * 1000:.0f} ms"

    for lv in result.levels:
        table.add_row(
            str(lv.concurrency),
            f"{lv.output_tokens_per_s:.1f}" + ("" if lv.ci_half_width is None else f" +-{lv.ci_half_width:.1f}"),
            str(lv.repeats),
            f"{lv.requests_per_s:.2f}",
            ms(lv.ttft_p50_s),
            ms(lv.ttft_p99_s),
            ms(lv.tpot_p50_s),
            ms(lv.tpot_p99_s),
            str(lv.errors),
            "-" if lv.accept_length is None else f"{lv.accept_length:.2f}",
        )
    return table


def _server_summary(info: Any) -> dict[str, Any]:
    if not isinstance(info, dict):
        return {}
    keys = ("version", "speculative_algorithm", "speculative_num_steps", "max_running_requests", "specserve_emulator")
    return {k: info[k] for k in keys if k in info}


def _default_label(server: dict[str, Any]) -> str:
    emulated = server.get("specserve_emulator")
    if isinstance(emulated, dict) and emulated.get("mode"):
        return str(emulated["mode"])
    if "speculative_algorithm" in server:
        return "speculative" if server["speculative_algorithm"] else "baseline"
    return "bench"


async def _wait_ready(session: aiohttp.ClientSession, url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            async with session.get(url + "/health", timeout=aiohttp.ClientTimeout(total=5)) as resp:
                if resp.status == 200:
                    return
        except (aiohttp.ClientError, TimeoutError):
            pass
        if time.monotonic() >= deadline:
            raise BenchError(f"{url} did not become healthy within {seconds:g} s (GET /health); check the server")
        await asyncio.sleep(0.5)


def _progress(console: Console, quiet: bool, save: Callable[[BenchResult], None]) -> tuple[Progress, Callbacks]:
    """A progress bar per level, fed by the sweep's callbacks (its total grows when a level takes one more window)."""
    progress = Progress(
        TextColumn("[bold]C={task.fields[level]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("errors {task.fields[errors]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
    )
    state: dict[str, Any] = {"task": None, "errors": 0}

    def level_start(concurrency: int, total: int) -> None:
        state["errors"] = 0
        state["task"] = progress.add_task("level", total=total, level=concurrency, errors=0)

    def request_done(ok: bool) -> None:
        if ok:
            progress.advance(state["task"])
        else:
            state["errors"] += 1
            progress.update(state["task"], errors=state["errors"])

    def level_extended(requests: int) -> None:
        progress.update(state["task"], total=(progress.tasks[-1].total or 0) + requests)

    callbacks = Callbacks(
        level_start=level_start, request_done=request_done, level_extended=level_extended, level_done=save
    )
    return progress, callbacks


async def _measure(args: argparse.Namespace, plan: SweepPlan, prompts: list[str], console: Console) -> int:
    base_url = args.url.rstrip("/")
    if not base_url.startswith(("http://", "https://")):
        raise BenchError(f"--url must start with http:// or https://, got {args.url!r}")
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {ext: out_dir / f"{args.name}.{ext}" for ext in ("json", "csv", "png")}
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=args.request_timeout, sock_connect=10)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        if args.wait_ready > 0:
            await _wait_ready(session, base_url, args.wait_ready)
        models = await probe(session, base_url)
        model = args.model or (models[0] if models else None)
        if model is None:
            raise BenchError(f"{base_url}/v1/models lists no model; pass --model")
        server = _server_summary(await get_json(session, base_url + "/server_info"))
        emulated = server.get("specserve_emulator")
        time_scale = args.time_scale
        if time_scale is None:
            time_scale = float(emulated.get("time_scale", 1.0)) if isinstance(emulated, dict) else 1.0
        result = BenchResult(
            url=base_url,
            model=model,
            label=args.label or _default_label(server),
            max_tokens=args.max_tokens,
            time_scale=time_scale,
            started=datetime.now(UTC).isoformat(timespec="seconds"),
            server=server,
        )
        endpoint = Endpoint(base_url, model, args.api, args.max_tokens, args.ignore_eos)

        def save(res: BenchResult) -> None:
            write_json(res, paths["json"])
            write_csv(res, paths["csv"])
            if not args.no_plot and res.levels:
                plot_curves([(res.label, res.curve())], paths["png"])

        progress, callbacks = _progress(console, args.quiet, save)
        with progress:
            await run_sweep(session, endpoint, prompts, plan, result, callbacks)
    save(result)
    console.print(_table(result))
    written = ", ".join(str(p) for key, p in paths.items() if key != "png" or (not args.no_plot and result.levels))
    console.print(f"wrote {written}")
    errors = sum(lv.errors for lv in result.levels)
    if result.error:
        print(f"{PROG}: stopped early: {result.error} (partial results saved in {paths['json']})", file=sys.stderr)
        return 1
    if errors:
        print(f"{PROG}: {errors} requests failed during the sweep (see the errors column)", file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    if args.plot:
        return _plot_only(args)
    try:
        plan = _check_args(args)
        prompts = load_prompts(args.prompts)
    except (ValueError, PromptFileError) as exc:
        return _fail(str(exc))
    console = Console(stderr=False)
    try:
        return asyncio.run(_measure(args, plan, prompts, console))
    except BenchError as exc:
        return _fail(str(exc), 1)
    except OSError as exc:
        return _fail(f"cannot write results ({exc.strerror or exc}: {exc.filename}); check --output-dir", 1)
    except KeyboardInterrupt:
        return _fail(f"interrupted; results so far are in {Path(args.output_dir) / args.name}.json", 130)

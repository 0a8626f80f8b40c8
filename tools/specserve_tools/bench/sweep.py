"""The closed-loop concurrency sweep: at each level, C workers each send a request, wait for it to finish and
send the next, so exactly C requests are in flight. The first W completions are warm-up; then the level is
measured in consecutive windows of N completions each (repeats of the same steady state, without a new warm-up):
at least `repeats` windows, and more, up to `max_repeats`, while the 95% confidence interval of the windows' mean
tok/s is wider than `ci_target` (a fraction of the mean). Requests still running at the end are cancelled (their
tokens inside the window count)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import aiohttp

from specserve_tools.bench import promtext
from specserve_tools.bench.client import Endpoint, get_text, stream_one
from specserve_tools.bench.results import BenchResult
from specserve_tools.bench.stats import LevelStats, RequestRecord, relative_half_width, summarize, window_rates

DEFAULT_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)


@dataclass(frozen=True)
class SweepPlan:
    levels: Sequence[int] = DEFAULT_LEVELS
    requests: int | None = None  # measured requests per level; None: max(8, 2 x concurrency)
    warmup: int | None = None  # warm-up completions per level; None: the concurrency (one full wave)
    level_timeout_s: float = 3600.0
    max_errors: int = 10  # per level; more aborts the sweep (the server is failing)
    repeats: int = 3  # measurement windows per level, at least (3: the fewest that give a usable t interval)
    max_repeats: int = 6  # at most, while the CI is wider than ci_target
    ci_target: float | None = 0.05  # relative CI half-width that ends a level early; None: exactly `repeats`
    length_spread: float = 0.0  # output lengths spread +-this fraction around max_tokens (see `output_tokens`)

    def __post_init__(self) -> None:
        if self.repeats < 1 or self.max_repeats < self.repeats:
            raise ValueError(f"repeats must be >= 1 and <= max_repeats, got {self.repeats} and {self.max_repeats}")
        if not 0 <= self.length_spread < 1:
            raise ValueError(f"length_spread must be in [0, 1), got {self.length_spread}")
        if self.ci_target is not None and not 0 < self.ci_target < 1:
            raise ValueError(f"ci_target must be in (0, 1), got {self.ci_target}")

    def enough(self, samples: Sequence[float]) -> bool:
        """Whether a level measured in these windows' tok/s may stop."""
        if len(samples) < self.repeats:
            return False
        if len(samples) >= self.max_repeats or self.ci_target is None:
            return True
        width = relative_half_width(samples)
        return width is not None and width <= self.ci_target

    def counts(self, concurrency: int) -> tuple[int, int]:
        warmup = concurrency if self.warmup is None else self.warmup
        requests = max(8, 2 * concurrency) if self.requests is None else self.requests
        return warmup, requests


@dataclass
class Callbacks:
    level_start: Callable[[int, int], None] = lambda concurrency, total: None
    request_done: Callable[[bool], None] = lambda ok: None
    level_extended: Callable[[int], None] = lambda requests: None  # one more window: this many more requests
    level_done: Callable[[BenchResult], None] = lambda result: None


@dataclass
class LevelRun:
    records: list[RequestRecord] = field(default_factory=list)
    completions: int = 0
    errors: int = 0
    t0: float | None = None
    t1: float | None = None
    bounds: list[float] = field(default_factory=list)  # t0, then the end of each measurement window
    samples: list[float] = field(default_factory=list)  # each closed window's tok/s (wall clock), for the stop
    problem: str | None = None
    last_error: str | None = None


GOLDEN = 0.6180339887498949


def output_tokens(max_tokens: int, spread: float, index: int) -> int:
    """The output length of request `index`: max_tokens x a factor spread evenly over 1 +- spread (a golden-ratio
    sequence: every window of requests sees the whole range, and the mean stays max_tokens). Fixed lengths keep a
    closed loop's workers in lockstep (they start, prefill and finish together); spread lengths let them drift
    apart, as a workload whose output lengths vary does (docs/bench.md: what it measured on the H200)."""
    if spread <= 0:
        return max_tokens
    return max(1, round(max_tokens * (1 - spread + 2 * spread * ((index * GOLDEN) % 1.0))))


def sized(endpoint: Endpoint, spread: float, index: int) -> Endpoint:
    tokens = output_tokens(endpoint.max_tokens, spread, index)
    return endpoint if tokens == endpoint.max_tokens else replace(endpoint, max_tokens=tokens)


def parse_levels(text: str) -> list[int]:
    """'1,2,5' -> [1, 2, 5]; ValueError with a one-line fix on empty, non-integer, non-positive or repeated."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("--levels is empty; give positive integers, e.g. --levels 1,2,5,10")
    levels: list[int] = []
    for part in parts:
        try:
            value = int(part)
        except ValueError:
            raise ValueError(f"--levels: {part!r} is not an integer; e.g. --levels 1,2,5,10") from None
        if value < 1:
            raise ValueError(f"--levels: concurrency must be >= 1, got {value}")
        if value in levels:
            raise ValueError(f"--levels: {value} appears twice")
        levels.append(value)
    return levels


async def run_level(
    session: aiohttp.ClientSession,
    endpoint: Endpoint,
    prompts: Sequence[str],
    concurrency: int,
    plan: SweepPlan,
    callbacks: Callbacks,
    prompt_counter: itertools.count[int],
) -> LevelRun:
    warmup, requests = plan.counts(concurrency)
    run = LevelRun()
    done = asyncio.Event()
    clock = time.monotonic
    if warmup == 0:
        run.t0 = clock()
        run.bounds.append(run.t0)

    async def worker() -> None:
        while not done.is_set():
            rec = RequestRecord(start=clock())
            run.records.append(rec)
            index = next(prompt_counter)
            await stream_one(session, sized(endpoint, plan.length_spread, index), prompts[index % len(prompts)], rec)
            if done.is_set():
                return
            callbacks.request_done(rec.ok)
            if rec.ok and rec.end is not None:
                run.completions += 1
                if run.completions == warmup:
                    run.t0 = rec.end
                    run.bounds.append(rec.end)
                measured = run.completions - warmup
                if measured > 0 and measured % requests == 0:
                    run.bounds.append(rec.end)
                    run.t1 = rec.end
                    run.samples.append(_last_window_rate(run))
                    if plan.enough(run.samples):
                        done.set()
                    elif len(run.samples) >= plan.repeats:
                        callbacks.level_extended(requests)
            else:
                run.errors += 1
                run.last_error = rec.error
                if run.errors >= plan.max_errors:
                    run.problem = f"{run.errors} failed requests at concurrency {concurrency}; last: {rec.error}"
                    done.set()
                    return
                await asyncio.sleep(min(1.0, 0.05 * run.errors))  # do not hammer a failing server

    tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
    try:
        await asyncio.wait_for(done.wait(), timeout=plan.level_timeout_s)
    except TimeoutError:
        run.problem = (
            f"concurrency {concurrency} did not finish {warmup + plan.repeats * requests} requests within "
            f"{plan.level_timeout_s:g} s; raise --level-timeout or lower --requests/--max-tokens/--repeats"
        )
        if run.t0 is not None and run.completions > warmup and len(run.bounds) < 2:
            run.t1 = clock()  # not one full window: the partial window is the level (no CI)
            run.bounds.append(run.t1)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return run


def _last_window_rate(run: LevelRun) -> float:
    """Tok/s of the window that just closed, over the requests alive in it only: this runs in the event loop
    while C streams are in flight, so it must not rescan the whole level."""
    t0, t1 = run.bounds[-2], run.bounds[-1]
    alive = [r for r in run.records if r.start < t1 and (r.end is None or r.end > t0)]
    return window_rates(alive, (t0, t1))[0]


async def run_sweep(
    session: aiohttp.ClientSession,
    endpoint: Endpoint,
    prompts: Sequence[str],
    plan: SweepPlan,
    result: BenchResult,
    callbacks: Callbacks,
) -> BenchResult:
    """Fill `result` level by level (callbacks.level_done after each, so partial results can be saved)."""
    counter = itertools.count()
    for concurrency in plan.levels:
        warmup, requests = plan.counts(concurrency)
        callbacks.level_start(concurrency, warmup + plan.repeats * requests)
        run = await run_level(session, endpoint, prompts, concurrency, plan, callbacks, counter)
        if run.t0 is not None and run.t1 is not None and run.t1 > run.t0:
            stats = summarize(
                concurrency, run.records, run.t0, run.t1, run.errors, result.time_scale, bounds=run.bounds
            )
            metrics = await get_text(session, endpoint.base_url + "/metrics")
            accept = promtext.accept_length(metrics) if metrics else None
            result.levels.append(_with_accept(stats, accept))
        if run.problem is not None:
            result.error = run.problem
            callbacks.level_done(result)
            return result
        callbacks.level_done(result)
    result.complete = True
    return result


def _with_accept(stats: LevelStats, accept: float | None) -> LevelStats:
    return replace(stats, accept_length=accept)

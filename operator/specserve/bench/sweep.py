"""The closed-loop concurrency sweep: at each level, C workers each send a request, wait for it to finish and
send the next, so exactly C requests are in flight. The first W completions are warm-up; the level ends at the
(W + N)-th completion, and requests still running then are cancelled (their tokens inside the window count)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import aiohttp

from specserve.bench import promtext
from specserve.bench.client import Target, get_text, stream_one
from specserve.bench.results import BenchResult
from specserve.bench.stats import LevelStats, RequestRecord, summarize

DEFAULT_LEVELS = (1, 2, 5, 10, 30, 70, 100, 250)


@dataclass(frozen=True)
class SweepPlan:
    levels: Sequence[int] = DEFAULT_LEVELS
    requests: int | None = None  # measured requests per level; None: max(8, 2 x concurrency)
    warmup: int | None = None  # warm-up completions per level; None: the concurrency (one full wave)
    level_timeout_s: float = 3600.0
    max_errors: int = 10  # per level; more aborts the sweep (the server is failing)

    def counts(self, concurrency: int) -> tuple[int, int]:
        warmup = concurrency if self.warmup is None else self.warmup
        requests = max(8, 2 * concurrency) if self.requests is None else self.requests
        return warmup, requests


@dataclass
class Callbacks:
    level_start: Callable[[int, int], None] = lambda concurrency, total: None
    request_done: Callable[[bool], None] = lambda ok: None
    level_done: Callable[[BenchResult], None] = lambda result: None


@dataclass
class LevelRun:
    records: list[RequestRecord] = field(default_factory=list)
    completions: int = 0
    errors: int = 0
    t0: float | None = None
    t1: float | None = None
    problem: str | None = None
    last_error: str | None = None


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
    target: Target,
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

    async def worker() -> None:
        while not done.is_set():
            rec = RequestRecord(start=clock())
            run.records.append(rec)
            await stream_one(session, target, prompts[next(prompt_counter) % len(prompts)], rec)
            if done.is_set():
                return
            callbacks.request_done(rec.ok)
            if rec.ok:
                run.completions += 1
                if run.completions == warmup:
                    run.t0 = rec.end
                if run.completions == warmup + requests:
                    run.t1 = rec.end
                    done.set()
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
            f"concurrency {concurrency} did not finish {warmup + requests} requests within "
            f"{plan.level_timeout_s:g} s; raise --level-timeout or lower --requests/--max-tokens"
        )
        if run.t0 is not None and run.completions > warmup:
            run.t1 = clock()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return run


async def run_sweep(
    session: aiohttp.ClientSession,
    target: Target,
    prompts: Sequence[str],
    plan: SweepPlan,
    result: BenchResult,
    callbacks: Callbacks,
) -> BenchResult:
    """Fill `result` level by level (callbacks.level_done after each, so partial results can be saved)."""
    counter = itertools.count()
    for concurrency in plan.levels:
        warmup, requests = plan.counts(concurrency)
        callbacks.level_start(concurrency, warmup + requests)
        run = await run_level(session, target, prompts, concurrency, plan, callbacks, counter)
        if run.t0 is not None and run.t1 is not None and run.t1 > run.t0:
            stats = summarize(concurrency, run.records, run.t0, run.t1, run.errors, result.time_scale)
            metrics = await get_text(session, target.base_url + "/metrics")
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

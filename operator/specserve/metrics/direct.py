"""The Direct source, for clusters without Prometheus: the operator scrapes the engines' /metrics itself.

Pods are found by listing Pods with the SpecServe's instance label (pods get/list are in the operator's RBAC;
Endpoints are not): every Ready pod with an IP is scraped (a pod still loading serves nothing and answers no
scrape), at http://<podIP>:<spec.engine.port>/metrics; the number scraped is compared with the pool's Ready
replicas as Prometheus' series are. The text is parsed with prometheus_client's parser. Smoothing, rates and
quantiles come from a short in-memory history per pod (the window of the Prometheus queries), so the first
evaluation after a start reads instantaneous gauges and no rates yet.
It yields the same QueryResults as Prometheus, so the rest of the signal path is shared.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from specserve.metrics.promql import LATENCY_MIN_COMPLETIONS, PoolKey, Query, Signal, Windows
from specserve.metrics.results import QueryResult

Fetch = Callable[[str], Awaitable[str]]
Bucket = tuple[float, float]  # (upper bound, cumulative count)

log = logging.getLogger(__name__)

TTFT = "sglang:time_to_first_token_seconds_bucket"
TPOT = "sglang:request_time_per_output_token_seconds_bucket"
E2E = "sglang:e2e_request_latency_seconds"
DECODED = "sglang:realtime_tokens_total"


@dataclass(frozen=True)
class Scrape:
    """What one pod's /metrics said (sums over its series)."""

    running: float = 0.0
    queued: float = 0.0
    generation_tokens: float = 0.0
    accept_length: float | None = None
    spec_steps: float | None = None
    gen_throughput: float | None = None
    ttft: tuple[Bucket, ...] = ()
    tpot: tuple[Bucket, ...] = ()
    decode_tokens: float | None = None  # tokens decoded so far, counted every decode step (a counter)
    latency_seconds: float = 0.0  # the finished requests' end-to-end seconds, summed (a counter)
    finished: float = 0.0  # how many finished (a counter)


class NoLoadSeriesError(ValueError):
    """The exposition parsed but has no load gauge (our own fixed words)."""


def parse_scrape(text: str) -> Scrape:
    """Parse one exposition (pure); raises ValueError on text that is not the Prometheus format."""
    sums: dict[str, float] = {}
    gauges: dict[str, list[float]] = {}
    buckets: dict[str, dict[float, float]] = {TTFT: {}, TPOT: {}}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, value = sample.name, float(sample.value)
            if name in buckets:
                le = float(sample.labels["le"])
                buckets[name][le] = buckets[name].get(le, 0.0) + value
            elif name == DECODED:
                if sample.labels.get("mode") == "decode":
                    sums[name] = sums.get(name, 0.0) + value
            elif name in ("sglang:spec_accept_length", "sglang:spec_num_steps"):
                gauges.setdefault(name, []).append(value)
            else:
                sums[name] = sums.get(name, 0.0) + value

    def mean(name: str) -> float | None:
        values = gauges.get(name)
        return sum(values) / len(values) if values else None

    if "sglang:num_running_reqs" not in sums:
        raise NoLoadSeriesError("no sglang:num_running_reqs in the exposition (is --enable-metrics set?)")
    return Scrape(
        running=sums["sglang:num_running_reqs"],
        queued=sums.get("sglang:num_queue_reqs", 0.0),
        generation_tokens=sums.get("sglang:generation_tokens_total", 0.0),
        accept_length=mean("sglang:spec_accept_length"),
        spec_steps=mean("sglang:spec_num_steps"),
        gen_throughput=sums.get("sglang:gen_throughput"),
        ttft=tuple(sorted(buckets[TTFT].items())),
        tpot=tuple(sorted(buckets[TPOT].items())),
        decode_tokens=sums.get(DECODED),
        latency_seconds=sums.get(f"{E2E}_sum", 0.0),
        finished=sums.get(f"{E2E}_count", 0.0),
    )


def histogram_quantile(q: float, buckets: Sequence[Bucket]) -> float | None:
    """Prometheus' histogram_quantile on cumulative buckets (pure): linear within the bucket; None when empty."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower  # as Prometheus: the highest finite bound
            span = count - below
            return lower + (upper - lower) * ((rank - below) / span if span > 0 else 1.0)
        lower, below = upper, count
    return lower


def _delta(first: Sequence[Bucket], last: Sequence[Bucket]) -> tuple[Bucket, ...]:
    old = dict(first)
    return tuple((le, count - old.get(le, 0.0)) for le, count in last)


@dataclass
class _History:
    scrapes: deque[tuple[float, Scrape]] = field(default_factory=deque)

    def add(self, time: float, scrape: Scrape, keep: float) -> None:
        self.scrapes.append((time, scrape))
        while self.scrapes and self.scrapes[0][0] < time - keep:
            self.scrapes.popleft()


def _window(history: _History, now: float, seconds: float) -> list[tuple[float, Scrape]]:
    return [(t, s) for t, s in history.scrapes if t >= now - seconds]


@dataclass(frozen=True)
class PoolView:
    """One pool's aggregates over its pods' recent scrapes (None: not enough data)."""

    running: float
    queued: float
    tokens_per_second: float | None
    ttft: tuple[Bucket, ...]
    tpot: tuple[Bucket, ...]
    accept_length: float | None
    spec_steps: float | None
    gen_throughput: float | None = None
    latency_in_flight: float | None = None
    decode_tokens_per_second: float | None = None


def aggregate(histories: Iterable[_History], now: float, windows: Windows) -> PoolView:
    """Sum a pool's pods (pure over the histories): gauges averaged over the smoothing window, counters and
    histograms differenced over the rate window (a counter reset drops that pod's rate)."""
    running = queued = 0.0
    rate: float | None = None
    ttft: dict[float, float] = {}
    tpot: dict[float, float] = {}
    accepts, steps = [], []
    gen: float | None = None
    latency, finished = 0.0, 0.0
    decoded: float | None = None
    for history in histories:
        smooth = _window(history, now, windows.smooth)
        if not smooth:
            continue
        running += sum(s.running for _, s in smooth) / len(smooth)
        queued += sum(s.queued for _, s in smooth) / len(smooth)
        decode = [s.gen_throughput for _, s in smooth if s.gen_throughput is not None]
        if decode:
            gen = (gen or 0.0) + sum(decode) / len(decode)
        accept = [s.accept_length for _, s in smooth if s.accept_length is not None]
        if accept:  # averaged as the gauges are (Prometheus' avg_over_time): one reading is about one batch
            accepts.append(sum(accept) / len(accept))
        last = smooth[-1][1]
        if last.spec_steps is not None:  # the steps active now
            steps.append(last.spec_steps)
        span = _window(history, now, windows.rate)
        (t0, first), (t1, final) = span[0], span[-1]
        if t1 > t0 and final.generation_tokens >= first.generation_tokens:
            rate = (rate or 0.0) + (final.generation_tokens - first.generation_tokens) / (t1 - t0)
            for into, buckets in ((ttft, _delta(first.ttft, final.ttft)), (tpot, _delta(first.tpot, final.tpot))):
                for le, count in buckets:
                    into[le] = into.get(le, 0.0) + count
        before, after = first.decode_tokens, final.decode_tokens
        if t1 > t0 and before is not None and after is not None and after >= before:
            decoded = (decoded or 0.0) + (after - before) / (t1 - t0)
        if t1 > t0 and final.finished >= first.finished and final.latency_seconds >= first.latency_seconds:
            latency += (final.latency_seconds - first.latency_seconds) / (t1 - t0)
            finished += final.finished - first.finished
    return PoolView(
        running,
        queued,
        rate,
        tuple(sorted(ttft.items())),
        tuple(sorted(tpot.items())),
        sum(accepts) / len(accepts) if accepts else None,
        sum(steps) / len(steps) if steps else None,
        gen,
        latency if finished >= LATENCY_MIN_COMPLETIONS else None,
        decoded,
    )


def _results(key: PoolKey, view: PoolView, pods: int, now: float, origin: str) -> list[QueryResult]:
    values: dict[Signal, float | None] = {
        Signal.RUNNING: view.running,
        Signal.QUEUED: view.queued,
        Signal.FRESHNESS: now,
        Signal.TOKENS: view.tokens_per_second,
        Signal.TTFT_P50: histogram_quantile(0.5, view.ttft),
        Signal.TTFT_P99: histogram_quantile(0.99, view.ttft),
        Signal.TPOT_P50: histogram_quantile(0.5, view.tpot),
        Signal.TPOT_P99: histogram_quantile(0.99, view.tpot),
        Signal.ACCEPT_LENGTH: view.accept_length,
        Signal.SPEC_STEPS: view.spec_steps,
        Signal.GEN_THROUGHPUT: view.gen_throughput,
        Signal.LATENCY_IN_FLIGHT: view.latency_in_flight,
        Signal.DECODE_TOKENS: view.decode_tokens_per_second,
        Signal.SERIES: float(pods),
    }
    return [
        QueryResult(Query(signal, origin, key), {key: v} if v is not None else {}, now) for signal, v in values.items()
    ]


async def http_fetch(session: aiohttp.ClientSession, url: str, timeout: float) -> str:
    async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
        response.raise_for_status()
        return await response.text()


class DirectSource:
    """Scrapes the pods given per pool and keeps the history that smoothing and rates need."""

    def __init__(self, fetch: Fetch, clock: Callable[[], float]) -> None:
        self._fetch = fetch
        self._clock = clock
        self._histories: dict[str, _History] = {}
        self.scrapes_sent = 0

    async def _scrape(self, url: str) -> Scrape | str:
        """One pod's Scrape, or why not: the status code and a fixed reason, never what the pod answered (its
        reason phrase and body go to no status or event)."""
        self.scrapes_sent += 1
        try:
            text = await self._fetch(url)
        except aiohttp.ClientResponseError as exc:
            return f"scraping {url}: answered HTTP {exc.status}"
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            return f"scraping {url}: {type(exc).__name__}"
        except Exception as exc:  # the I/O edge: one pod's answer must not end the round
            log.warning("scraping %s: unexpected %s", url, type(exc).__name__, exc_info=True)
            return f"scraping {url}: failed unexpectedly ({type(exc).__name__})"
        try:
            return parse_scrape(text)
        except NoLoadSeriesError as exc:
            return f"scraping {url}: {exc}"
        except (ValueError, KeyError, TypeError, IndexError, OverflowError):
            return f"scraping {url}: the answer is not the Prometheus text format"

    async def read(self, pods: Mapping[PoolKey, Sequence[str]], windows: Windows) -> list[QueryResult]:
        """pods: the /metrics URLs of each pool's pods. A failed scrape makes its pool unknown."""
        urls = sorted({u for us in pods.values() for u in us})
        scrapes = dict(zip(urls, await asyncio.gather(*(self._scrape(u) for u in urls)), strict=True))
        now = self._clock()
        keep = max(windows.smooth, windows.rate) * 2
        for url, scrape in scrapes.items():
            if isinstance(scrape, Scrape):
                self._histories.setdefault(url, _History()).add(now, scrape, keep)
        for gone in set(self._histories) - set(urls):
            del self._histories[gone]  # pods that went away
        out: list[QueryResult] = []
        for key, pool_urls in sorted(pods.items()):
            origin = f"direct scrape of {len(pool_urls)} pods of {key.namespace}/{key.name} pool {key.pool}"
            errors = [s for s in (scrapes[u] for u in pool_urls) if isinstance(s, str)]
            if errors:
                out += [QueryResult(Query(sig, origin, key), error=errors[0]) for sig in Signal]
                continue
            if not pool_urls:
                out += [QueryResult(Query(sig, origin, key), {key: 0.0} if sig is Signal.SERIES else {}, now)
                        for sig in Signal]  # fmt: skip
                continue
            view = aggregate((self._histories[u] for u in pool_urls), now, windows)
            out += _results(key, view, len(pool_urls), now, origin)
        return out

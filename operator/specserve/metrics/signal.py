"""Query results -> the policy's Samples (pure).

Unknown is never 0: an errored query, a pool with Ready pods but no series, or with fewer series than Ready
pods (the missing pods' load is not low, it is unread), NaN, and series older than two scrape intervals make
demand unknown, with the reason and the query that failed. A pool without Ready pods and
without series contributes nothing (it has nothing to serve). Per-pool extras (tokens/s, latency quantiles,
accept length, active steps) are best effort: when unknown they are None and demand stays known.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from specserve.api import reasons
from specserve.metrics.promql import DEMAND_SIGNALS, PoolKey, Query, Signal
from specserve.metrics.results import QueryResult
from specserve.policy.forecast import History
from specserve.policy.types import PoolSignal, Sample

STALE_SCRAPES = 2  # a series is stale when its newest sample is older than this many scrape intervals


@dataclass(frozen=True)
class PoolTarget:
    role: str  # the pool label value: speculative, baseline or engine
    ready: int  # Ready pods, from the Deployment (not from Prometheus)
    speculative: bool  # goes into Sample.speculative (else Sample.baseline)


@dataclass(frozen=True)
class ReadTarget:
    """One SpecServe to read."""

    namespace: str
    name: str
    pools: tuple[PoolTarget, ...]
    scrape_seconds: float


@dataclass(frozen=True)
class Reading:
    sample: Sample
    reason: str | None = None  # None: demand is known
    query: str | None = None  # the query behind the failure


class _UnknownError(Exception):
    def __init__(self, reason: str, message: str, query: Query) -> None:
        super().__init__(message)
        self.reason, self.message, self.query = reason, message, query


def index(results: Iterable[QueryResult]) -> dict[tuple[Signal, PoolKey | None], QueryResult]:
    return {(r.query.signal, r.query.key): r for r in results}


def _result(results: dict[tuple[Signal, PoolKey | None], QueryResult], signal: Signal, key: PoolKey) -> QueryResult:
    # A SpecServe's own (seriesSelector) query wins over the grouped one.
    found = results.get((signal, key)) or results.get((signal, None))
    if found is None:
        raise KeyError(f"no {signal} query for {key}")
    return found


def _value(result: QueryResult, key: PoolKey) -> float | None:
    value = result.values.get(key)
    return None if value is None or math.isnan(value) or math.isinf(value) else value


def _demand_part(
    results: dict[tuple[Signal, PoolKey | None], QueryResult], key: PoolKey, ready: int, scrape: float
) -> tuple[float | None, float | None]:
    """(running, queued) of one pool; (None, None) for a pool with no pods and no series; raises _UnknownError."""
    parts: dict[Signal, float | None] = {}
    for signal in DEMAND_SIGNALS:
        result = _result(results, signal, key)
        if result.error is not None:
            reason = reasons.QUERY_REFUSED if result.refused else reasons.QUERY_FAILED
            raise _UnknownError(reason, result.error, result.query)
        parts[signal] = _value(result, key)
    running, queued, newest = parts[Signal.RUNNING], parts[Signal.QUEUED], parts[Signal.FRESHNESS]
    if running is None or queued is None or newest is None:
        if ready == 0:
            return None, None
        raise _UnknownError(
            reasons.NO_DATA,
            f"no load series for pool {key.pool} of {key.namespace}/{key.name} ({ready} Ready pods)",
            _result(results, Signal.RUNNING, key).query,
        )
    reporting = _extra(results, Signal.SERIES, key)  # absent only from sources that cannot count (simulate)
    if reporting is not None and reporting < ready:
        raise _UnknownError(
            reasons.PARTIAL_SERIES,
            f"only {reporting:.0f} of the {ready} Ready pods of pool {key.pool} of {key.namespace}/{key.name} "
            "report load series: the others' load is unknown, not low",
            _result(results, Signal.SERIES, key).query,
        )
    now = _result(results, Signal.FRESHNESS, key).time
    age = (now - newest) if now is not None else 0.0
    if age > STALE_SCRAPES * scrape:
        if ready == 0:
            return None, None
        raise _UnknownError(
            reasons.STALE,
            f"the load series of pool {key.pool} of {key.namespace}/{key.name} are {age:.0f} s old "
            f"(more than {STALE_SCRAPES} scrape intervals of {scrape:g} s)",
            _result(results, Signal.FRESHNESS, key).query,
        )
    return running, queued


def _extra(results: dict[tuple[Signal, PoolKey | None], QueryResult], signal: Signal, key: PoolKey) -> float | None:
    try:
        result = _result(results, signal, key)
    except KeyError:
        return None
    return None if result.error is not None else _value(result, key)


def read(target: ReadTarget, results: dict[tuple[Signal, PoolKey | None], QueryResult], time: float) -> Reading:
    """One SpecServe's Sample from the round's results."""
    signals: dict[bool, PoolSignal] = {}
    demand = 0.0
    failure: _UnknownError | None = None
    for pool in target.pools:
        key = PoolKey(target.namespace, target.name, pool.role)
        running: float | None = None
        queued: float | None = None
        try:
            running, queued = _demand_part(results, key, pool.ready, target.scrape_seconds)
        except _UnknownError as exc:
            failure = failure or exc
        signals[pool.speculative] = signal = PoolSignal(
            ready_replicas=pool.ready,
            running=running,
            queued=queued,
            tokens_per_second=_extra(results, Signal.TOKENS, key),
            gen_throughput=_extra(results, Signal.GEN_THROUGHPUT, key),
            ttft_p50=_extra(results, Signal.TTFT_P50, key),
            ttft_p99=_extra(results, Signal.TTFT_P99, key),
            tpot_p50=_extra(results, Signal.TPOT_P50, key),
            tpot_p99=_extra(results, Signal.TPOT_P99, key),
            accept_length=_extra(results, Signal.ACCEPT_LENGTH, key) if pool.speculative else None,
            spec_num_steps=_extra(results, Signal.SPEC_STEPS, key) if pool.speculative else None,
            latency_in_flight=_extra(results, Signal.LATENCY_IN_FLIGHT, key),
            decode_tokens_per_second=_extra(results, Signal.DECODE_TOKENS, key),
        )
        demand += signal.in_flight() or 0.0
    if failure is not None:
        sample = Sample(time, None, signals.get(True), signals.get(False), error=failure.message)
        return Reading(sample, failure.reason, failure.query.promql)
    return Reading(Sample(time, demand, signals.get(True), signals.get(False)))


def failed(time: float, reason: str, message: str, query: str | None = None) -> Reading:
    """A Reading for a SpecServe whose queries could not even be built or sent."""
    return Reading(Sample(time, None, error=message), reason, query)


def read_history(
    target: ReadTarget, results: dict[tuple[Signal, PoolKey | None], QueryResult], horizon: float
) -> History:
    """One SpecServe's demand a day and a week ago (metrics.promql.history_queries), summed over its pools. A part
    no pool recorded (a new deployment, retention shorter than the lookback, a failed query) is None: unknown,
    never 0; the policy then has no forecast from that lookback (policy.forecast)."""

    def total(signal: Signal) -> float | None:
        keys = (PoolKey(target.namespace, target.name, pool.role) for pool in target.pools)
        values = [v for key in keys if (v := _extra(results, signal, key)) is not None]
        return sum(values) if values else None

    return History(
        now_day=total(Signal.DEMAND_DAY),
        now_week=total(Signal.DEMAND_WEEK),
        ahead_day=total(Signal.AHEAD_DAY),
        ahead_week=total(Signal.AHEAD_WEEK),
        horizon=horizon,
    )

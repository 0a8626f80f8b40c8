"""Query results -> Samples: demand summed over pools, and unknown (never 0) on errors, gaps, NaN, staleness."""

from __future__ import annotations

import math

from specserve.api import reasons
from specserve.metrics.promql import PoolKey, Query, Signal, Windows, grouped_queries
from specserve.metrics.results import QueryResult
from specserve.metrics.signal import PoolTarget, ReadTarget, index, read

NOW = 1000.0
SPEC, BASE = PoolKey("llm", "a", "speculative"), PoolKey("llm", "a", "baseline")
TARGET = ReadTarget("llm", "a", (PoolTarget("speculative", 1, True), PoolTarget("baseline", 2, False)), 15.0)


def results(
    values: dict[Signal, dict[PoolKey, float]], errors: dict[Signal, tuple[str, bool]] | None = None
) -> dict[tuple[Signal, PoolKey | None], QueryResult]:
    out = []
    for query in grouped_queries(Windows(30, 60)):
        if errors and query.signal in errors:
            message, refused = errors[query.signal]
            out.append(QueryResult(query, error=message, refused=refused))
        else:
            out.append(QueryResult(query, values.get(query.signal, {}), NOW))
    return index(out)


def healthy(**extra: dict[PoolKey, float]) -> dict[Signal, dict[PoolKey, float]]:
    return {
        Signal.RUNNING: {SPEC: 4.0, BASE: 10.0},
        Signal.QUEUED: {SPEC: 0.0, BASE: 2.0},
        Signal.FRESHNESS: {SPEC: NOW - 5, BASE: NOW - 10},
        **{Signal(k): v for k, v in extra.items()},
    }


def test_demand_is_running_plus_queued_over_every_pool() -> None:
    reading = read(TARGET, results(healthy(tokens_per_second={SPEC: 300.0}, accept_length={SPEC: 2.5})), NOW)
    assert reading.reason is None
    assert reading.sample.demand == 16.0
    assert reading.sample.time == NOW
    spec, base = reading.sample.speculative, reading.sample.baseline
    assert spec is not None and base is not None
    assert (spec.running, spec.queued, spec.ready_replicas, spec.tokens_per_second) == (4.0, 0.0, 1, 300.0)
    assert spec.accept_length == 2.5
    assert (base.running, base.queued, base.ready_replicas, base.accept_length) == (10.0, 2.0, 2, None)
    assert spec.ttft_p99 is None  # optional signals absent: unknown, and demand stays known


def test_an_errored_query_makes_demand_unknown_with_the_query() -> None:
    reading = read(TARGET, results(healthy(), {Signal.QUEUED: ("Prometheus at p: timed out", False)}), NOW)
    assert reading.sample.demand is None
    assert reading.reason == reasons.QUERY_FAILED
    assert reading.sample.error == "Prometheus at p: timed out"
    assert reading.query is not None and "sglang:num_queue_reqs" in reading.query


def test_a_refused_query_is_reported_as_refused() -> None:
    reading = read(TARGET, results(healthy(), {Signal.RUNNING: ("bad_data", True)}), NOW)
    assert reading.reason == reasons.QUERY_REFUSED and reading.sample.demand is None


def test_a_pool_with_ready_pods_and_no_series_is_unknown_not_zero() -> None:
    values = healthy()
    del values[Signal.RUNNING][BASE]
    reading = read(TARGET, results(values), NOW)
    assert reading.sample.demand is None
    assert reading.reason == reasons.NO_DATA
    assert "pool baseline" in (reading.sample.error or "") and "2 Ready pods" in (reading.sample.error or "")


def test_nan_is_unknown() -> None:
    values = healthy()
    values[Signal.QUEUED][SPEC] = math.nan
    assert read(TARGET, results(values), NOW).sample.demand is None


def test_series_older_than_two_scrape_intervals_are_stale() -> None:
    values = healthy()
    values[Signal.FRESHNESS][SPEC] = NOW - 31  # scrape interval 15 s
    reading = read(TARGET, results(values), NOW)
    assert reading.sample.demand is None and reading.reason == reasons.STALE
    values[Signal.FRESHNESS][SPEC] = NOW - 29
    assert read(TARGET, results(values), NOW).sample.demand == 16.0


def test_a_pool_without_ready_pods_and_without_series_contributes_nothing() -> None:
    target = ReadTarget("llm", "a", (PoolTarget("speculative", 1, True), PoolTarget("baseline", 0, False)), 15.0)
    values = healthy()
    for signal in (Signal.RUNNING, Signal.QUEUED, Signal.FRESHNESS):
        del values[signal][BASE]
    reading = read(target, results(values), NOW)
    assert reading.sample.demand == 4.0
    assert reading.sample.baseline is not None and reading.sample.baseline.running is None


def test_a_specserves_own_query_wins_over_the_grouped_one() -> None:
    by_query = results(healthy())
    own = QueryResult(Query(Signal.RUNNING, "own", SPEC), {SPEC: 7.0}, NOW)
    by_query[(Signal.RUNNING, SPEC)] = own
    assert read(TARGET, by_query, NOW).sample.demand == 19.0


def test_fewer_series_than_ready_pods_make_the_pool_unknown_not_low() -> None:
    # Baseline has 2 Ready pods; Prometheus returns the series of one: its load is half read, not low.
    reading = read(TARGET, results(healthy(series={SPEC: 1.0, BASE: 1.0})), NOW)
    assert reading.sample.demand is None
    assert reading.reason == reasons.PARTIAL_SERIES
    assert reading.sample.error is not None and "1 of the 2 Ready pods of pool baseline" in reading.sample.error
    assert reading.query is not None and reading.query.startswith("count by")


def test_as_many_series_as_ready_pods_or_more_read_the_load() -> None:
    # More series than Ready pods: a pod still loading (or leaving) reports too; nothing is missing.
    reading = read(TARGET, results(healthy(series={SPEC: 1.0, BASE: 3.0})), NOW)
    assert reading.reason is None and reading.sample.demand == 16.0


def test_a_pool_holds_what_the_finished_requests_latency_counts_when_the_gauges_caught_fewer() -> None:
    # SGLang's running gauge is a snapshot taken when a batch is logged: under synchronized arrivals it misses the
    # requests being admitted. Little's law over the finished requests counts them (metrics.promql).
    reading = read(TARGET, results(healthy(latency_in_flight={SPEC: 9.0, BASE: 5.0})), NOW)
    spec, base = reading.sample.speculative, reading.sample.baseline
    assert spec is not None and base is not None
    assert (spec.latency_in_flight, spec.in_flight()) == (9.0, 9.0)  # the gauges read 4 + 0
    assert (base.latency_in_flight, base.in_flight()) == (5.0, 12.0)  # below the gauges' 10 + 2: the gauges
    assert reading.sample.demand == 21.0


def test_latency_alone_never_makes_an_unknown_pool_known() -> None:
    values = healthy(latency_in_flight={SPEC: 9.0, BASE: 5.0})
    del values[Signal.RUNNING][BASE]
    reading = read(TARGET, results(values), NOW)
    assert reading.sample.demand is None
    assert reading.reason == reasons.NO_DATA

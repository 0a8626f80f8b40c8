"""PromQL for the load signal (pure).

The operator's PodMonitor relabels every engine series with the SpecServe and pool it comes from
(render/templates/podmonitor.yaml.j2), and the Prometheus Operator adds `namespace`. So one query per signal,
grouped by (namespace, specserve_instance, specserve_pool), reads every SpecServe sharing a Prometheus at once:
the cost of a round does not grow with the number of SpecServes. A SpecServe whose cluster relabels differently
sets `spec.switching.metrics.seriesSelector` (label matchers with $namespace, $name and $pool) and gets its own
queries, one per signal and pool.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from enum import StrEnum

from specserve.api import selector

# The labels of the engine series in Prometheus (the PodMonitor relabels them), not the objects' (specserve.layout).
SERIES_NAMESPACE = "namespace"
SERIES_INSTANCE = "specserve_instance"
SERIES_POOL = "specserve_pool"
GROUP_LABELS = (SERIES_NAMESPACE, SERIES_INSTANCE, SERIES_POOL)
DEFAULT_MATCHERS = f'{SERIES_INSTANCE}!=""'
SELECTOR_FIELD = selector.FIELD


class Signal(StrEnum):
    RUNNING = "running"
    QUEUED = "queued"
    TOKENS = "tokens_per_second"
    TTFT_P50 = "ttft_p50"
    TTFT_P99 = "ttft_p99"
    TPOT_P50 = "tpot_p50"
    TPOT_P99 = "tpot_p99"
    ACCEPT_LENGTH = "accept_length"
    SPEC_STEPS = "spec_num_steps"
    # The scheduler's decode throughput gauge, paired in time with num_running_reqs: what the live curves learn
    # from (generation_tokens_total only moves when a request finishes: bursty over a short window).
    GEN_THROUGHPUT = "gen_throughput"
    # Requests in flight by Little's law: the end-to-end seconds of the requests that finished, per second of the
    # window. SGLang sets num_running_reqs when it logs a batch, and a prefill's log counts the running batch
    # without the requests it admits: under synchronized arrivals (a closed loop of equal requests) the gauge read
    # half of the requests in flight on the H200 (docs/real-engine.md). Absent with too few completions to trust.
    LATENCY_IN_FLIGHT = "latency_in_flight"
    # Tokens the engines decode per second, counted every decode step (sglang:realtime_tokens_total, mode decode):
    # what a pool sustains, in the units `specserve bench` measures the curves in, without waiting for requests to
    # finish. What the live curves learn from (policy.learning).
    DECODE_TOKENS = "decode_tokens_per_second"
    FRESHNESS = "freshness"  # the oldest pod's newest sample time per pool: series older than 2 scrapes are stale
    SERIES = "series"  # how many pods (scrape targets) report per pool: fewer than its Ready pods: load unknown
    # Restart's demand history (history_queries, policy.forecast): requests in flight a day and a week ago, and
    # their mean over the forecast horizon that followed
    DEMAND_DAY = "demand_1d"
    DEMAND_WEEK = "demand_7d"
    AHEAD_DAY = "ahead_1d"
    AHEAD_WEEK = "ahead_7d"


# LATENCY_IN_FLIGHT needs this many requests finished in its window: with fewer, the few long ones that finish
# in a short window swing it (its spread is 1/sqrt(completions) of the value) and it is left out.
LATENCY_MIN_COMPLETIONS = 16
# The signals demand is made of: without them a pool's load is unknown.
DEMAND_SIGNALS = (Signal.RUNNING, Signal.QUEUED, Signal.FRESHNESS)
# The history signals and the lookback (s) each reads: their queries need a horizon (history_queries).
HISTORY_SIGNALS = {
    Signal.DEMAND_DAY: (86400, False),
    Signal.DEMAND_WEEK: (604800, False),
    Signal.AHEAD_DAY: (86400, True),
    Signal.AHEAD_WEEK: (604800, True),
}
# The signals every round reads.
LOAD_SIGNALS = tuple(s for s in Signal if s not in HISTORY_SIGNALS)


@dataclass(frozen=True, order=True)
class PoolKey:
    namespace: str
    name: str  # the SpecServe
    pool: str  # speculative, baseline or engine (render.manifests.PoolRole)


@dataclass(frozen=True)
class Query:
    signal: Signal
    promql: str
    key: PoolKey | None = None  # None: grouped, each result's labels name its pool; else the one pool it reads


@dataclass(frozen=True)
class Windows:
    """Range windows of one round, in whole seconds."""

    smooth: int  # avg_over_time of the gauges: about two evaluation intervals
    rate: int  # rate() and histogram quantiles need several scrapes in the window

    @classmethod
    def of(cls, evaluation_seconds: float, scrape_seconds: float) -> Windows:
        smooth = max(2 * evaluation_seconds, 2 * scrape_seconds)
        return cls(smooth=math.ceil(smooth), rate=math.ceil(max(smooth, 4 * scrape_seconds)))


def _expr(signal: Signal, matchers: str, windows: Windows, by: tuple[str, ...]) -> str:
    group = f" by ({', '.join(by)})" if by else ""
    bucket = f" by ({', '.join((*by, 'le'))})"

    def quantile(q: float, histogram: str) -> str:
        return f"histogram_quantile({q}, sum{bucket} (rate({histogram}_bucket{{{matchers}}}[{windows.rate}s])))"

    smooth = f"[{windows.smooth}s]"
    match signal:
        case Signal.RUNNING:
            return f"sum{group} (avg_over_time(sglang:num_running_reqs{{{matchers}}}{smooth}))"
        case Signal.QUEUED:
            return f"sum{group} (avg_over_time(sglang:num_queue_reqs{{{matchers}}}{smooth}))"
        case Signal.TOKENS:
            return f"sum{group} (rate(sglang:generation_tokens_total{{{matchers}}}[{windows.rate}s]))"
        case Signal.TTFT_P50:
            return quantile(0.5, "sglang:time_to_first_token_seconds")
        case Signal.TTFT_P99:
            return quantile(0.99, "sglang:time_to_first_token_seconds")
        case Signal.TPOT_P50:
            return quantile(0.5, "sglang:request_time_per_output_token_seconds")
        case Signal.TPOT_P99:
            return quantile(0.99, "sglang:request_time_per_output_token_seconds")
        case Signal.ACCEPT_LENGTH:
            return f"avg{group} (avg_over_time(sglang:spec_accept_length{{{matchers}}}{smooth}))"
        case Signal.GEN_THROUGHPUT:
            return f"sum{group} (avg_over_time(sglang:gen_throughput{{{matchers}}}{smooth}))"
        case Signal.DECODE_TOKENS:
            return f'sum{group} (rate(sglang:realtime_tokens_total{{mode="decode",{matchers}}}[{windows.rate}s]))'
        case Signal.LATENCY_IN_FLIGHT:
            e2e = "sglang:e2e_request_latency_seconds"
            on = f" on ({', '.join(by)})" if by else " on ()"
            seconds = f"sum{group} (rate({e2e}_sum{{{matchers}}}[{windows.rate}s]))"
            finished = f"sum{group} (increase({e2e}_count{{{matchers}}}[{windows.rate}s]))"
            return f"{seconds} and{on} ({finished} >= {LATENCY_MIN_COMPLETIONS})"
        case Signal.SPEC_STEPS:
            return f"avg{group} (sglang:spec_num_steps{{{matchers}}})"  # the steps active now
        case Signal.FRESHNESS:
            return f"min{group} (timestamp(sglang:num_running_reqs{{{matchers}}}))"
        case Signal.SERIES:
            # pods, not series: a pod may export one series per scheduler rank; `instance` is the scrape target
            per_pod = ", ".join((*by, "instance"))
            return f"count{group} (count by ({per_pod}) (sglang:num_running_reqs{{{matchers}}}))"
        case Signal.DEMAND_DAY | Signal.DEMAND_WEEK | Signal.AHEAD_DAY | Signal.AHEAD_WEEK:
            raise ValueError(f"{signal} needs a horizon: see history_queries")


def grouped_queries(windows: Windows) -> list[Query]:
    """One query per signal for every SpecServe labelled by our PodMonitor."""
    return [Query(signal, _expr(signal, DEFAULT_MATCHERS, windows, GROUP_LABELS)) for signal in LOAD_SIGNALS]


class SelectorError(ValueError):
    """The seriesSelector template cannot be filled in (worded for users, names the field)."""


def render_selector(template: str, namespace: str, name: str, pool: str) -> str:
    """The matchers for one pool. The API refused any other selector already; checked again here, where the
    text becomes PromQL, so that nothing but label matchers on the SpecServe's namespace is ever sent."""
    if (problem := selector.selector_problem(template)) is not None:
        raise SelectorError(f"{SELECTOR_FIELD}: {problem}")
    try:
        return string.Template(template).substitute(namespace=namespace, name=name, pool=pool)
    except (KeyError, ValueError) as exc:
        raise SelectorError(
            f"{SELECTOR_FIELD}: only $namespace, $name and $pool may be substituted ({exc!r} in {template!r})"
        ) from exc


def selector_queries(template: str, namespace: str, name: str, pools: tuple[str, ...], windows: Windows) -> list[Query]:
    """A SpecServe's own queries from its seriesSelector: one per signal and pool."""
    out = []
    for pool in pools:
        matchers = render_selector(template, namespace, name, pool)
        key = PoolKey(namespace, name, pool)
        out += [Query(signal, _expr(signal, matchers, windows, ()), key) for signal in LOAD_SIGNALS]
    return out


HORIZON_STEP = 300  # s: horizons are rounded up to this, so SpecServes with similar horizons share queries
HORIZON_MAX = 6 * 3600  # s: a forecast further ahead than this is not worth reading


def horizon_of(seconds: float) -> int:
    """The forecast horizon actually queried: rounded up to HORIZON_STEP, within [HORIZON_STEP, HORIZON_MAX]."""
    steps = math.ceil(max(seconds, 1.0) / HORIZON_STEP)
    return min(steps * HORIZON_STEP, HORIZON_MAX)


def _history_expr(signal: Signal, matchers: str, windows: Windows, horizon: int, by: tuple[str, ...]) -> str:
    """Demand (running + queued) as Prometheus recorded it `lookback` ago: smoothed as the live signal is, or
    averaged over the `horizon` that followed (`offset lookback - horizon` ends the range there). Two sums, not a
    regex on __name__: the two gauges of one pod share their labels once the name is dropped."""
    lookback, ahead = HISTORY_SIGNALS[signal]
    group = f" by ({', '.join(by)})" if by else ""
    window, offset = (horizon, lookback - horizon) if ahead else (windows.smooth, lookback)
    parts = (
        f"sum{group} (avg_over_time({metric}{{{matchers}}}[{window}s] offset {offset}s))"
        for metric in ("sglang:num_running_reqs", "sglang:num_queue_reqs")
    )
    return " + ".join(parts)


def history_queries(windows: Windows, horizon: int) -> list[Query]:
    """Restart's demand history for every SpecServe labelled by our PodMonitor: four grouped queries."""
    return [Query(s, _history_expr(s, DEFAULT_MATCHERS, windows, horizon, GROUP_LABELS)) for s in HISTORY_SIGNALS]


def selector_history_queries(
    template: str, namespace: str, name: str, pools: tuple[str, ...], windows: Windows, horizon: int
) -> list[Query]:
    """A seriesSelector SpecServe's own history queries: four per pool."""
    out = []
    for pool in pools:
        matchers = render_selector(template, namespace, name, pool)
        key = PoolKey(namespace, name, pool)
        out += [Query(s, _history_expr(s, matchers, windows, horizon, ()), key) for s in HISTORY_SIGNALS]
    return out

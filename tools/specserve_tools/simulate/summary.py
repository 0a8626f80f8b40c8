"""Per-policy figures from a Run: tokens, goodput, latency percentiles, switches, downtime, gain captured."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from specserve_tools.simulate.histogram import Histogram
from specserve_tools.simulate.run import Run


@dataclass(frozen=True)
class Summary:
    name: str
    role: str  # speculative | baseline | fixed | naive | specserve | optimum
    output_tokens: float
    goodput_tokens: float
    requests_completed: float
    requests_arrived: float
    ttft_mean: float | None
    ttft_p50: float | None
    ttft_p99: float | None
    tpot_mean: float | None
    tpot_p50: float | None
    tpot_p99: float | None
    tpot_token_mean: float | None  # per output token (token-weighted): what the open-loop ranking uses
    switches: int
    weight_changes: int
    restarts_into_speculative: int
    restarts_into_baseline: int
    restart_downtime_seconds: float  # replica-seconds serving nothing while restarting
    gain_captured: float | None = None  # (this - best static) / (optimum - best static), on goodput
    latency_gain_captured: float | None = None  # open loop: the same on mean TPOT (lower is better)

    def row(self) -> dict[str, object]:
        return dict(self.__dict__)


def summarise(run: Run, role: str) -> Summary:
    stats = list(run.pools.values())
    ttft = functools.reduce(Histogram.merge, (s.ttft for s in stats), Histogram())
    tpot = functools.reduce(Histogram.merge, (s.tpot for s in stats), Histogram())
    ttft_p50, ttft_p99 = ttft.quantiles((0.5, 0.99))
    tpot_p50, tpot_p99 = tpot.quantiles((0.5, 0.99))
    served = sum(s.served_tokens for s in stats)
    return Summary(
        name=run.name,
        role=role,
        output_tokens=sum(s.served_tokens for s in stats),
        goodput_tokens=sum(s.good_tokens for s in stats),
        requests_completed=sum(s.completed for s in stats),
        requests_arrived=sum(s.arrived for s in stats),
        ttft_mean=ttft.mean(),
        ttft_p50=ttft_p50,
        ttft_p99=ttft_p99,
        tpot_mean=tpot.mean(),
        tpot_p50=tpot_p50,
        tpot_p99=tpot_p99,
        tpot_token_mean=sum(s.tpot_token_seconds for s in stats) / served if served > 0 else None,
        switches=run.switches,
        weight_changes=run.weight_changes,
        restarts_into_speculative=run.restarts_into_speculative,
        restarts_into_baseline=run.restarts_into_baseline,
        restart_downtime_seconds=sum(s.down_replica_seconds for s in stats),
    )


def bound_summary(name: str, goodput: float, served: float, tpot_mean: float | None) -> Summary:
    """The optimum's row: a bound, not a run (no latency percentiles, switches or requests)."""
    return Summary(name=name, role="optimum", output_tokens=served, goodput_tokens=goodput, requests_completed=0.0,
                   requests_arrived=0.0, ttft_mean=None, ttft_p50=None, ttft_p99=None, tpot_mean=None, tpot_p50=None,
                   tpot_p99=None, tpot_token_mean=tpot_mean, switches=0, weight_changes=0, restarts_into_speculative=0,
                   restarts_into_baseline=0, restart_downtime_seconds=0.0)  # fmt: skip


MIN_GAP = 1e-6  # relative: an optimum this close to the best static leaves no gain to capture


def gain(policy: float, best_static: float, optimum: float) -> float | None:
    gap = optimum - best_static
    if gap <= MIN_GAP * max(abs(optimum), 1.0):
        return None
    return (policy - best_static) / gap

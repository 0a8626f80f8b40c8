"""TrafficSplit: the closed-loop trim. Hold the best split's requests in flight by watching where they are.

The weights (weights.py) are open loop: they set arrival shares and trust the curves' flow balance to put the
requests where the best split wants them. Where a pool's curve dips (illustrative-crossover-8b's speculative
pool peaks at 48 in flight and serves less up to 64), the best split sits on an edge that no fixed weight holds:
one weight point above the flow-balance weight the speculative pool runs away past the dip, one below it settles
several requests short. The robust weights then lean towards the cheap side and give up a fraction of a percent
for as long as the load lasts.

The trim closes the loop on what the pools report: the requests in flight per pool (running + queued, smoothed
over the query window). Near the band's weights it moves the speculative weight one point at a time towards the
split that serves the most, and only when all of this holds:

- both pools have Ready replicas and both are observed, the best split for the observed demand is mixed and so
  are the weights (the trim never empties a pool, never crosses the 50/50 line: min dwell and weights.MODE_GAIN
  keep deciding the dominant pool);
- the observed split serves more than TRIM_LOSS less than the best split for the same demand (at the curves:
  goodput, then tokens/s): a split the band's weights already hold well is left alone, so weights that settle
  within a point of the best split do not chatter between two neighbours;
- the requests are not already moving the right way: at the observed loads the current weights' arrivals exceed
  (or fall short of) what the pool completes in the direction of the best split (weights.py's h(c) > 0 below
  it, < 0 above it). A step already made shows in the gauges before the next one is taken;
- the last weight change is at least TRIM_SETTLE evaluation intervals old: the gauges are averaged over about
  two intervals (metrics.promql.Windows), so a reading after that is of the weights now in force.

Where the best split sits on an edge, this holds it by alternating between the two weights around it: one lets
the pool fill up to the edge, the other lets it drain back, each kept until the split loses TRIM_LOSS again. The
weights stay within TRIM_REACH points of the dead band; further out the open-loop rules (traffic.py) decide.
"""

from __future__ import annotations

from dataclasses import dataclass

from specserve.policy.curves import ModeCurves
from specserve.policy.split import Split, best_split, kinks, served

TRIM_LOSS = 0.0025  # relative: what the observed split may serve less than the best one before the trim acts
TRIM_REACH = 3  # points beyond the dead band the trim may take the speculative weight
TRIM_SETTLE = 2  # evaluation intervals after a weight change before the trim reads the pools again


@dataclass(frozen=True)
class Observed:
    """The split the pools report, and what the curves say about it."""

    split: Split  # at the observed requests in flight per pool
    best: Split  # the best split of the same demand
    loss: float  # relative: how much less the observed split serves than the best one

    @property
    def direction(self) -> int:
        """+1: the speculative pool holds too few requests (raise its weight); -1: too many."""
        return 1 if self.split.speculative < self.best.speculative else -1


def shortfall(split: Split, best: Split, slo: float | None) -> float:
    """How much less `split` serves than `best`, relative (goodput with an SLO, tokens/s without)."""
    top, got = (best.goodput, split.goodput) if slo is not None else (best.tokens_per_second, split.tokens_per_second)
    return max(0.0, 1 - got / top) if top > 0 else 0.0


def observe(
    curves: ModeCurves, c_spec: float, c_base: float, n_spec: int, n_base: int, slo: float | None = None
) -> Observed | None:
    """The observed split against the best one; None where there is nothing to trim (no load, a pool without
    replicas, or a best split on one pool only)."""
    demand = c_spec + c_base
    if demand <= 0 or n_spec <= 0 or n_base <= 0:
        return None
    best = best_split(curves, demand, n_spec, n_base, slo)
    if not 0 < best.speculative < demand:
        return None
    now = served(curves, c_spec, demand, n_spec, n_base, slo)
    return Observed(now, best, shortfall(now, best, slo))


def drift(spec_weight: int, split: Split) -> float:
    """Tokens/s of arrivals the speculative weight sends to the speculative pool beyond what it completes, at the
    split's loads (weights.py's h(c)): > 0, its requests in flight grow; < 0, they shrink."""
    w = spec_weight / 100
    return w * split.baseline_tps - (1 - w) * split.speculative_tps


def heading(
    curves: ModeCurves,
    spec_weight: int,
    c_spec: float,
    demand: float,
    n_spec: int,
    n_base: int,
    slo: float | None = None,
) -> Split:
    """Where the requests settle from `c_spec` in flight on the speculative pool if `spec_weight` stays: h(c) is
    followed from there in the direction of its sign to its first zero (exact: h is piecewise linear between the
    kinks), or to an end (all of the demand on one pool)."""

    def h(x: float) -> float:
        return drift(spec_weight, served(curves, x, demand, n_spec, n_base))

    h0 = h(c_spec)
    if h0 == 0:
        return served(curves, c_spec, demand, n_spec, n_base, slo)
    xs = kinks(curves, demand, n_spec, n_base)
    path = [x for x in xs if x > c_spec] if h0 > 0 else [x for x in reversed(xs) if x < c_spec]
    x0, h_0 = c_spec, h0
    for x in path:
        hx = h(x)
        if (hx <= 0) if h0 > 0 else (hx >= 0):
            root = x0 + (x - x0) * h_0 / (h_0 - hx)
            return served(curves, root, demand, n_spec, n_base, slo)
        x0, h_0 = x, hx
    return served(curves, x0, demand, n_spec, n_base, slo)


def passes_best(settled: Split, observed: Observed) -> bool:
    """Whether the requests, on their way from the observed split to where they settle, pass the best split."""
    return (settled.speculative - observed.best.speculative) * observed.direction >= 0


def trim_weight(
    curves: ModeCurves,
    spec_weight: int,
    seen: Observed,
    reach: tuple[int, int],
    n_spec: int,
    n_base: int,
    slo: float | None = None,
) -> int | None:
    """The speculative weight the trim moves to, within `reach` (inclusive): the nearest one towards the best split
    from which the requests, left alone, pass the best split or settle within TRIM_LOSS of it; failing that, the
    one in reach from which they settle best, if better than staying. None: no weight in reach does better."""
    c, demand = seen.split.speculative, seen.split.demand
    stay = shortfall(heading(curves, spec_weight, c, demand, n_spec, n_base, slo), seen.best, slo)
    chosen, least = None, stay
    w = spec_weight + seen.direction
    while reach[0] <= w <= reach[1]:
        goes = heading(curves, w, c, demand, n_spec, n_base, slo)
        loss = shortfall(goes, seen.best, slo)
        if passes_best(goes, seen) or loss <= TRIM_LOSS:
            return w
        if loss < least:
            chosen, least = w, loss
        w += seen.direction
    return chosen

"""TrafficSplit: the closed-loop trim. Hold the best split's requests in flight by watching where they are.

The weights (weights.py) are open loop: they set arrival shares and trust the curves' flow balance to put the
requests where the best split wants them. Where a pool's curve dips (illustrative-crossover-8b's speculative
pool peaks at 48 in flight and serves less up to 64), the best split sits on an edge that no fixed weight holds:
one weight point above the flow-balance weight the speculative pool runs away past the dip, one below it settles
several requests short. The robust weights then lean towards the cheap side and give up a fraction of a percent
for as long as the load lasts.

The trim closes the loop on what the pools report: the requests in flight per pool (running + queued, smoothed
over the query window). Within TRIM_REACH points of the dead band it moves the speculative weight towards the
split that serves the most (to the nearest weight from which the requests get there: `trim_weight`), and only
when all of this holds (traffic.trim checks them in this order):

- both pools have Ready replicas and both are observed, the best split for the observed demand is mixed and so
  are the weights (the trim never empties a pool, never crosses the 50/50 line: min dwell and weights.MODE_GAIN
  keep deciding the dominant pool);
- the best split is bounded by the curves, not by the TPOT SLO (`Observed.on_slo_edge`): past an SLO edge every
  request on the pool turns late, a cliff the open-loop weights keep their distance from;
- the open-loop target cannot hold the best split: at its worst settling point (weights.settle) it serves more
  than TRIM_LOSS less than the best split of the observed demand. Where it can, the dead band and the windows
  decide, and demand wandering inside the band writes nothing;
- the observed split serves more than TRIM_LOSS less than the best split for the same demand (at the curves:
  goodput, then tokens/s), so weights that settle within a point of the best split do not chatter;
- the requests, left alone under the current weights, would not pass the best split on their way to where they
  settle (`heading`: weights.py's h(c) followed from the observed loads), or would settle more than TRIM_LOSS
  short of it. A step already made is given time to show;
- the last weight change is at least TRIM_SETTLE evaluation intervals old: the gauges are averaged over about
  two intervals (metrics.promql.Windows), so a reading after that is of the weights now in force.

Where the best split sits on an edge, this holds it by alternating between the two weights around it: one lets
the pool fill up to the edge, the other lets it drain back, each kept until the split loses TRIM_LOSS again
(on illustrative-crossover-8b at 180 in flight: 46/54 and 47/53, about one write a minute). Further than
TRIM_REACH from the band, the open-loop rules (traffic.py) decide.
"""

from __future__ import annotations

from dataclasses import dataclass

from specserve.policy.curves import ModeCurves
from specserve.policy.split import SLO_MARGIN, Split, best_split, kinks, served

TRIM_LOSS = 0.0025  # relative: what the observed split may serve less than the best one before the trim acts
TRIM_REACH = 3  # points beyond the dead band the trim may take the speculative weight
TRIM_SETTLE = 2  # evaluation intervals after a weight change before the trim reads the pools again
EDGE = 1e-6  # relative: closer than this to the planned TPOT limit (or goodput below tokens/s) is on the edge


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

    def on_slo_edge(self, slo: float | None) -> bool:
        """Whether the best split is bounded by the TPOT SLO rather than by the curves: it fills a pool up to its
        SLO (planned at SLO_MARGIN of it), or leaves tokens over the SLO (overload: one pool filled up to it, the
        excess late elsewhere). Past that edge every request on the pool turns late: a cliff, not a slope. The
        loads wander around any point held, and a trim towards or away from the edge leaves the weights where
        the open-loop windows hold them, so the open-loop weights, which keep their distance, decide there."""
        if slo is None:
            return False
        best = self.best
        if best.goodput < best.tokens_per_second * (1 - EDGE):
            return True
        limit = slo * SLO_MARGIN * (1 - EDGE)
        return any(
            tps > 0 and load / tps >= limit
            for load, tps in ((best.speculative, best.speculative_tps), (best.baseline, best.baseline_tps))
        )


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
    settles: Split | None = None,
) -> int | None:
    """The speculative weight the trim moves to, within `reach` (inclusive): the nearest one towards the best split
    from which the requests, left alone, pass the best split or settle within TRIM_LOSS of it; failing that, the
    one in reach from which they settle best, if better than staying. None: no weight in reach does better.
    `settles`: where the requests settle under `spec_weight` (`heading`), when the caller has it already."""
    c, demand = seen.split.speculative, seen.split.demand
    if settles is None:
        settles = heading(curves, spec_weight, c, demand, n_spec, n_base, slo)
    stay = shortfall(settles, seen.best, slo)
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

"""TrafficSplit: the split of the demand between the two pools that serves the most tokens/s, and the HTTPRoute
weights that produce it.

The split. Demand D (requests in flight) is shared as c_s + c_b = D. With n_s and n_b Ready replicas each pool
spreads its share evenly, so the served rate is

    g(c_s) = n_s * f_s(c_s / n_s) + n_b * f_b((D - c_s) / n_b).

Both f are piecewise linear (ModeCurves.rate: through (0, 0) below the first point, flat after the last), so g
is piecewise linear in c_s with kinks only where c_s / n_s or (D - c_s) / n_b hits a curve point: its maximum
on [0, D] is at one of those kinks or an end. We evaluate exactly those candidates (a few dozen), which makes a
call cost about 0.1 ms. Among candidates within TIE of the best, the lower mean TPOT wins (a replica at
concurrency x gives each request f(x) / x tokens/s, so TPOT = x / f(x), averaged over the D requests). In flat
(saturated) stretches g is constant and the TPOT-balanced point c_p proportional to the pool's capacity is added
as a candidate.

Light load stays on one pool. When all of the demand on one pool serves within TOKENS_TIE (2 %) of the best split
and with a lower mean TPOT, that wins: on concave curves, moving a request or two of a light load onto an idle
second pool gains ~1 % tokens/s on paper (less than measured curves resolve; bench repeats within about 5 %) and
costs ~2 % mean TPOT, and at light load latency is what speculation is for.

With a TPOT SLO (Knobs.tpot_slo) the objective is goodput first: tokens/s of the pools whose TPOT x / f(x) stays
within it (planned at SLO_MARGIN of it). The points where a pool's TPOT reaches the SLO are added as candidates
(closed form per segment), so the optimum stays exact. Under overload this keeps as many requests as fit within
the SLO on the pools that can meet it and lets the excess queue on one pool, rather than spreading it so that
every request misses.

The weights. A weight is a share of arrivals, not of concurrency. In steady state each pool completes requests
as fast as they arrive (flow balance), and its completion rate is its token rate over the mean output length. With
the same output-length distribution on both pools (the route does not look at requests), pool p's arrival share
must equal its share of served tokens/s:

    weight_p = T_p / (T_s + T_b),  T_p = n_p * f_p(c_p / n_p),

rounded to integer percentages summing to 100. By Little's law those arrival rates then hold c_p requests in
flight on each pool. At low demand the optimum (and so the weight) is all on the faster pool; above the crossover
the speculative pool usually keeps a share, because its GPUs add capacity even though each serves less.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

from specserve.api.curves import Curve
from specserve.api.models import Mode, Weights
from specserve.policy.curves import ModeCurves

TIE = 1e-6  # relative: candidates this close in goodput, then tokens/s, are ties, broken by mean TPOT
TOKENS_TIE = 0.02  # relative: what splitting must gain over one pool alone to be worth its mean TPOT
# A pool counts as within the TPOT SLO when it plans below this fraction of it: the real batch wanders around the
# planned one, and a pool planned exactly at the SLO spends half its time over it.
SLO_MARGIN = 0.9
IDLE_DEMAND = 1e-3  # the split at zero demand is the limit at a vanishing one: the pool with the steeper start


@dataclass(frozen=True)
class Split:
    demand: float
    speculative: float  # requests in flight on the speculative pool
    baseline: float
    speculative_tps: float  # tokens/s the speculative pool serves at that load
    baseline_tps: float
    mean_tpot: float  # seconds per output token, averaged over the requests in flight (inf when nothing serves)
    goodput: float = 0.0  # tokens/s of the pools within the TPOT SLO (all of them without an SLO)

    @property
    def tokens_per_second(self) -> float:
        return self.speculative_tps + self.baseline_tps


def served(
    curves: ModeCurves, c_spec: float, demand: float, n_spec: int, n_base: int, slo: float | None = None
) -> Split:
    """What the two pools serve with c_spec of the demand on the speculative pool; `slo`: the TPOT goal, seconds."""
    c_spec = min(max(c_spec, 0.0), demand)
    c_base = demand - c_spec
    t_spec = n_spec * curves.rate(Mode.SPECULATIVE, c_spec / n_spec) if n_spec > 0 and c_spec > 0 else 0.0
    t_base = n_base * curves.rate(Mode.BASELINE, c_base / n_base) if n_base > 0 and c_base > 0 else 0.0
    tpot = 0.0
    good = 0.0
    for load, tps in ((c_spec, t_spec), (c_base, t_base)):
        if load > 0:
            # load requests share tps tokens/s: each waits load / tps seconds per token
            pool_tpot = load / tps if tps > 0 else float("inf")
            tpot += load * pool_tpot
            if slo is None or pool_tpot <= slo * SLO_MARGIN:
                good += tps
    return Split(demand, c_spec, c_base, t_spec, t_base, tpot / demand if demand > 0 else 0.0, good)


def kinks(curves: ModeCurves, demand: float, n_spec: int, n_base: int, slo: float | None = None) -> list[float]:
    """The speculative loads in [0, demand] where the served rate can bend, sorted: the ends, where either pool's
    per-replica load hits one of its curve's points, and (with an SLO) where a pool's TPOT reaches it."""
    spec_xs: tuple[float, ...] = curves.speculative.xs
    base_xs: tuple[float, ...] = curves.baseline.xs
    if slo is not None:
        spec_xs += slo_loads(curves.speculative, slo * SLO_MARGIN)
        base_xs += slo_loads(curves.baseline, slo * SLO_MARGIN)
    xs = {0.0, demand}
    xs.update(n_spec * x for x in spec_xs if n_spec * x < demand)
    xs.update(demand - n_base * x for x in base_xs if n_base * x < demand)
    return sorted(xs)


@lru_cache(maxsize=256)
def slo_loads(curve: Curve, slo: float) -> tuple[float, ...]:
    """Per-replica loads x where the TPOT x / f(x) equals `slo`: on each segment f is linear, so x = slo * f(x)
    has one closed-form root; beyond the last point f is flat (x = slo * y_last). Below the first point f runs
    through the origin and the TPOT is constant: no root there."""
    out = []
    for (x0, y0), (x1, y1) in itertools.pairwise(curve.points()):
        m = (y1 - y0) / (x1 - x0)
        if 1 / slo != m:
            x = (y0 - m * x0) / (1 / slo - m)
            if x0 <= x <= x1:
                out.append(x)
    last = slo * curve.ys[-1]
    if last >= curve.xs[-1]:
        out.append(last)
    return tuple(out)


def best_split(curves: ModeCurves, demand: float, n_spec: int, n_base: int, slo: float | None = None) -> Split:
    """The split of `demand` that serves the most goodput (tokens/s of pools within the TPOT SLO; all tokens/s
    without one), then the most tokens/s, then the lowest mean TPOT; but one pool alone when it comes within
    TOKENS_TIE of that and has the lower mean TPOT. A pool with no Ready replica gets nothing."""
    d = max(demand, IDLE_DEMAND)
    if n_spec <= 0 or n_base <= 0:
        return served(curves, d if n_spec > 0 else 0.0, d, n_spec, n_base, slo)
    candidates = set(kinks(curves, d, n_spec, n_base, slo))
    cap_s = n_spec * curves.speculative.ys[-1]
    cap_b = n_base * curves.baseline.ys[-1]
    if cap_s + cap_b > 0:
        candidates.add(d * cap_s / (cap_s + cap_b))
    splits = [served(curves, c, d, n_spec, n_base, slo) for c in sorted(candidates)]  # 0 and d always in
    best = splits[0]
    for s in splits[1:]:
        if better(s, best):
            best = s
    # One pool alone (splits[0]: all on baseline, splits[-1]: all on speculation) when the split gains less.
    near = [s for s in (splits[0], splits[-1]) if _within(s, best, TOKENS_TIE) and s.mean_tpot < best.mean_tpot]
    return min(near, key=lambda s: s.mean_tpot, default=best)


def _within(a: Split, b: Split, tie: float) -> bool:
    return a.goodput >= b.goodput * (1 - tie) and a.tokens_per_second >= b.tokens_per_second * (1 - tie)


def better(a: Split, b: Split) -> bool:
    """More goodput than b beyond TIE; on a tie more tokens/s; on a tie again a lower mean TPOT."""
    for x, y in ((a.goodput, b.goodput), (a.tokens_per_second, b.tokens_per_second)):
        top = max(x, y)
        if x > y + TIE * top:
            return True
        if x < y - TIE * top:
            return False
    return a.mean_tpot < b.mean_tpot


def weights_for(split: Split) -> Weights:
    """Flow-balance weights (see the module docstring): arrival shares equal to served-token shares."""
    total = split.tokens_per_second
    idle = 100 if split.speculative > 0 else 0
    spec = round(100 * split.speculative_tps / total) if total > 0 else idle
    return Weights(speculative=spec, baseline=100 - spec)


def target_weights(
    curves: ModeCurves, demand: float, n_spec: int, n_base: int, slo: float | None = None
) -> tuple[Weights, Split]:
    split = best_split(curves, demand, n_spec, n_base, slo)
    return weights_for(split), split

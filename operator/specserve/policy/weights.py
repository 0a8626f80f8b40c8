"""TrafficSplit: from the best split to weights that actually hold it, and the dead band around them.

Weights set arrival shares; the requests in flight per pool then settle where each pool completes what it is sent
(split.py's flow balance). With n_s, n_b Ready replicas, a speculative weight w (as a fraction) and demand D, the
speculative pool's load c moves as

    dc/dt  ∝  h(c) = w * T_b(D - c) - (1 - w) * T_s(c)

and settles where h crosses zero downwards (a stable point). When both curves rise there is one such point and
the flow-balance weight of the best split holds exactly that split. Measured curves do not always rise: a
speculative pool past its peak (illustrative-crossover-8b dips from 48 to 64 in flight) has two stable points, or
one far beyond the peak, and one weight point too many can send dozens of requests into a saturated pool (-4 %
tokens/s). So the policy scores each weight near the flow-balance one by the *worst* point it can settle at,
averaged over demands D(1-h) .. D(1+h) (the demand will wander inside the band while the weights hold), and
takes the best. Under load this leans a point or two towards the baseline: the side where a wrong guess is cheap.

With a TPOT SLO the score is goodput first (then tokens/s), as for the split.

h(c) is piecewise linear between the same kinks as the served rate (split.py), so its zero crossings are exact.
Targets are memoised on the demand rounded to a 2 % geometric grid: a day of evaluations needs a few hundred.
"""

from __future__ import annotations

import math
from functools import lru_cache

from specserve.api.models import Weights
from specserve.policy.curves import ModeCurves
from specserve.policy.split import Split, best_split, better, kinks, served, weights_for

GRID = 1.02  # demands are rounded to powers of GRID before planning
MODE_GAIN = 0.005  # the least relative gain that pays for moving the dominant pool across the 50/50 line
BELOW, ABOVE = 8, 2  # weights tried below / above the flow-balance weight of the best split


def settle(
    curves: ModeCurves, spec_weight: int, demand: float, n_spec: int, n_base: int, slo: float | None = None
) -> Split:
    """The worst split (least goodput, then fewest tokens/s) that `spec_weight` can settle at for `demand`."""
    if spec_weight <= 0 or n_spec <= 0:
        return served(curves, 0.0, demand, n_spec, n_base, slo)
    if spec_weight >= 100 or n_base <= 0:
        return served(curves, demand, demand, n_spec, n_base, slo)
    w = spec_weight / 100
    xs = kinks(curves, demand, n_spec, n_base)
    splits = [served(curves, x, demand, n_spec, n_base) for x in xs]
    hs = [w * s.baseline_tps - (1 - w) * s.speculative_tps for s in splits]
    worst: Split | None = None
    for i in range(len(xs) - 1):
        if hs[i] > 0 >= hs[i + 1]:
            x = xs[i] + (xs[i + 1] - xs[i]) * hs[i] / (hs[i] - hs[i + 1])
            s = served(curves, x, demand, n_spec, n_base, slo)
            if worst is None or better(worst, s):
                worst = s
    return worst if worst is not None else served(curves, demand, demand, n_spec, n_base, slo)


def rounded(demand: float) -> float:
    if demand <= 0:
        return 0.0
    return float(GRID ** round(math.log(demand) / math.log(GRID)))


def _fraction(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 1.0


@lru_cache(maxsize=8192)
def _target(
    curves: ModeCurves, demand: float, n_spec: int, n_base: int, spread: float, slo: float | None
) -> tuple[int, Split]:
    ideal = best_split(curves, demand, n_spec, n_base, slo)
    first = weights_for(ideal).speculative
    if n_spec <= 0 or n_base <= 0 or first in (0, 100):
        return first, ideal
    demands = [demand * (1 - spread), demand, demand * (1 + spread)] if spread > 0 else [demand]
    bests = [best_split(curves, d, n_spec, n_base, slo) for d in demands]

    def score(w: int) -> tuple[float, float, int]:
        """Goodput, then tokens/s, at the worst settling point as fractions of the best, summed over the
        demands; ties go to the weight closest to the flow-balance one."""
        worst = [settle(curves, w, d, n_spec, n_base, slo) for d in demands]
        pairs = list(zip(worst, bests, strict=True))
        good = sum(_fraction(s.goodput, b.goodput) for s, b in pairs)
        tokens = sum(_fraction(s.tokens_per_second, b.tokens_per_second) for s, b in pairs)
        return round(good, 6), round(tokens, 6), -abs(w - first)

    candidates = range(max(0, first - BELOW), min(100, first + ABOVE) + 1)
    return max(candidates, key=score), ideal


def robust_weights(
    curves: ModeCurves, demand: float, n_spec: int, n_base: int, spread: float, slo: float | None = None
) -> Weights:
    """The weights to set for `demand` (robust over demand x(1±spread))."""
    w, _ = _target(curves, rounded(demand), n_spec, n_base, spread, slo)
    return Weights(speculative=w, baseline=100 - w)


def weight_band(
    curves: ModeCurves, demand: float, n_spec: int, n_base: int, hysteresis: float, slo: float | None = None
) -> tuple[Weights, Split, int, int]:
    """The target at `demand`, and the range of targets at D(1-h), D and D(1+h): the dead band. Weights inside it
    are as good as the target for any demand the band does not tell apart, so they are kept."""
    goal = robust_weights(curves, demand, n_spec, n_base, hysteresis, slo)
    ws = [goal.speculative]
    if hysteresis > 0:
        ws += [
            robust_weights(curves, demand * factor, n_spec, n_base, hysteresis, slo).speculative
            for factor in (1 - hysteresis, 1 + hysteresis)
        ]
    return goal, best_split(curves, demand, n_spec, n_base, slo), min(ws), max(ws)


def better_extreme(
    curves: ModeCurves, demand: float, n_spec: int, n_base: int, slo: float | None = None
) -> tuple[int, Split]:
    """Pools on shared GPUs: the speculative weight, 0 or 100, whose pool serves `demand` best alone (goodput,
    then tokens/s; ties to speculation, the faster per request), and what it serves."""
    all_spec, all_base = (served(curves, c, demand, n_spec, n_base, slo) for c in (demand, 0.0))
    return (0, all_base) if better(all_base, all_spec) else (100, all_spec)


def extreme_band(
    curves: ModeCurves, demand: float, n_spec: int, n_base: int, hysteresis: float, slo: float | None = None
) -> tuple[Weights, Split, int, int]:
    """weight_band for pools on shared GPUs: the better extreme at D, and the range of those at D(1-h), D and
    D(1+h) (0-100 when the band straddles the crossover: any weight is kept there)."""
    goal, split = better_extreme(curves, demand, n_spec, n_base, slo)
    ws = [goal] + [
        better_extreme(curves, demand * factor, n_spec, n_base, slo)[0]
        for factor in ((1 - hysteresis, 1 + hysteresis) if hysteresis > 0 else ())
    ]
    return Weights(speculative=goal, baseline=100 - goal), split, min(ws), max(ws)


def crossing_gain(
    curves: ModeCurves, line: int, goal: int, demand: float, n_spec: int, n_base: int, slo: float | None = None
) -> float:
    """How much more `goal` serves than staying at the 50/50 `line` (relative, at the worst settling points;
    goodput when an SLO is set). Near the crossover both pools serve alike, the best weights hover around 50/50,
    and crossing the line for a fraction of a percent would flip the dominant mode back and forth for nothing."""
    at_line = settle(curves, line, demand, n_spec, n_base, slo)
    at_goal = settle(curves, goal, demand, n_spec, n_base, slo)
    if slo is not None and at_line.goodput > 0:
        return at_goal.goodput / at_line.goodput - 1
    if at_line.tokens_per_second <= 0:
        return float("inf")
    return at_goal.tokens_per_second / at_line.tokens_per_second - 1

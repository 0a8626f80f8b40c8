"""A shape-constrained fit of one measured throughput curve (total output tokens/s against concurrency).

The shape: a closed-loop server's throughput never grows faster than proportionally to the requests in flight:
each request is at most as fast as it was alone, so the per-request rate tokens/s / C never rises with load. In
log-log terms, between two measured levels the slope of log(tok/s) against log(C) is at most 1: saturating.

What the shape does not say, on purpose:
- not concave: measured curves are convex at low load where batching helps (the EAGLE-3 paper's H100
  speculative curve rises 182 tok/s per request from C=1 to 2 and 249 from 2 to 4), so a concave fit would bend
  real data;
- not non-decreasing: throughput can fall under overload (preemption, KV-cache pressure: the seed baseline
  measured 784 tok/s at 70 and 762 at 100; the illustrative profile's speculation falls from 48 to 64), and
  forcing it up would hide exactly the high-load loss that makes a crossover.

The fit is a weighted least squares in log space (relative errors, which is how bench noise behaves), solved
with scipy's bounded-variable least squares on the increments. A curve that already has the shape, or exact
data (no noise to weigh against the shape), comes back unchanged, so clean curves keep their exact crossover."""

from __future__ import annotations

import math
from collections.abc import Sequence


def has_shape(xs: Sequence[float], ys: Sequence[float]) -> bool:
    """ys/xs non-increasing (see the module docstring), up to rounding (a fitted curve sits on the bound)."""
    return all(y1 * x0 <= y0 * x1 * (1 + 1e-9) for x0, x1, y0, y1 in zip(xs, xs[1:], ys, ys[1:], strict=False))


def saturating_fit(xs: Sequence[float], ys: Sequence[float], rel_sigma: Sequence[float]) -> list[float]:
    """The closest curve with the shape, weighting each level by 1 / its relative uncertainty (a level measured
    tighter pulls harder). xs strictly increasing and > 0; ys > 0 (a level at 0 tok/s is returned as measured)."""
    if len(xs) != len(ys) or len(xs) != len(rel_sigma):
        raise ValueError("xs, ys and rel_sigma must have the same length")
    if len(xs) < 2 or has_shape(xs, ys) or any(y <= 0 for y in ys) or not any(s > 0 for s in rel_sigma):
        return list(ys)
    import numpy as np  # noqa: PLC0415 (bench extra: imported only when a curve needs fitting)
    from scipy.optimize import lsq_linear  # noqa: PLC0415

    n = len(xs)
    # unknowns: g0 = log f(x0) and the increments d_j = log f(x_{j+1}) - log f(x_j) <= log(x_{j+1}/x_j)
    design = np.zeros((n, n))
    design[:, 0] = 1.0
    for i in range(1, n):
        design[i, 1 : i + 1] = 1.0
    floor = max(min(s for s in rel_sigma if s > 0), 1e-6)  # an exact level among noisy ones pulls hardest
    weights = np.array([1.0 / max(s, floor) for s in rel_sigma])
    target = np.log(np.array(ys, dtype=float))
    lower = np.full(n, -np.inf)
    upper = np.array([np.inf] + [math.log(xs[j + 1] / xs[j]) for j in range(n - 1)])
    solution = lsq_linear(design * weights[:, None], target * weights, bounds=(lower, upper), method="bvls")
    return [float(v) for v in np.exp(design @ solution.x)]

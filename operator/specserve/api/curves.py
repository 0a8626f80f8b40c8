"""What a valid throughput curve is, in one place: the operator (spec.switching.curves, via rules.py) and
`specserve calibrate` (before it writes one) both ask `curve_problem` (pure)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

MIN_POINTS = 2  # one point has no slope: the policy could not interpolate between modes


def curve_problem(points: Sequence[tuple[float, float]]) -> str | None:
    """Why (concurrency, tokens/s) `points` are not a usable curve, or None. Empty is valid (no curve): the
    policy then uses the crossover alone. Otherwise: at least two points, finite, concurrency > 0 and strictly
    increasing (as calibrate writes them, so a hand edit that reorders or repeats a point is caught),
    tokens/s >= 0."""
    if not points:
        return None
    if len(points) < MIN_POINTS:
        return f"has {len(points)} point; a curve needs at least {MIN_POINTS} (or none)"
    for x, y in points:
        if not (math.isfinite(x) and math.isfinite(y)):
            return f"has a non-finite point ({x}, {y})"
        if x <= 0 or y < 0:
            return f"has the point ({x:g}, {y:g}); concurrency must be > 0 and tokensPerSecond >= 0"
    for (x0, _), (x1, _) in itertools.pairwise(points):
        if x1 <= x0:
            return f"concurrency must strictly increase from point to point, but {x1:g} follows {x0:g}"
    return None

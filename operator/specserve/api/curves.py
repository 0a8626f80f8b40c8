"""Throughput curves (total output tokens/s against concurrency), pure, for every package that reads them: the
API's validation, the policy, calibrate, the emulator and the simulator.

What a valid curve is, in one place: the operator (spec.switching.curves, via rules.py) and `specserve calibrate`
(before it writes one) both ask `curve_problem`. Interpolation is piecewise linear in concurrency between measured
points, and constant (the nearest measured value) outside them: we never extrapolate a trend we did not measure."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MIN_POINTS = 2  # one point has no slope: the policy could not interpolate between modes
# Bounds a measured curve stays within (the API's schema carries them too): far beyond any engine, yet small
# enough that sums and products over a curve's points stay finite (1.7e308 tokens/s overflows the first sum).
CONCURRENCY_MAX = 100_000.0  # requests in flight per replica
TOKENS_PER_SECOND_MAX = 1e9  # output tokens/s of one replica
TPOT_SLO_MIN = 0.001  # s per output token: 1000 tokens/s per stream, faster than any engine decodes
# Measured curves cross once, or a few times where noise meets the crossover; more crossings are not a
# measurement, and every crossing flips a threshold rule: refused (`specserve calibrate` smooths noise away).
MAX_CROSSINGS = 8


def shape_problem(points: Sequence[tuple[float, float]]) -> str | None:
    """Why (concurrency, tokens/s) `points` do not have a curve's shape, or None. Empty is valid (no curve):
    the policy then uses the crossover alone. Otherwise: at least two points, finite, concurrency > 0 and
    strictly increasing (as calibrate writes them, so a hand edit that reorders or repeats a point is caught),
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


def serves_nothing(points: Sequence[tuple[float, float]]) -> bool:
    """A non-empty curve at 0 tokens/s everywhere: no measurement (a failed bench), and no ratio to decide by."""
    return bool(points) and all(y == 0 for _, y in points)


ZERO_CURVE = "serves 0 tokens/s at every point (a failed measurement); re-run `specserve bench` and calibrate"


def curve_problem(points: Sequence[tuple[float, float]]) -> str | None:
    """Why `points` are not a usable curve, or None: its shape (`shape_problem`), values within the bounds
    above, and not zero everywhere. What the operator accepts as spec.switching.curves and what `specserve
    calibrate` writes."""
    problem = shape_problem(points)
    if problem is not None:
        return problem
    for x, y in points:
        if x > CONCURRENCY_MAX or y > TOKENS_PER_SECOND_MAX:
            return (
                f"has the point ({x:g}, {y:g}); concurrency must be at most {CONCURRENCY_MAX:g} and "
                f"tokensPerSecond at most {TOKENS_PER_SECOND_MAX:g}"
            )
    if serves_nothing(points):
        return ZERO_CURVE
    return None


class CurveError(ValueError):
    """A curve that cannot be used (empty, non-positive concurrency, negative or non-finite values)."""


@dataclass(frozen=True)
class Curve:
    """Sorted (concurrency, tokens/s) points; concurrencies unique and > 0."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]

    @classmethod
    def from_points(cls, points: Iterable[tuple[float, float]], what: str = "curve") -> Curve:
        pts = sorted((float(x), float(y)) for x, y in points)
        if not pts:
            raise CurveError(f"{what}: no points")
        for x, y in pts:
            if not (math.isfinite(x) and math.isfinite(y)):
                raise CurveError(f"{what}: non-finite point ({x}, {y})")
            if x <= 0:
                raise CurveError(f"{what}: concurrency must be > 0, got {x:g}")
            if y < 0:
                raise CurveError(f"{what}: tokens/s must be >= 0, got {y:g} at concurrency {x:g}")
        for (x0, _), (x1, _) in itertools.pairwise(pts):
            if x0 == x1:
                raise CurveError(f"{what}: concurrency {x0:g} appears twice")
        return cls(tuple(p[0] for p in pts), tuple(p[1] for p in pts))

    def points(self) -> list[tuple[float, float]]:
        return list(zip(self.xs, self.ys, strict=True))

    def at(self, concurrency: float) -> float:
        """Tokens/s at `concurrency`: linear between the two neighbouring points, flat beyond the ends."""
        return interpolate(self.xs, self.ys, concurrency)


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Piecewise-linear interpolation over sorted xs; clamps to the end values outside [xs[0], xs[-1]]."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, x)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def crossings(spec: Curve, base: Curve) -> list[tuple[float, int]]:
    """Every concurrency where the sign of spec - base changes, with the direction: -1 when speculation stops
    winning, +1 when it starts winning again."""
    grid = sorted(set(spec.xs) | set(base.xs))
    diffs = [spec.at(x) - base.at(x) for x in grid]
    found: list[tuple[float, int]] = []
    for i in range(len(grid) - 1):
        d0, d1 = diffs[i], diffs[i + 1]
        if d0 > 0 >= d1:
            found.append((_root(grid[i], grid[i + 1], d0, d1), -1))
        elif d0 <= 0 < d1:
            found.append((_root(grid[i], grid[i + 1], d0, d1), +1))
    return found


def _root(x0: float, x1: float, d0: float, d1: float) -> float:
    """Zero of the line through (x0, d0) and (x1, d1); d0 and d1 straddle zero."""
    if d0 == d1:
        return x0
    return x0 + d0 * (x1 - x0) / (d0 - d1)

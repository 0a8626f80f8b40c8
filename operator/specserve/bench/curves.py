"""Throughput curves: total output tokens/s against concurrency, and how to read between measured points.

Interpolation is piecewise linear in concurrency between measured points, and constant (the nearest measured
value) outside them: we never extrapolate a trend we did not measure."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


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

"""Per-replica serving rates as exact piecewise-linear functions (numpy), for the upper bound (bound.py).

The simulation serves a replica at batch b with r(b) = T(b) for b >= 1 and T(1) x b below one request
(cluster.serving_function), T the profile's piecewise-linear curve (flat beyond its ends). So r is piecewise
linear with knots at 0, 1 and the curve's points: `Rate` holds those knots, so maxima over a range are exact
(a piecewise-linear function takes its maximum over an interval at a knot or an end).

`ok(b)`: what the replica serves when its time per output token b / r(b) meets the SLO, else 0 (the step's tokens
on a replica over the TPOT SLO never count as goodput). It jumps to 0 where the line b / slo crosses r: those
crossings are breakpoints too.

`floor()`: a concave, non-decreasing function below r (the lower envelope of the segment lines of r's
right-running minimum): the least any replica serves at a batch, for the in-flight bound's drain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
SLO_TOLERANCE = 1e-9  # relative: a replica exactly at the SLO counts as meeting it (in the bound's favour)


@dataclass(frozen=True)
class Rate:
    xs: Array  # batch knots, from 0
    ys: Array  # per-replica tokens/s at the knots; flat beyond the last

    @classmethod
    def of(cls, points: Sequence[tuple[float, float]], cap: float, scale: float = 1.0) -> Rate:
        """`points`: the profile curve's (batch, tokens/s); `scale` multiplies it (a drifting speculative curve)."""
        px = [x for x, _ in points]
        py = [y * scale for _, y in points]
        at1 = float(np.interp(1.0, px, py))
        xs = [0.0, 1.0] + [x for x in px if 1.0 < x < cap] + [cap]
        ys = [0.0, at1] + [float(np.interp(x, px, py)) for x in xs[2:]]
        return cls(np.asarray(xs), np.asarray(ys))

    def at(self, batch: Array) -> Array:
        return np.interp(batch, self.xs, self.ys)

    def slo_breaks(self, tpot: float) -> Array:
        """Batches where b / r(b) crosses `tpot` (r(b) = b / tpot), segment by segment."""
        out: list[float] = []
        if not np.isfinite(tpot):
            return np.asarray(out)  # no SLO: nothing crosses
        for x0, x1, y0, y1 in zip(self.xs[:-1], self.xs[1:], self.ys[:-1], self.ys[1:], strict=True):
            m = (y1 - y0) / (x1 - x0)
            denom = 1.0 - tpot * m
            if abs(denom) > 1e-15:
                b = tpot * (y0 - m * x0) / denom
                if x0 <= b <= x1:
                    out.append(b)
        return np.asarray(out)

    def ok(self, batch: Array, tpot: float) -> Array:
        r = self.at(batch)
        if not np.isfinite(tpot):
            return r
        return np.where(batch <= tpot * r * (1 + SLO_TOLERANCE), r, 0.0)

    def floor(self) -> Floor:
        mono = np.minimum.accumulate(self.ys[::-1])[::-1]  # right-running minimum at the knots: <= r, non-decreasing
        slopes = np.diff(mono) / np.diff(self.xs)
        intercepts = mono[:-1] - slopes * self.xs[:-1]
        return Floor(slopes, intercepts, float(mono[-1]))


@dataclass(frozen=True)
class Floor:
    """min(level, min_i(slope_i b + intercept_i)): concave (a minimum of lines), non-decreasing (every slope >= 0),
    and below r at every batch (on each segment the segment's own line is <= the interpolation of r)."""

    slopes: Array
    intercepts: Array
    level: float

    def at(self, batch: float) -> float:
        # may be negative near 0 (a steep line's extension): callers clamp after combining, keeping concavity
        return min(self.level, float(np.min(self.slopes * batch + self.intercepts)))

    @property
    def steepest(self) -> float:
        return float(np.max(self.slopes)) if self.slopes.size else 0.0


def knots(rates: Sequence[Rate], tpot: float) -> Array:
    """Every batch where one of `rates`' ok() may turn: their knots and SLO crossings."""
    parts = [np.concatenate([r.xs, r.slo_breaks(tpot)]) for r in rates]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0)

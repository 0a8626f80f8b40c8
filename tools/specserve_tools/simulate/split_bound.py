"""TrafficSplit, closed loop: the exact optimum of what weights can do, as an upper bound (the "optimum" row).

Weights only route new arrivals: a request stays on the pool it was sent to until it completes. In the fluid
model (cluster.py) the decision is therefore a control problem with a 1-D state: n_k, the requests in flight on
the speculative pool at step k (after the step's arrivals). Per step, with perfect knowledge and free weight
moves (any split of every step's arrivals, a superset of the integer weights the simulation applies once per
evaluation interval):

  reward   g_k(n) = S_ok(n) + max{ B_ok(m) : C_k - n <= m <= U_k - n, m >= 0 }
  dynamics n_{k+1} in [ x, max(x, C_{k+1} - y) ],  x = h_S(n_k),  y >= min{ h_B(m) : m >= C_k - n_k }

where S_ok, B_ok are a pool's good tokens/s with that many requests in flight (bound.py, point 1), h_P(n) = n -
(completions of pool P in a step) and [C_k, U_k] bounds the total in flight (bound.py, point 3: the clients
top up to C_k, and U_k is the in-flight bound).

Why every simulated run is one of its paths (so the maximum is a bound): let (s_k, b_k) be a run's requests in
flight on the two pools after the arrivals of step k. The run's good tokens that step are at most S_ok(s_k) +
B_ok(b_k), and C_k <= s_k + b_k <= U_k, so at most g_k(s_k). After serving, the pools hold x = h_S(s_k) and
x_b = h_B(b_k) >= y, as b_k >= C_k - s_k. Step k+1's arrivals are max(0, C_{k+1} - x - x_b), split in any way:
with none, s_{k+1} = x; else s_{k+1} lies in [x, C_{k+1} - x_b], inside [x, C_{k+1} - y]. The relaxation is
exact when the total in flight equals the clients (the usual case: it can exceed them only after the
concurrency falls faster than requests complete).

Solved by dynamic programming over cells of the state, [i d, (i+1) d] with d = 1/CELLS_PER_REQUEST, rounded
outward so that W_k(i) >= sup{V_k(n) : n in cell i}, V_k the exact value from step k on (backward induction):
- the reward of a cell is >= g_k(n) for every n in it: where U_k = C_k (the total is the clients), the exact
  sup over the cell of S_ok(n) + B_ok(C_k - n), a piecewise-linear function with downward jumps at the SLO,
  which takes its supremum at a knot or SLO crossing of either pool or an end, all tried (split_reward); where
  U_k > C_k, the sup of S_ok over the cell plus the sup of B_ok over every cell meeting [C_k - (i+1) d,
  U_k - i d] (each exact the same way);
- completions per step are min(served x dt / L, running) (cluster.Pool.serve: a pool's remaining tokens per
  request stay L, output lengths being memoryless), so over a cell h_P lies between n - (the cell's largest
  completions) and n - (its least): the lower end of the reachable set is at least z_i - maxcomp_S(i), the upper
  end at most max((i+1) d - mincomp_S(i), C_{k+1} - the least h_B lower bound over every cell at or above
  C_k - (i+1) d) (a suffix minimum: no monotonicity of h_B is assumed);
- W_k(i) = reward + the largest W_{k+1} over every cell that meets the reachable interval; cells above U_k are
  unreachable. By induction W_k(i) >= V_k(n) for every n in cell i, and the bound is the largest W_0 over the
  cells meeting [0, C_0] (the pools start empty; the first arrivals are split any way).
The rates are the simulation's own per-replica serving functions as exact piecewise-linear functions
(rates.Rate, checked against cluster.serving_function in the tests); a drifting profile's scale is rounded up
(more good tokens and more completions: both widen the reachable set or raise the reward)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specserve_tools.simulate.rates import Array, Rate, knots

CELLS_PER_REQUEST = 16  # d = 1/16 request: exact in binary, so cell edges carry no round-off
NEG = -np.inf
Index = NDArray[np.int64]
EPS = 1e-9  # in cells: outward rounding of interval ends computed in floating point


def cell_of(x: NDArray[Any] | float, d: float, up: bool) -> Index:
    """The cell [i d, (i+1) d] holding x (an edge counts in the cell above it; both hold it). x computed in
    floating point is off by far less than EPS cells: an upper end is rounded up by that, a lower end down."""
    return np.maximum(np.floor(np.asarray(x, dtype=np.float64) / d + (EPS if up else -EPS)), 0).astype(np.int64)


class PoolCells:
    """A pool's per-cell extremes over [i d, (i+1) d] for i in 0..cells-1: the most good tokens/s (TPOT SLO
    met), the most and the least tokens/s served, with n requests in flight on `replicas` replicas."""

    def __init__(self, rate: Rate, replicas: int, cap: float, tpot: float, cells: int, d: float) -> None:
        self.rate, self.replicas, self.cap, self.tpot, self.d = rate, replicas, cap, tpot, d
        bp = replicas * knots([rate], tpot) if replicas >= 1 else np.zeros(0)
        self.breaks = bp[(bp > 0) & (bp < cells * d)]  # where the good tokens/s may turn (in requests)
        self.good = _cell_extreme(rate, replicas, cap, tpot, cells, d, largest=True)
        self.most = _cell_extreme(rate, replicas, cap, math.inf, cells, d, largest=True)
        self.least = _cell_extreme(rate, replicas, cap, math.inf, cells, d, largest=False)
        self.slots = replicas * cap  # at most this many run; the rest queue

    def value(self, n: Array) -> Array:
        """Good tokens/s with n requests in flight."""
        if self.replicas < 1:
            return np.zeros_like(n)
        return self.replicas * self.rate.ok(np.minimum(n / self.replicas, self.cap), self.tpot)


def split_reward(spec: PoolCells, base: PoolCells, c: float, g: int, d: float) -> Array:
    """sup over n in cell i (i < g) of spec(n) + base(c - n), n <= c: exact (ends and every knot of either pool
    in the cell are tried)."""
    n = np.minimum(np.arange(g + 1, dtype=np.float64) * d, c)
    at = spec.value(n) + base.value(c - n)
    out = np.maximum(at[:-1], at[1:])
    knots_n = np.concatenate([spec.breaks, c - base.breaks])
    knots_n = knots_n[(knots_n > 0) & (knots_n < min(c, g * d))]
    if knots_n.size:
        np.maximum.at(out, np.floor(knots_n / d).astype(np.int64), spec.value(knots_n) + base.value(c - knots_n))
    return out


def _cell_extreme(rate: Rate, replicas: int, cap: float, tpot: float, cells: int, d: float, largest: bool) -> Array:
    if replicas < 1:
        return np.zeros(cells)

    def value(n: Array) -> Array:
        return replicas * rate.ok(np.minimum(n / replicas, cap), tpot)

    edges = np.arange(cells + 1, dtype=np.float64) * d
    at = value(edges)
    out = np.maximum(at[:-1], at[1:]) if largest else np.minimum(at[:-1], at[1:])
    bp = replicas * knots([rate], tpot)
    bp = bp[(bp > 0) & (bp < cells * d)]
    idx = np.floor(bp / d).astype(np.int64)
    inner = bp > idx * d  # on an edge: already counted
    (np.maximum if largest else np.minimum).at(out, idx[inner], value(bp[inner]))
    return out


class RangeMax:
    """Maxima of an array over index ranges [lo, hi] (a sparse table, built up to the widest range asked)."""

    def __init__(self, values: Array, widest: int) -> None:
        levels = [values]
        width = 1
        while width * 2 <= max(1, widest):
            prev = levels[-1]
            nxt = np.full_like(prev, NEG)
            if prev.size > width:
                nxt[: prev.size - width] = np.maximum(prev[: prev.size - width], prev[width:])
            levels.append(nxt)
            width *= 2
        self.table = np.stack(levels)

    def query(self, lo: Index, hi: Index) -> Array:
        """max(values[lo..hi]) per pair (lo <= hi, both in range; hi - lo + 1 <= 2 x the widest built)."""
        span = hi - lo + 1
        level = np.minimum(np.floor(np.log2(np.maximum(span, 1))).astype(np.int64), self.table.shape[0] - 1)
        out: Array = np.maximum(self.table[level, lo], self.table[level, hi - (1 << level) + 1])
        return out


NARROW = 8  # ranges at most this wide are scanned directly (the usual case: cheaper than a sparse table)


def range_max(values: Array, lo: Index, hi: Index) -> Array:
    """max(values[lo..hi]) per pair (lo <= hi, both in range)."""
    widest = int(np.max(hi - lo, initial=0)) + 1
    if widest > NARROW:
        return RangeMax(values, widest).query(lo, hi)
    out = values[lo]
    for j in range(1, widest):
        out = np.maximum(out, values[np.minimum(lo + j, hi)])
    return out


def weight_schedule_bound(
    spec: Sequence[PoolCells],
    base: PoolCells,
    scale_index: Sequence[int],
    concurrency: Sequence[float],
    in_flight: Sequence[float],
    dt: float,
    tokens_per_request: float,
) -> float:
    """max over weight schedules of the good tokens (the module doc), in tokens. `spec[scale_index[k]]` is the
    speculative pool at step k; every PoolCells has the same cells and covers at least max(in_flight) requests."""
    steps = len(concurrency)
    if steps == 0:
        return 0.0
    d = base.d
    per = tokens_per_request / dt  # served tokens/s per completion per step
    total = base.good.size

    def cell(x: NDArray[Any] | float, up: bool = True) -> Index:
        return cell_of(x, d, up)

    idx = np.arange(total, dtype=np.int64)
    z = idx * d
    # baseline: the least h_B over cell j and above (a suffix minimum), cells of the baseline pool's requests
    comp_b = np.minimum(base.most / per, z + d)
    h_b_low = np.maximum(0.0, z - comp_b)
    h_b_suffix = np.minimum.accumulate(h_b_low[::-1])[::-1]
    base_good = RangeMax(base.good, total)
    comps = [(np.minimum(p.most / per, z + d), np.minimum(p.least / per, np.minimum(z, p.slots))) for p in spec]

    top = [min(total - 1, int(cell(u))) for u in in_flight]  # the highest reachable cell per step
    later: Array = np.zeros(top[-1] + 1)  # W_{k+1}; after the last step nothing more is earned
    for k in range(steps - 1, -1, -1):
        g = top[k] + 1
        zi = z[:g]
        c, u = concurrency[k], in_flight[k]
        p = spec[scale_index[k]]
        # reward: the speculative pool's best in the cell + the baseline's best over the cells its share can be in
        lo_b = np.minimum(cell(c - zi - d, up=False), total - 1)
        hi_b = np.minimum(np.maximum(cell(u - zi), lo_b), total - 1)
        # more in flight than clients: the baseline's share is anywhere in its range
        value = (p.good[:g] + base_good.query(lo_b, hi_b) if u > c else split_reward(p, base, c, g, d)) * dt
        if k < steps - 1:
            most, least = comps[scale_index[k]]
            lo = cell(zi - most[:g], up=False)
            stay = zi + d - least[:g]
            pushed = concurrency[k + 1] - h_b_suffix[np.minimum(cell(c - zi - d, up=False), total - 1)]
            hi = np.minimum(cell(np.maximum(stay, pushed)), later.size - 1)
            ok = lo <= hi
            value = np.where(ok, value + range_max(later, np.minimum(lo, hi), hi), NEG)
        later = value
    return float(np.max(later[: min(int(cell(concurrency[0])), later.size - 1) + 1]))

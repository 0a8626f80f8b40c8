"""Restart, closed loop, one replica: the exact optimum of every restart schedule, as an upper bound.

One pool of one replica, in one mode at a time. Its state at step k is the mode and N_k, the requests in flight
(after the step's arrivals): the clients top up, so N_k = max(C_k, N'_{k-1}), N' what is left after the previous
step's completions, and nothing else moves it. A schedule only chooses when to roll (cluster.Pool, run.py):
- staying in mode m, step k serves M_m(N_k) good tokens/s (the TPOT SLO met; bound.py, point 1) and completes
  min(served x dt / L, running) requests (remaining tokens per request stay L: memoryless output lengths);
- a roll decided at step k (any k >= 1: a superset of the evaluation steps) leaves step k in mode m; the replica
  is then down for B = ceil(startup / dt) steps, serving and completing nothing while the clients still top up,
  so the pool comes back at step k + B + 1 in the other mode with max(N'_k, max C_{k+1..k+B+1}) in flight. No
  other roll starts during one (run.py waits for the roll to finish).
So the best schedule is a dynamic program over (mode, N), and every simulated Restart run is one of its paths;
TTFT is ignored (a relaxation). The reward is exact per state, unlike the per-step bound of bound.py (which
maximises over every N from C_k to a bound on it, and allows a backlog only for rolls that start drained).

The state is discretised into cells of 1/CELLS_PER_REQUEST request and rounded outward, as in split_bound.py:
W_k(m, i) >= the exact value of every N in cell i: the reward is the sup of M_m over the cell (exact: knots, SLO
crossings and ends), the completions over a cell lie between the cell's least and largest, and the next value is
the largest W_{k+1} over every cell meeting the reachable interval. Every N up to the peak concurrency so far is
kept (back-to-back rolls serve nothing, so nothing smaller bounds N for every schedule). The bound is the larger
of W_0 in either mode at N_0 = C_0 (a policy may start in either)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specserve_tools.simulate.bound import sliding_max
from specserve_tools.simulate.rates import Array
from specserve_tools.simulate.split_bound import NEG, Index, PoolCells, cell_of, range_max


def restart_schedule_bound(
    modes: Sequence[Sequence[PoolCells]],
    scale_index: Sequence[int],
    concurrency: Sequence[float],
    roll_steps: int,
    dt: float,
    tokens_per_request: float,
) -> float:
    """max over restart schedules of the good tokens (module doc). `modes[m][scale_index[k]]`: the one-replica
    pool in mode m (0 speculative, 1 baseline) at step k; every PoolCells has the same cells and covers at least
    max(concurrency)."""
    steps = len(concurrency)
    if steps == 0:
        return 0.0
    d = modes[0][0].d
    per = tokens_per_request / dt
    total = modes[0][0].good.size
    z = np.arange(total, dtype=np.float64) * d

    def cell(x: NDArray[Any] | float, up: bool = True) -> Index:
        return cell_of(x, d, up)

    # the completions' extremes per cell, per mode and scale
    comps = [[(np.minimum(p.most / per, z + d), np.minimum(p.least / per, np.minimum(z, p.slots))) for p in m]
             for m in modes]  # fmt: skip
    peak = np.maximum.accumulate(np.asarray(concurrency, dtype=np.float64))
    top = np.minimum(cell(peak), total - 1)
    # after a roll decided at step k the pool holds at least the clients of the dark steps and the next one
    window = roll_steps + 1
    ahead = sliding_max([*concurrency[1:], 0.0], window)  # ahead[k + window - 1] = max C_{k+1..k+window}
    later: list[Array] = [np.zeros(int(top[-1]) + 1), np.zeros(int(top[-1]) + 1)]  # W_{k+1} per mode
    history: deque[list[Array]] = deque(maxlen=window)  # W_{k+1} .. W_{k+window}, newest first
    for k in range(steps - 1, -1, -1):
        g = int(top[k]) + 1
        zi = z[:g]
        values: list[Array] = []
        for m in (0, 1):
            p = modes[m][scale_index[k]]
            value = p.good[:g] * dt
            if k < steps - 1:
                most, least = comps[m][scale_index[k]]
                lo = np.maximum(0.0, zi - most[:g])
                hi = zi + d - least[:g]
                c = concurrency[k + 1]
                value = value + _reach(later[m], cell(np.maximum(c, lo), up=False), cell(np.maximum(c, hi)))
                if k >= 1 and roll_steps >= 0:
                    if k + window < steps:
                        back = history[-1][1 - m]  # W_{k+window}, the other mode
                        mx = ahead[k + window - 1]
                        roll = _reach(back, cell(np.maximum(mx, lo), up=False), cell(np.maximum(mx, hi)))
                    else:
                        roll = np.zeros(g)  # the roll outlasts the trace: nothing more is served
                    value = np.maximum(value, p.good[:g] * dt + roll)
            values.append(value)
        history.appendleft(values)
        later = values
    first = int(min(cell(concurrency[0]), top[0]))
    return float(max(later[0][first], later[1][first]))


def _reach(values: Array, lo: Index, hi: Index) -> Array:
    """max(values[lo..hi]) per cell, -inf where the interval lies above every cell kept."""
    hi = np.minimum(hi, values.size - 1)
    ok = lo <= hi
    lo = np.minimum(lo, hi)
    return np.where(ok, range_max(values, lo, hi), NEG)

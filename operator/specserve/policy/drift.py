"""A change test on the learned curves' residuals (pure): a two-sided CUSUM on the median of the last few
relative residuals (observed / learned - 1).

Why the median: a burst of one or two wild readings (a scrape across a restart, a counter reset) moves the
median of five by nothing, so it cannot fire the test; a real move of the curve moves every residual and the
median with them. Why CUSUM: it adds up small consistent residuals (a 15 % move fires within ten rounds)
while zero-mean noise below DRIFT_ALLOWANCE drains away. Page's CUSUM: S+ = max(0, S+ + r - k), S- = max(0, S- -
r - k); it fires when either passes h, and then starts again from zero.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

DRIFT_ALLOWANCE = 0.05  # k: relative residuals smaller than 5 % are treated as noise
DRIFT_THRESHOLD = 0.6  # h: once the median moved, a 20 % move fires in 5 rounds, a 50 % move in 2
RESIDUAL_CLIP = 0.5  # one round adds at most this much (a wild median cannot fire alone from zero)
WINDOW = 5  # residuals the median is taken over


@dataclass(frozen=True)
class Cusum:
    up: float = 0.0
    down: float = 0.0
    recent: tuple[float, ...] = ()  # the last WINDOW relative residuals, oldest first


@dataclass(frozen=True)
class CusumStep:
    state: Cusum
    fired: bool
    shift: float = 0.0  # the median residual when it fired (+0.3: the curve serves 30 % more than learned)


def step(state: Cusum, residual: float) -> CusumStep:
    """Add one relative residual. Fires (and restarts from zero) when the accumulated shift passes the
    threshold in either direction."""
    recent = (*state.recent, residual)[-WINDOW:]
    if len(recent) < (WINDOW + 1) // 2:  # too few for a median that ignores one outlier
        return CusumStep(Cusum(state.up, state.down, recent), False)
    r = max(-RESIDUAL_CLIP, min(RESIDUAL_CLIP, statistics.median(recent)))
    up = max(0.0, state.up + r - DRIFT_ALLOWANCE)
    down = max(0.0, state.down - r - DRIFT_ALLOWANCE)
    if up > DRIFT_THRESHOLD or down > DRIFT_THRESHOLD:
        return CusumStep(Cusum(), True, r)
    return CusumStep(Cusum(up, down, recent), False)

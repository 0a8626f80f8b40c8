"""Open loop: the latency reference, the least token-weighted time per output token at which the deployment can
serve the trace's arrivals, with perfect knowledge and free moves.

With open-loop arrivals every policy within capacity serves the same tokens, so policies are ranked on latency
(compare.py), and the optimum needs the same objective. The simulation's time per output token, averaged over the
tokens served, is the requests running summed over the steps divided by the tokens served (each step's tokens are
served at the running count over the tokens/s: cluster.Pool.serve). So the reference is the least running count,
summed over the steps, that any policy could reach on the trace.

It is computed by running the trace, step by step through the simulation's own pool mechanics (arrivals, queue,
admission, fluid completions), through ONE pool that stands for the deployment at its best every step:

- TrafficSplit: the requests in flight can move between the two pools at every step (a superset of what
  weights do: weights route only new arrivals, from the policy's evaluation onwards), and at every step they
  are split the way that serves the most tokens/s (bound.split_rate, exact). Every Ready, never a roll.
- Restart and Adaptive: every replica at the better of the speculative and the baseline curve for its batch,
  every step (restarts free and instant; Adaptive's best draft steps per batch).

Serving the most now is what serves the trace with the fewest running requests: completions grow with the
tokens served, and the running count after a step grows with the count before it as long as one more running
request adds fewer tokens to a step than the mean output a running request has left (at most the curves' single
stream rate, 373 tok/s on illustrative-crossover-8b, against outputs of hundreds of tokens), so fewer requests
now are never more later.

Why this and not a steady state: the trace's arrivals are noisy. A steady state at each window's mean rate (the
curves' concave hulls, by Jensen) ignores that the running count follows the arrivals: on concave curves that
noise costs every policy, on the convex start of a speculative curve it helps every policy. On
illustrative-crossover-8b's diurnal-requests the old 10-minute steady state was 5.51 ms against this 5.65: a
policy told each minute's arrival rate in advance, and setting the best weights for it, gets 5.70.

It stays a reference, checked by the tests against every policy on every shipped trace, rather than a proof: in
the pooled model a step's completions follow the pooled tokens per request, where two pools could in principle
hold requests with different remaining lengths."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import numpy as np

from specserve.api.models import Strategy
from specserve_tools.emulator.engine import Mode as EngineMode
from specserve_tools.simulate.bound import Curves, rounded_scale, split_rate
from specserve_tools.simulate.cluster import Pool, Replica
from specserve_tools.simulate.setup import Load, Setup

CELLS = 64  # TrafficSplit's best rate is computed exactly every 1/CELLS request and interpolated between

PoolRate = Callable[[float, float], float]  # (batch, speculative scale) -> tokens/s of one serving group


class BestPool(Pool):
    """A pool whose serving is `rate` at its whole running count over `ready` slots of `cap` requests each."""

    def __init__(self, setup: Setup, ready: int, rate: PoolRate) -> None:
        super().__init__("reference", setup.profile, [Replica(EngineMode.BASELINE) for _ in range(ready)], setup.slo)
        self._groups: tuple[int, list[tuple[int, PoolRate]]] = (ready, [(ready, rate)])

    def _serving(self, now: float) -> tuple[int, list[tuple[int, PoolRate]]]:
        return self._groups


def _split_pool(setup: Setup, curves: Curves) -> BestPool:
    """TrafficSplit: both pools as one, their requests split the best way every step (batch = all of them)."""

    @cache
    def best(cell: int, scale: float) -> float:
        n = cell / CELLS
        return split_rate(curves.spec(scale), curves.base, setup, n, n, math.inf)

    def rate(n: float, scale: float) -> float:
        x = n * CELLS
        cell = math.floor(x)
        s = rounded_scale(scale, up=True)
        lo = best(cell, s)
        return lo + (x - cell) * (best(cell + 1, s) - lo)

    pool = BestPool(setup, 1, rate)
    pool.cap = setup.profile.max_running_requests * (setup.speculative_replicas + setup.baseline_replicas)
    return pool


def _engine_pool(setup: Setup, curves: Curves) -> BestPool:
    """Restart, Adaptive: every replica at the better curve for its batch."""

    def rate(batch: float, scale: float) -> float:
        b = np.asarray([min(batch, curves.cap)])
        return float(max(curves.spec(rounded_scale(scale, up=True)).at(b)[0], curves.base.at(b)[0]))

    return BestPool(setup, setup.speculative_replicas, rate)


def latency_reference(setup: Setup, load: Load) -> float | None:
    """Seconds per output token, averaged over the tokens served, of the best pool on the trace; None for a
    closed loop (the clients' concurrency, not latency, is what it fixes) or when nothing is served."""
    if load.closed_loop:
        return None
    curves = Curves(setup.profile)
    if setup.strategy is Strategy.TRAFFIC_SPLIT:
        if setup.speculative_replicas + setup.baseline_replicas < 1:
            return None
        pool = _split_pool(setup, curves)
    else:
        if setup.speculative_replicas < 1:
            return None
        pool = _engine_pool(setup, curves)
    for k in range(load.steps):
        now = k * load.dt
        pool.arrive(now, load.arrivals[k], load.tokens[k])
        pool.admit(now)
        pool.serve(now, load.dt)
    stats = pool.stats
    return stats.tpot_token_seconds / stats.served_tokens if stats.served_tokens > 0 else None

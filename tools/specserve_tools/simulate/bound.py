"""An upper bound on the goodput (and served tokens) of ANY policy on a load: the "optimum" the gain is measured
against. Nothing is replayed: it is a number no simulated run can exceed, which the tests check.

Why it is a bound (the simulation's accounting, cluster.py):
1. Per step, a pool's good tokens are at most dt x the tokens/s of its Ready replicas whose time per output token
   b / r(b) meets the TPOT SLO (a step on a slower replica demotes its good requests first; queued requests get
   nothing), and never more than dt x what its replicas serve. So with n_p requests in flight on pool p,
   good_k <= dt x sum_p R_p ok_p(min(n_p / R_p, cap)).
2. Take the best over everything a policy controls at that step, with perfect knowledge and free weight moves:
   - TrafficSplit: any allocation n_s + n_b = N of the N requests in flight to the two pools (a superset of
     what any weights produce), every N the bounds of point 3 allow.
   - Restart: dynamic programming over the pool's state per step: all speculative, all baseline, or a roll (one
     replica at a time down for the start-up time, the mixed pool at one batch), no switch during a roll; each
     step worth the best of (1) for its state. Every schedule a policy can produce is one of its paths.
   - Adaptive: per step the best draft steps per batch: every Ready replica (all of them, or all but one in a
     re-render's roll) at the better of the speculative and baseline curves meeting the SLO.
   TTFT is ignored (a relaxation: it can only raise the bound).
3. N, the requests in flight, is itself bounded for any policy:
   - closed loop: after the arrivals of step k, N_k = max(C_k, N'_{k-1}) (clients top up to C_k, so
     N_k >= C_k: there is no admission control to hold requests back), and a step
     serves at least floor(N) tokens (the least any configuration serves: every replica's rate is above a
     concave non-decreasing floor, so the least over allocations is at an end), completing served / L requests
     (output lengths are memoryless, so remaining tokens per request stay L). Hence
     U_k = max(C_k, U_{k-1} - floor(U_{k-1}) dt / L) >= N_k by induction, as N -> N - floor(N) dt / L is
     non-decreasing when the floor's steepest slope x dt / L <= 1 (checked; otherwise no drain is credited).
   - open loop: tokens served by step k never exceed the tokens arrived by then, and good tokens grow by at most
     the best step's good rate (any N): Q_k = min(Q_{k-1} + G_max dt, arrived_k).
The drifting profiles scale the speculative curve per step (emulator.profile.Profile.speculative_scale); the
scale is rounded up for the good rate and down for the floor, so rounding keeps the bound."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from specserve.api.models import Strategy
from specserve_tools.emulator.profile import Profile
from specserve_tools.simulate.rates import Array, Floor, Rate, knots
from specserve_tools.simulate.setup import Load, Setup
from specserve_tools.simulate.split_bound import CELLS_PER_REQUEST, PoolCells, weight_schedule_bound

SCALE_GRID = 1e-3  # drifting curves: the scale is memoised on this grid (rounded in the bound's favour)


@dataclass(frozen=True)
class Bound:
    goodput_tokens: float
    served_tokens: float
    notes: list[str] = field(default_factory=list)


def rounded_scale(scale: float, up: bool) -> float:
    """A speculative scale on SCALE_GRID, up or down (whichever favours the bound)."""
    q = scale / SCALE_GRID
    return (math.ceil(q - 1e-9) if up else math.floor(q + 1e-9)) * SCALE_GRID


class Curves:
    """The per-replica rates at a speculative scale, memoised."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.cap = float(profile.max_running_requests)
        self.base = Rate.of(profile.baseline.points(), self.cap)
        self._spec: dict[float, Rate] = {}

    def spec(self, scale: float) -> Rate:
        hit = self._spec.get(scale)
        if hit is None:
            hit = self._spec[scale] = Rate.of(self.profile.speculative.points(), self.cap, scale)
        return hit


def _best_batch(rates: list[tuple[float, Rate]], lo: float, hi: float, tpot: float, single: bool = False) -> float:
    """max over lo <= b <= hi of sum_i count_i ok_i(b) (single: max_i instead of the sum), exactly: at a knot or
    an SLO crossing of one of the rates, or at an end."""
    if hi <= 0:
        return 0.0
    cand = knots([r for _, r in rates], tpot)
    b = np.concatenate([cand[(cand >= lo) & (cand <= hi)], [lo, hi]])
    values = [c * r.ok(b, tpot) for c, r in rates]
    total = np.maximum.reduce(values) if single else np.add.reduce(values)
    return float(np.max(total))


def _pool(rate: Rate, replicas: int, cap: float, tpot: float) -> tuple[Array, Array, Callable[[Array], Array]]:
    """A pool's good tokens/s against requests on it (beyond replicas x cap they queue): its breakpoints (in
    requests), its values there, and the function."""

    def value(n: Array) -> Array:
        return replicas * rate.ok(np.minimum(n / replicas, cap), tpot)

    bp = replicas * knots([rate], tpot)
    bp = bp[bp <= replicas * cap]
    return bp, value(bp), value


def split_rate(spec: Rate, base: Rate, setup: Setup, lo: float, hi: float, tpot: float) -> float:
    """TrafficSplit: max over n_s + n_b = N, lo <= N <= hi, of the two pools' good tokens/s. At an optimum n_s is
    a breakpoint of the speculative pool or the sum is at an end, and likewise n_b: every such pair is tried."""
    cap = float(setup.profile.max_running_requests)
    if setup.speculative_replicas < 1 or setup.baseline_replicas < 1:
        only = spec if setup.speculative_replicas >= 1 else base
        r = max(setup.speculative_replicas, setup.baseline_replicas)
        return r * _best_batch([(1.0, only)], min(lo / r, cap), min(hi / r, cap), tpot) if r else 0.0
    bp_a, va, fa = _pool(spec, setup.speculative_replicas, cap, tpot)
    bp_b, vb, fb = _pool(base, setup.baseline_replicas, cap, tpot)
    total = bp_a[:, None] + bp_b[None, :]
    inside = (total >= lo) & (total <= hi)
    best = float(np.max((va[:, None] + vb[None, :])[inside])) if inside.any() else 0.0
    for end in (lo, hi):
        y = end - bp_a
        if (y >= 0).any():
            best = max(best, float(np.max((va + fb(np.maximum(y, 0.0)))[y >= 0])))
        x = end - bp_b
        if (x >= 0).any():
            best = max(best, float(np.max((vb + fa(np.maximum(x, 0.0)))[x >= 0])))
    return best


class Bounder:
    """Per-step good (tokens/s meeting the SLO) and served rates of the best configuration, and the floor."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.curves = Curves(setup.profile)
        self.tpot = setup.slo.tpot
        self._memo: dict[tuple[object, ...], float] = {}

    def _cached(self, key: tuple[object, ...], compute: Callable[[], float]) -> float:
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = compute()
        return hit

    def split(self, lo: float, hi: float, scale: float, tpot: float) -> float:
        """TrafficSplit with lo to hi requests in flight."""
        s, b = self.curves.spec(scale), self.curves.base
        return self._cached(("split", lo, hi, scale, tpot), lambda: split_rate(s, b, self.setup, lo, hi, tpot))

    def engine(self, lo: float, hi: float, scale: float, tpot: float, spec: int, base: int) -> float:
        """One pool: `spec` and `base` Ready replicas at one batch, lo to hi requests in flight."""
        ready = spec + base
        if ready < 1:
            return 0.0
        cap = self.curves.cap
        rates = [(float(spec), self.curves.spec(scale)), (float(base), self.curves.base)]
        rates = [(c, r) for c, r in rates if c > 0]
        key = ("engine", lo, hi, scale, tpot, spec, base)
        return self._cached(key, lambda: _best_batch(rates, min(lo / ready, cap), min(hi / ready, cap), tpot))

    def any_steps(self, lo: float, hi: float, scale: float, tpot: float) -> float:
        """Adaptive: every Ready replica at the better curve for its batch, all or all but one Ready."""
        replicas = self.setup.speculative_replicas
        cap = self.curves.cap
        rates = [(1.0, self.curves.spec(scale)), (1.0, self.curves.base)]

        def best() -> float:
            ready = [r for r in (replicas, replicas - 1) if r > 0]
            return max(
                (r * _best_batch(rates, min(lo / r, cap), min(hi / r, cap), tpot, single=True) for r in ready),
                default=0.0,
            )

        return self._cached(("any", lo, hi, scale, tpot), best)

    def floor(self, scale: float) -> Callable[[float], float]:
        """The least tokens/s any configuration serves with n in flight (clamped at 0 by the caller)."""
        s = self.setup
        cap = self.curves.cap
        spec, base = self.curves.spec(scale).floor(), self.curves.base.floor()
        if s.strategy is Strategy.TRAFFIC_SPLIT:
            pools = [(s.speculative_replicas, spec), (s.baseline_replicas, base)]
            pools = [(r, f) for r, f in pools if r > 0]
            # concave in the allocation: the least is with everything on one pool (an end)
            return lambda n: min(r * f.at(min(n / r, cap)) for r, f in pools)
        ready = s.speculative_replicas  # the pool between rolls (rolls: see in_flight_bound)
        if ready < 1:
            return lambda n: 0.0
        floors: list[Floor] = [spec, base]
        off = self.setup.profile.adaptive_off_efficiency
        return lambda n: ready * min(f.at(min(n / ready, cap)) for f in floors) * min(1.0, off)

    def steepest(self, scale: float) -> float:
        """The floor's steepest slope per replica (the speculative curve at its largest `scale`)."""
        return max(self.curves.spec(1.0).floor().steepest * scale, self.curves.base.floor().steepest)


def _scales(profile: Profile, load: Load) -> tuple[list[float], list[float]]:
    if not profile.accept_schedule:
        return [1.0] * load.steps, [1.0] * load.steps
    raw = [profile.speculative_scale(k * load.dt) for k in range(load.steps)]
    return [rounded_scale(x, True) for x in raw], [rounded_scale(x, False) for x in raw]


def sliding_max(values: tuple[float, ...] | list[float], window: int) -> list[float]:
    """max(values[k - window + 1 .. k]) for every k."""
    out: list[float] = []
    dq: deque[int] = deque()
    for k, v in enumerate(values):
        while dq and values[dq[-1]] <= v:
            dq.pop()
        dq.append(k)
        if dq[0] <= k - window:
            dq.popleft()
        out.append(values[dq[0]])
    return out


def in_flight_bound(bounder: Bounder, load: Load, notes: list[str]) -> list[float]:
    """Closed loop: U_k >= the requests in flight at step k (point 3 of the module doc).

    One pool (Restart, Adaptive): a roll stops completions on the restarting replica (all of them with one
    replica), so clients pile up to the largest concurrency seen during the roll; the recursion takes that
    (the concurrency's maximum over the roll's length) as its input and drains as the whole pool serves. That
    holds for a schedule whose every roll starts with its previous backlog drained (a few tens of seconds after
    a roll ends); back-to-back rolls fall outside it, and the tests check that no policy beats the bound."""
    setup = bounder.setup
    _, down = _scales(setup.profile, load)
    per_request, dt = load.tokens_per_request, load.dt
    drain = bounder.steepest(max(down, default=1.0)) * dt / per_request <= 1.0 if per_request > 0 else False
    if not drain:
        notes.append("bound: no drain credited (a request can finish within a step): in flight <= the peak so far")
    demand: tuple[float, ...] | list[float] = load.concurrency
    if setup.strategy is not Strategy.TRAFFIC_SPLIT and setup.profile.startup_seconds > 0:
        window = setup.speculative_replicas * math.ceil(setup.profile.startup_seconds / dt - 1e-9) + 2
        demand = sliding_max(load.concurrency, window)
    out: list[float] = []
    u = 0.0
    floors: dict[float, Callable[[float], float]] = {}
    for k in range(load.steps):
        u = max(demand[k], u)
        out.append(u)
        if drain:
            f = floors.get(down[k])
            if f is None:
                f = floors[down[k]] = bounder.floor(down[k])
            u = max(0.0, u - max(0.0, f(u)) * dt / per_request)
    return out


def restart_dp(rate: Callable[[int, int, int], float], steps: int, replicas: int, roll_steps: int) -> float:
    """max over schedules of the summed per-step rates: rate(k, spec, base) with `spec` + `base` Ready replicas
    (one down during a roll). States: 0 all speculative, 1 all baseline; a roll is a block of replicas x
    roll_steps steps, replica j down in its j-th sub-block, then the pool is all in the other mode."""
    stay = np.array([[rate(k, replicas, 0) for k in range(steps)], [rate(k, 0, replicas) for k in range(steps)]])
    block = replicas * roll_steps
    rolls = np.zeros((2, steps + 1))  # rolls[m][k]: a roll out of mode m starting at step k, summed (to the end)
    if block > 0:
        for m in (0, 1):
            for j in range(replicas):
                new, old = j, replicas - 1 - j  # rolled already, still to roll
                spec, base = (new, old) if m == 1 else (old, new)
                sub = np.array([rate(k, spec, base) for k in range(steps)])
                prefix = np.concatenate([[0.0], np.cumsum(sub)])
                starts = np.arange(steps + 1)
                lo = np.minimum(starts + j * roll_steps, steps)
                hi = np.minimum(starts + (j + 1) * roll_steps, steps)
                rolls[m] += prefix[hi] - prefix[lo]
    best = np.zeros((2, steps + 1))
    for k in range(steps - 1, -1, -1):
        for m in (0, 1):
            value = stay[m, k] + best[m, k + 1]
            if block > 0 and k >= 1:  # no policy acts before its first evaluation
                value = max(value, rolls[m, k] + best[1 - m, min(steps, k + block)])
            best[m, k] = value
    return float(max(best[0, 0], best[1, 0]))  # a policy may start in either mode


def upper_bound(setup: Setup, load: Load) -> Bound:
    notes: list[str] = []
    bounder = Bounder(setup)
    up, _ = _scales(setup.profile, load)
    dt = load.dt
    strategy = setup.strategy
    replicas = setup.speculative_replicas

    def step_rate(k: int, lo: float, hi: float, tpot: float, spec: int | None = None, base: int = 0) -> float:
        if strategy is Strategy.TRAFFIC_SPLIT:
            return bounder.split(lo, hi, up[k], tpot)
        if strategy is Strategy.ADAPTIVE or spec is None:
            return bounder.any_steps(lo, hi, up[k], tpot)
        return bounder.engine(lo, hi, up[k], tpot, spec, base)

    if not load.closed_loop:
        top = float(replicas + setup.baseline_replicas) * bounder.curves.cap
        totals = []
        for tpot in (setup.slo.tpot, math.inf):
            q, arrived = 0.0, 0.0
            for k in range(load.steps):
                arrived += load.tokens[k]
                q = min(q + step_rate(k, 0.0, top, tpot) * dt, arrived)
            totals.append(q)
        return Bound(totals[0], totals[1], notes)
    u = in_flight_bound(bounder, load, notes)
    conc = load.concurrency  # and at least the clients: each has a request in flight
    totals = []
    for tpot in (setup.slo.tpot, math.inf):
        if strategy is Strategy.RESTART:
            roll_steps = math.ceil(setup.profile.startup_seconds / dt - 1e-9)

            def rate(k: int, spec: int, base: int, tpot: float = tpot) -> float:
                return step_rate(k, conc[k], u[k], tpot, spec, base)

            totals.append(restart_dp(rate, load.steps, replicas, roll_steps) * dt)
        else:
            totals.append(sum(step_rate(k, conc[k], u[k], tpot) for k in range(load.steps)) * dt)
    if strategy is Strategy.TRAFFIC_SPLIT and replicas >= 1 and setup.baseline_replicas >= 1:
        loose = totals[0]
        totals[0] = min(loose, weights_bound(bounder, load, u, up))
        notes.append(
            f"bound: {totals[0] / 1e6:.2f} Mtok, the best weight schedule (in-flight requests stay on their pool); "
            f"{loose / 1e6:.2f} if every request in flight could move each step"
        )
    if strategy is Strategy.RESTART and replicas == 1:
        loose = totals[0]
        totals[0] = min(loose, restarts_bound(bounder, load, up))
        notes.append(
            f"bound: {totals[0] / 1e6:.2f} Mtok, the best restart schedule (requests in flight tracked); "
            f"{loose / 1e6:.2f} with any in-flight count per step"
        )
    return Bound(totals[0], totals[1], notes)


def restarts_bound(bounder: Bounder, load: Load, scales: list[float]) -> float:
    """Restart, closed loop, one replica: the exact optimum over restart schedules, rounded up (restart_bound.py)."""
    from specserve_tools.simulate.restart_bound import restart_schedule_bound  # noqa: PLC0415 (it imports this module)

    setup, curves = bounder.setup, bounder.curves
    cells = int(max(load.concurrency, default=0.0) * CELLS_PER_REQUEST) + 2
    d = 1.0 / CELLS_PER_REQUEST
    distinct = sorted(set(scales))
    spec = [PoolCells(curves.spec(x), 1, curves.cap, bounder.tpot, cells, d) for x in distinct]
    base = PoolCells(curves.base, 1, curves.cap, bounder.tpot, cells, d)
    index = {x: i for i, x in enumerate(distinct)}
    roll_steps = math.ceil(setup.profile.startup_seconds / load.dt - 1e-9)
    return restart_schedule_bound(
        [spec, [base] * len(spec)], [index[x] for x in scales], load.concurrency, roll_steps, load.dt,
        load.tokens_per_request,
    )  # fmt: skip


def weights_bound(bounder: Bounder, load: Load, in_flight: list[float], scales: list[float]) -> float:
    """TrafficSplit, closed loop: the exact optimum over weight schedules, rounded up (split_bound.py)."""
    setup, curves = bounder.setup, bounder.curves
    cells = int(max(in_flight, default=0.0) * CELLS_PER_REQUEST) + 2
    d = 1.0 / CELLS_PER_REQUEST
    distinct = sorted(set(scales))
    spec = [PoolCells(curves.spec(x), setup.speculative_replicas, curves.cap, bounder.tpot, cells, d) for x in distinct]
    base = PoolCells(curves.base, setup.baseline_replicas, curves.cap, bounder.tpot, cells, d)
    index = {x: i for i, x in enumerate(distinct)}
    return weight_schedule_bound(
        spec, base, [index[x] for x in scales], load.concurrency, in_flight, load.dt, load.tokens_per_request
    )

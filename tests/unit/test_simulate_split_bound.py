"""The TrafficSplit optimum over weight schedules (simulate/split_bound.py): an upper bound on every split of every
step's arrivals, within the grid's slack of the best one, and below the bound that may move requests in flight."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest

from specserve.api.curves import Curve
from specserve.api.models import Mode, Strategy
from specserve_tools.emulator.engine import Mode as EngineMode
from specserve_tools.emulator.profile import Profile
from specserve_tools.simulate.baselines import FixedSplit, Schedule, Static
from specserve_tools.simulate.bound import Bounder, Curves, in_flight_bound, upper_bound, weights_bound
from specserve_tools.simulate.cluster import Slo, serving_function
from specserve_tools.simulate.restart_bound import restart_schedule_bound
from specserve_tools.simulate.run import simulate
from specserve_tools.simulate.setup import Command, Controller, Load, Setup
from specserve_tools.simulate.split_bound import CELLS_PER_REQUEST, PoolCells, range_max, weight_schedule_bound

# Speculation is twice as fast at low load and saturates early; baseline keeps rising. Cap 10 per replica.
PROFILE = Profile(
    name="tiny",
    model_name="tiny",
    speculative=Curve.from_points([(1, 20.0), (4, 60.0), (10, 62.0)]),
    baseline=Curve.from_points([(1, 10.0), (4, 38.0), (10, 100.0)]),
    startup_seconds=30.0,
    max_running_requests=10,
    ttft_seconds=0.1,
)
D = 1.0 / CELLS_PER_REQUEST


def setup(tpot: float = math.inf) -> Setup:
    return Setup(Strategy.TRAFFIC_SPLIT, PROFILE, 1, 1, Mode.SPECULATIVE, 15.0, 15.0, Slo(1000.0, tpot), 5.0, 3, None)


def pools(tpot: float, top: float) -> tuple[PoolCells, PoolCells]:
    curves = Curves(PROFILE)
    cells = int(top / D) + 2
    return (PoolCells(curves.spec(1.0), 1, 10.0, tpot, cells, D), PoolCells(curves.base, 1, 10.0, tpot, cells, D))


def brute_force(conc: list[float], tokens: float, tpot: float, shares: int) -> float:
    """The best of every split of every step's arrivals (shares + 1 fractions each), run through the fluid
    dynamics exactly: the pools keep their requests, the clients top up, a step completes served / L."""
    spec, base = pools(tpot, max(conc))
    best = 0.0
    for fractions in itertools.product(np.linspace(0.0, 1.0, shares + 1), repeat=len(conc)):
        xs = xb = total = 0.0
        for c, f in zip(conc, fractions, strict=True):
            new = max(0.0, c - xs - xb)
            s, b = xs + f * new, xb + (1 - f) * new
            good = float(spec.value(np.asarray([s]))[0] + base.value(np.asarray([b]))[0])
            total += good
            served_s, served_b = _served(s, EngineMode.SPECULATIVE), _served(b, EngineMode.BASELINE)
            xs, xb = s - min(served_s / tokens, s, 10.0), b - min(served_b / tokens, b, 10.0)
        best = max(best, total)
    return best


def _served(n: float, mode: EngineMode) -> float:
    return serving_function(PROFILE, mode, None)(min(n, 10.0))


@pytest.mark.parametrize(
    ("conc", "tpot", "tight"),
    [
        ([6.0, 6.0, 14.0, 14.0], math.inf, True),
        ([4.0, 8.0, 16.0, 16.0], 0.12, True),  # the TPOT SLO binds: speculation past batch ~7 counts nothing
        ([3.0, 12.0, 4.0, 9.0], math.inf, False),  # the clients fall faster than requests complete
    ],
)
def test_the_weight_bound_is_the_best_schedule_within_the_grid(conc: list[float], tpot: float, tight: bool) -> None:
    # Requests of 20 tokens: a pool completes 1 to 5 requests a step, so which pool holds whom matters.
    tokens = 20.0
    spec, base = pools(tpot, max(conc) + 1)
    exact = brute_force(conc, tokens, tpot, shares=12)
    load = Load(1.0, len(conc), concurrency=tuple(conc), tokens_per_request=tokens)
    in_flight = in_flight_bound(Bounder(setup(tpot)), load, [])
    bound = weight_schedule_bound([spec], base, [0] * len(conc), conc, in_flight, 1.0, tokens)
    assert exact <= bound + 1e-9
    if tight:
        # the cells are 1/16 request wide: a step may gain up to a cell's worth on each pool (2 x 40 tok/s / 16),
        # and the brute force's 1/12 shares of the arrivals miss a little of the best
        assert bound <= exact + len(conc) * 6.0


def test_the_weight_bound_is_no_looser_than_moving_requests_and_no_fixed_split_beats_it() -> None:
    # 4 clients all on speculation (its best), then 18: the weight bound never exceeds the per-step bound that
    # may move every request in flight (on concave curves like these the best split only grows on a rise, so
    # they agree here), and the command reports the smaller
    s = setup()
    load = Load(1.0, 40, concurrency=(4.0,) * 20 + (18.0,) * 20, tokens_per_request=100.0)
    b = Bounder(s)
    u = in_flight_bound(b, load, [])
    weights = weights_bound(b, load, u, [1.0] * load.steps)
    anywhere = sum(b.split(load.concurrency[k], u[k], 1.0, s.slo.tpot) for k in range(load.steps))
    assert weights <= anywhere + 1e-6
    # 14 clients, then 4: the baseline pool keeps its share until it completes; the per-step bound moves it
    fall = Load(1.0, 4, concurrency=(14.0, 4.0, 4.0, 4.0), tokens_per_request=20.0)
    u_fall = in_flight_bound(b, fall, [])
    fixed_pools = weights_bound(b, fall, u_fall, [1.0] * fall.steps)
    assert fixed_pools < sum(b.split(fall.concurrency[k], u_fall[k], 1.0, s.slo.tpot) for k in range(4)) - 10.0
    bound = upper_bound(s, load)
    assert bound.goodput_tokens == min(weights, anywhere)
    assert any("best weight schedule" in n for n in bound.notes)
    for w in (0, 30, 50, 70, 100):  # and no fixed split beats it
        run = simulate(s, load, FixedSplit("fixed", w))
        assert sum(p.good_tokens for p in run.pools.values()) <= bound.goodput_tokens * (1 + 1e-9)


def test_constant_load_weight_bound_is_the_steady_state() -> None:
    # 20 clients: 10 + 10 (both at their cap) serve 62 + 100 tok/s, the best there is; the weight bound has
    # nothing to pay for it (it starts empty and splits the first arrivals) and stays within the grid's slack.
    s = setup()
    load = Load(1.0, 300, concurrency=(20.0,) * 300, tokens_per_request=100.0)
    b = Bounder(s)
    u = in_flight_bound(b, load, [])
    assert weights_bound(b, load, u, [1.0] * 300) == pytest.approx(162.0 * 300, rel=1e-9)


def test_the_rates_are_the_simulations_serving_functions() -> None:
    # the bound and the simulation must not disagree on physics: the piecewise-linear rates are the serving
    # functions of the simulated replicas at every batch, fractional ones below 1 included
    curves = Curves(PROFILE)
    batches = np.linspace(0.0, 12.0, 241)
    for rate, mode in ((curves.spec(1.0), EngineMode.SPECULATIVE), (curves.base, EngineMode.BASELINE)):
        serve = serving_function(PROFILE, mode, None)
        expected = [serve(min(b, 10.0)) for b in batches]
        assert np.allclose(rate.at(np.minimum(batches, 10.0)), expected, rtol=1e-12, atol=1e-9)


def restart_brute_force(conc: list[float], tokens: float, tpot: float, roll: int) -> float:
    """Every restart schedule of one replica (a roll at any step from 1 on, none during a roll), run exactly."""
    spec, base = pools(tpot, max(conc))
    pool = {0: spec, 1: base}
    mode_of = {0: EngineMode.SPECULATIVE, 1: EngineMode.BASELINE}

    def best(k: int, mode: int, n: float) -> float:
        if k >= len(conc):
            return 0.0
        n = max(conc[k], n)
        good = float(pool[mode].value(np.asarray([n]))[0])
        left = n - min(_served(n, mode_of[mode]) / tokens, n, 10.0)
        stay = good + best(k + 1, mode, left)
        if k == 0:
            return stay
        dark = max([left, *conc[k + 1 : k + 1 + roll]])  # nothing completes while the replica restarts
        return max(stay, good + best(k + 1 + roll, 1 - mode, dark))

    return max(best(0, 0, 0.0), best(0, 1, 0.0))


@pytest.mark.parametrize(
    ("conc", "tpot"),
    [
        ([3.0, 3.0, 3.0, 16.0, 16.0, 16.0, 16.0, 16.0, 16.0, 3.0, 3.0, 3.0], math.inf),
        ([2.0, 12.0, 12.0, 2.0, 2.0, 12.0, 12.0, 12.0, 2.0, 2.0, 2.0, 2.0], 0.12),
    ],
)
def test_the_restart_bound_is_the_best_schedule_within_the_grid(conc: list[float], tpot: float) -> None:
    tokens, roll = 30.0, 2
    spec, base = pools(tpot, max(conc))
    exact = restart_brute_force(conc, tokens, tpot, roll)
    bound = restart_schedule_bound([[spec], [base]], [0] * len(conc), conc, roll, 1.0, tokens)
    assert exact <= bound + 1e-9
    assert bound <= exact + len(conc) * 40.0 / CELLS_PER_REQUEST  # a cell's worth per step at most


def test_the_restart_bound_counts_the_backlog_of_every_roll() -> None:
    # Rolls pile the clients up while the replica is down; the bound tracks them, and no simulated schedule
    # (static, or rolling at any of a few evaluations) beats it.
    s = replace(setup(0.12), strategy=Strategy.RESTART, baseline_replicas=0)
    load = Load(1.0, 600, concurrency=(3.0,) * 150 + (16.0,) * 300 + (3.0,) * 150, tokens_per_request=30.0)
    b = upper_bound(s, load)
    assert any("best restart schedule" in n for n in b.notes)
    runs: list[Controller] = [Static("static", mode) for mode in (Mode.SPECULATIVE, Mode.BASELINE)]
    for first, second in ((9, 30), (10, 31), (11, 29), (10, 12)):  # evaluations (15 s) at which to roll, twice
        commands: list[Command | None] = [None] * 40
        commands[first], commands[second] = Command(mode=Mode.BASELINE), Command(mode=Mode.SPECULATIVE)
        runs.append(Schedule(f"rolls at {first}, {second}", Command(mode=Mode.SPECULATIVE), commands))
    goods = [sum(p.good_tokens for p in simulate(s, load, c).pools.values()) for c in runs]
    assert max(goods) <= b.goodput_tokens
    assert max(goods) > max(goods[:2])  # rolling pays here: the bound is not just above the static modes


@pytest.mark.parametrize("widest", [1, 3, 8, 9, 40])
def test_range_max_is_the_maximum_over_each_range(widest: int) -> None:
    rng = np.random.default_rng(widest)
    values = rng.normal(size=100)
    lo = rng.integers(0, 100 - widest + 1, size=50)
    hi = lo + rng.integers(0, widest, size=50)
    hi[0] = lo[0] + widest - 1
    expected = [values[a : b + 1].max() for a, b in zip(lo, hi, strict=True)]
    assert np.array_equal(range_max(values, lo, hi), expected)

"""A quick self-check of the whole policy on a fluid day (the real benchmark is `specserve simulate`): a diurnal
demand fed to decide() every minute, served tokens compared with the static choices and with hindsight.

The fluid model is deliberately the policy's own: a Restart pool serves n f(D/n) and nothing while it restarts;
a TrafficSplit pair serves the worst split its weights can settle at (weights.settle). So these tests check that
the rules (windows, dwell, band, regret) do not throw away what the curves promise, not the curves themselves."""

from __future__ import annotations

import math
import random
from functools import cache

from specserve.api.models import Mode, Strategy
from specserve.policy.switching import decide, initial_state
from specserve.policy.types import Action
from specserve.policy.weights import settle
from tests.unit.policy_helpers import ILLUSTRATIVE, SEED, knobs, profile_curves, sample

DT = 60.0
DAY = 86400.0


def diurnal(peak: float, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    out = []
    for i in range(int(DAY / DT)):
        level = 4 + (peak - 4) * (0.5 - 0.5 * math.cos(2 * math.pi * i * DT / DAY)) ** 2
        out.append(max(0.0, level * (1 + 0.1 * rng.gauss(0, 1))))
    return out


def restart_day(name: str, demands: list[float], start: Mode) -> tuple[float, float, float, int]:
    """(policy tokens, always-speculative, always-baseline, restarts into speculation) for one replica."""
    curves = profile_curves(name)
    k = knobs(Strategy.RESTART, evaluation_interval=DT, min_dwell=300.0, startup_seconds=60.0)
    state = initial_state(k, start, 0.0)
    served = 0.0
    down_until = -1.0
    into_spec = 0
    for i, d in enumerate(demands):
        t = i * DT
        v = decide(k, curves, state, sample(t, d, ready_base=None), converging=t < down_until)
        if v.action is Action.RESTART:
            down_until = t + k.startup_seconds
            into_spec += v.mode is Mode.SPECULATIVE
        state = v.state
        up = DT - max(0.0, min(DT, down_until - t))
        served += curves.rate(state.mode, d) * up
    spec = sum(curves.rate(Mode.SPECULATIVE, d) * DT for d in demands)
    base = sum(curves.rate(Mode.BASELINE, d) * DT for d in demands)
    return served, spec, base, into_spec


def test_restart_beats_both_static_modes_on_the_illustrative_day() -> None:
    demands = diurnal(200.0)
    served, spec, base, _ = restart_day(ILLUSTRATIVE, demands, Mode.SPECULATIVE)
    best_static = max(spec, base)
    # hindsight without switching costs: the better mode in every interval (an upper bound on any policy)
    curves = profile_curves(ILLUSTRATIVE)
    bound = sum(max(curves.rate(m, d) for m in Mode) * DT for d in demands)
    assert served > best_static
    assert (served - best_static) / (bound - best_static) >= 0.55


def test_restart_on_the_seed_day_stays_on_baseline() -> None:
    served, spec, base, into_spec = restart_day(SEED, diurnal(200.0), Mode.BASELINE)
    assert into_spec == 0 and served == base > spec


def test_traffic_split_captures_most_of_what_the_curves_allow() -> None:
    curves = profile_curves(ILLUSTRATIVE)
    # one evaluation every 2 minutes keeps the test quick; whole requests, so the bounds below memoise well
    every = 2 * DT
    demands = [float(round(d)) for d in diurnal(300.0)[::2]]

    @cache
    def tokens(w: int, d: float) -> float:
        return settle(curves, w, d, 1, 1).tokens_per_second * every

    k = knobs(evaluation_interval=every, down_stabilization=300.0, min_dwell=300.0)
    state = initial_state(k, Mode.SPECULATIVE, 0.0)
    served = 0.0
    for i, d in enumerate(demands):
        state = decide(k, curves, state, sample(i * every, d)).state
        assert state.weights is not None
        served += tokens(state.weights.speculative, d)
    # hindsight: the best weight in every interval (2-point grid), and the best fixed weight for the whole day
    optimum = sum(max(tokens(w, d) for w in range(0, 101, 2)) for d in demands)
    fixed = max(sum(tokens(w, d) for d in demands) for w in range(30, 71, 2))
    captured = (served - fixed) / (optimum - fixed)
    assert captured >= 0.85, captured

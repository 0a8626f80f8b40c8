"""TrafficSplit's rules on scripted demand: stabilization windows, the dead band, the weight step, failover off an
unready pool, min dwell, and a realistic day on the illustrative profile."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

from specserve.api.models import Mode, Rule, Weights
from specserve.policy.switching import decide, initial_state
from specserve.policy.types import Action, PolicyState
from specserve.policy.weights import robust_weights
from tests.unit.policy_helpers import ILLUSTRATIVE, changes, knobs, linear_curves, profile_curves, run, sample

# speculative twice as fast per request up to 10 in flight, saturated at 100 tok/s; baseline saturates at 100 from 20.
# Best speculative weight: 100 up to demand 10, 67 at 20, 50 from 30 on.
KNEES = linear_curves([(1, 10), (10, 100)], [(1, 5), (20, 100), (40, 100)])
# the baseline keeps growing to 200 tok/s at 40: best speculative weight 33 from demand 50 on
BIG_BASE = linear_curves([(1, 10), (10, 100)], [(1, 5), (40, 200)])


def start(spec_weight: int = 100, since: float = -10_000.0) -> PolicyState:
    mode = Mode.SPECULATIVE if spec_weight >= 50 else Mode.BASELINE
    return PolicyState(
        mode=mode, mode_since=since, weights=Weights(speculative=spec_weight, baseline=100 - spec_weight)
    )


def test_up_stabilization_waits_for_the_window_then_moves() -> None:
    k = knobs(up_stabilization=60.0, hysteresis=0.0, max_weight_step=100)
    state, verdicts = run(k, KNEES, start(), [30.0] * 6)
    assert [v.action for v in verdicts[:4]] == [Action.HOLD] * 4  # t = 0 .. 45
    assert "of the 60 s window" in verdicts[1].reason
    assert verdicts[4].action is Action.SET_WEIGHTS  # t = 60: the wish has lasted the window
    assert verdicts[4].weights == Weights(speculative=50, baseline=50)
    assert "100/0 -> 50/50" in verdicts[4].reason and "demand 30.0" in verdicts[4].reason
    assert verdicts[5].action is Action.HOLD and state.pending is None


def test_down_stabilization_restarts_when_the_wish_is_interrupted() -> None:
    k = knobs(down_stabilization=120.0, hysteresis=0.0, max_weight_step=100)
    # demand drops (wish: back to speculative), comes back for one evaluation, drops again
    demands = [5.0] * 7 + [30.0] + [5.0] * 10
    _, verdicts = run(k, KNEES, start(50), demands)
    moves = [(i, v.weights) for i, v in enumerate(verdicts) if v.action is Action.SET_WEIGHTS]
    # first wish began at t=0 but was cut at index 7 (t=105); the second began at index 8 (t=120): moves at t=240
    assert moves == [(16, Weights(speculative=100, baseline=0))]


def test_the_weight_moves_by_at_most_the_step() -> None:
    k = knobs(max_weight_step=25, hysteresis=0.0)
    _, verdicts = run(k, KNEES, start(), [30.0] * 4)
    assert [v.weights.speculative for v in verdicts if v.weights] == [75, 50, 50, 50]
    assert [v.action for v in verdicts] == [Action.SET_WEIGHTS, Action.SET_WEIGHTS, Action.HOLD, Action.HOLD]
    assert "step limited to 25" in verdicts[0].reason


def test_oscillation_inside_the_dead_band_moves_nothing() -> None:
    wobble = [18.0, 22.0, 19.0, 21.0] * 20
    settled, _ = run(knobs(hysteresis=0.2), KNEES, start(), [20.0] * 3)
    goal = robust_weights(KNEES, 20.0, 1, 1, 0.2)
    assert settled.weights == goal and 50 < goal.speculative < 80
    _, verdicts = run(knobs(hysteresis=0.2), KNEES, settled, wobble, start=45.0)
    assert changes(verdicts) == []
    assert "inside the dead band" in verdicts[0].reason
    # without a band the same wobble moves the weights every evaluation
    _, naive = run(knobs(hysteresis=0.0, max_weight_step=100), KNEES, settled, wobble, start=45.0)
    assert len(changes(naive)) == len(wobble)


def test_failover_off_an_unready_pool_is_immediate_and_overrides_everything() -> None:
    k = knobs(down_stabilization=10_000.0, up_stabilization=10_000.0, min_dwell=10_000.0, max_weight_step=5)
    state = start(60, since=0.0)
    v = decide(k, KNEES, state, sample(15.0, None, ready_spec=0, error="Prometheus timed out"))
    assert v.action is Action.SET_WEIGHTS and v.weights == Weights(speculative=0, baseline=100)
    assert v.state.mode is Mode.BASELINE and "no Ready replica" in v.reason
    assert v.rule is Rule.FAILOVER  # typed, whatever the reason's wording
    # low demand would want everything on speculation, but that pool still has nobody Ready
    v2 = decide(k, KNEES, v.state, sample(30.0, 2.0, ready_spec=0))
    assert v2.action is Action.HOLD and v2.state.weights == Weights(speculative=0, baseline=100)
    assert v2.rule is Rule.HOLD
    # and the other way round
    v3 = decide(k, KNEES, start(30), sample(45.0, 100.0, ready_base=0))
    assert v3.weights == Weights(speculative=100, baseline=0)


def test_both_pools_unready_holds() -> None:
    v = decide(knobs(), KNEES, start(50), sample(0.0, 20.0, ready_spec=0, ready_base=0))
    assert v.action is Action.HOLD and v.state.weights == Weights(speculative=50, baseline=50)


def test_min_dwell_stops_the_dominant_mode_at_the_50_50_line() -> None:
    k = knobs(min_dwell=300.0, hysteresis=0.0, max_weight_step=100)
    state = replace(start(100, since=0.0), last_switch=0.0)
    _, verdicts = run(k, BIG_BASE, state, [50.0] * 22, start=15.0)  # t = 15 .. 330
    weights = [
        (round(15.0 + i * 15), v.weights.speculative)
        for i, v in enumerate(verdicts)
        if v.action is Action.SET_WEIGHTS and v.weights
    ]
    # the speculative pool stays dominant (>= 50) until its mode has lasted 300 s, then goes to the optimum 33
    assert weights == [(15, 50), (300, 33)]
    assert "min dwell 300 s" in verdicts[1].reason


def test_a_day_on_the_illustrative_profile_moves_calmly_and_follows_the_load() -> None:
    curves = profile_curves(ILLUSTRATIVE)
    k = knobs(down_stabilization=300.0, min_dwell=300.0)
    state = initial_state(k, Mode.SPECULATIVE, 0.0)
    # night (4 in flight), a 6 h peak at 300, night again; one sample every 15 s
    demands = [4.0] * 1440 + [300.0] * 1440 + [4.0] * 1440
    last, verdicts = run(k, curves, state, demands)
    moves = changes(verdicts)
    assert 2 <= len(moves) <= 8
    peak = verdicts[2 * 1440 - 1].state.weights
    assert peak is not None and 30 <= peak.speculative <= 60  # the speculative GPUs keep a share at peak
    assert last.weights == Weights(speculative=100, baseline=0)


def test_reason_for_a_move_carries_demand_split_and_weights() -> None:
    v = decide(knobs(hysteresis=0.0, max_weight_step=100), KNEES, start(), sample(0.0, 30.0))
    assert "demand 30.0 (15.0/replica" in v.reason
    assert "best split 10.0/20.0 in flight serves 200 tok/s" in v.reason
    assert v.reason.endswith("100/0 -> 50/50")


def test_state_is_consistent_after_a_move() -> None:
    v = decide(knobs(hysteresis=0.0, max_weight_step=100), BIG_BASE, start(100, since=0.0), sample(500.0, 60.0))
    assert v.state.weights == Weights(speculative=33, baseline=67)
    assert v.state.mode is Mode.BASELINE and v.state.mode_since == 500.0 and v.state.last_switch == 500.0
    assert replace(v.state, last_evaluation=None).pending is None


def test_oscillation_around_the_crossover_moves_a_few_points_not_the_whole_load() -> None:
    curves = profile_curves(ILLUSTRATIVE)
    k = knobs(down_stabilization=300.0, min_dwell=300.0)
    rng = random.Random(5)
    # 6 h swinging ±30 % around the crossover (64 per replica, 1 + 1 replicas) every 20 minutes, with noise
    demands = [128.0 * (1 + 0.3 * math.sin(2 * math.pi * i / 80) + rng.gauss(0, 0.05)) for i in range(1440)]
    _, verdicts = run(k, curves, initial_state(k, Mode.SPECULATIVE, 0.0), demands)
    weights = [v.state.weights.speculative for v in verdicts[10:] if v.state.weights]
    # around the crossover both pools serve alike per replica: the best weights stay near 50/50 and follow the
    # swing by a few points, while a naive switch throws the whole load from one pool to the other
    assert min(weights) >= 40 and max(weights) <= 60
    flips = sum((a >= 50) != (b >= 50) for a, b in itertools.pairwise(weights))
    naive = sum((a > 128.0) != (b > 128.0) for a, b in itertools.pairwise(demands))
    assert 2 * flips <= naive

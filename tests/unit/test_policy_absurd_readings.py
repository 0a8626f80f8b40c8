"""Readings no deployment can produce (a gauge near 1e200, infinities, negative counts) are unknown load: the
policy holds, counts the streak and says why; it never raises (issue 31, 3: OverflowError in the closed loop's
noise estimate ended every switching round)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specserve.api.models import Mode, Strategy, Weights
from specserve.policy.closed_loop import jitter
from specserve.policy.switching import MAX_DEMAND, decide
from specserve.policy.types import Action, PolicyState, PoolSignal, Sample
from tests.unit.policy_helpers import ILLUSTRATIVE, knobs, profile_curves
from tests.unit.test_policy_closed_loop import observed

CURVES = profile_curves(ILLUSTRATIVE)


def split_state(spec_weight: int = 50, readings: tuple[float, ...] = ()) -> PolicyState:
    return PolicyState(
        mode=Mode.SPECULATIVE, mode_since=-10_000.0, recent_demand=readings,
        weights=Weights(speculative=spec_weight, baseline=100 - spec_weight),
    )  # fmt: skip


def test_the_noise_estimate_does_not_overflow_and_is_scale_free() -> None:
    ramp = (10.0, 12.0, 11.0, 15.0, 13.0)
    assert jitter(tuple(r * 1e200 for r in ramp)) == pytest.approx(jitter(ramp))
    assert jitter((10.0, 12.0, 1e300, 11.0)) > 0  # one absurd reading among sane ones: no OverflowError
    assert jitter((10.0, math.inf, 11.0)) == 1.0  # no trust
    assert jitter((10.0, math.nan, 11.0)) == 1.0


@pytest.mark.parametrize("huge", [1e200, 1.7e308, MAX_DEMAND * 2])
def test_a_huge_running_gauge_is_unknown_load_and_holds(huge: float) -> None:
    k = knobs()
    state = split_state(readings=(20.0, 22.0, 21.0, 23.0))  # the closed loop's readings so far
    verdict = decide(k, CURVES, state, observed(0.0, huge, 20.0))
    assert verdict.action is Action.HOLD and verdict.weights == state.weights
    assert verdict.state.unknown_streak == 1
    assert "load unknown" in verdict.reason and "no plausible reading" in verdict.reason
    assert verdict.demand is None
    assert len(verdict.reason) < 300  # no 200-digit number in status


@pytest.mark.parametrize("strategy", [Strategy.RESTART, Strategy.ADAPTIVE])
def test_every_strategy_holds_on_a_huge_demand(strategy: Strategy) -> None:
    k = knobs(strategy, crossover=16.0)
    state = PolicyState(mode=Mode.SPECULATIVE, mode_since=-10_000.0, adaptive_crossover=16.0)
    verdict = decide(k, CURVES, state, Sample(time=0.0, demand=1e200))
    assert verdict.action is Action.HOLD and verdict.state.unknown_streak == 1


def test_a_negative_pool_count_leaves_the_closed_loop_out() -> None:
    """A pool reporting -1e200 beside +1e200 sums to a plausible demand: the pools' counts are not trusted."""
    k = knobs()
    state = split_state()
    verdict = decide(k, CURVES, state, observed(0.0, -1e200, 1e200))
    assert "the pools hold" not in verdict.reason  # the open loop decided, from the total alone


finite = st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=300, deadline=None)
@given(
    spec=finite, base=finite, queued=finite,
    readings=st.lists(st.floats(min_value=0, allow_nan=False, allow_infinity=False), max_size=8),
    strategy=st.sampled_from(list(Strategy)),
)  # fmt: skip
def test_no_reading_makes_the_policy_raise(
    spec: float, base: float, queued: float, readings: list[float], strategy: Strategy
) -> None:
    k = knobs(strategy, crossover=16.0)
    state = split_state(readings=tuple(readings)) if strategy is Strategy.TRAFFIC_SPLIT else PolicyState(
        mode=Mode.SPECULATIVE, mode_since=-10_000.0, adaptive_crossover=16.0, recent_demand=tuple(readings)
    )  # fmt: skip
    demand = spec + base + queued if math.isfinite(spec + base) else math.inf
    sample = Sample(
        time=0.0, demand=demand,
        speculative=PoolSignal(ready_replicas=1, running=spec, queued=queued),
        baseline=PoolSignal(ready_replicas=1, running=base, queued=0.0),
    )  # fmt: skip
    verdict = decide(k, CURVES, state, sample)
    if not (math.isfinite(demand) and 0 <= demand <= MAX_DEMAND):
        assert verdict.action is Action.HOLD and verdict.state.unknown_streak == 1

"""Pausing switching (specserve.io/paused): every change held except failover off a pool without a Ready replica."""

from __future__ import annotations

from specserve.api.models import Mode, Strategy
from specserve.policy.moves import weights_of
from specserve.policy.pause import DecideFn, PausedDecide, is_paused
from specserve.policy.switching import decide, initial_state
from specserve.policy.types import Action
from tests.unit.policy_helpers import ILLUSTRATIVE, knobs, profile_curves, sample


def test_the_annotation_is_read_as_kubectl_writes_it() -> None:
    assert is_paused({"specserve.io/paused": "true"})
    assert is_paused({"specserve.io/paused": "True"})
    assert not is_paused({"specserve.io/paused": "false"})
    assert not is_paused({})


def test_paused_holds_a_move_the_policy_would_make_and_says_what_it_would_have_done() -> None:
    k, curves = knobs(), profile_curves(ILLUSTRATIVE)
    state = initial_state(k, Mode.SPECULATIVE, 0.0)
    heavy = sample(15.0, 400.0)
    assert decide(k, curves, state, heavy).action is Action.SET_WEIGHTS  # the premise: it would move
    verdict = PausedDecide(decide)(k, curves, state, heavy)
    assert verdict.action is Action.HOLD
    assert verdict.weights == state.weights and verdict.mode is Mode.SPECULATIVE
    assert verdict.reason.startswith("paused") and "SetWeights" in verdict.reason
    assert verdict.state.pending is None  # no stabilization window runs out while paused
    assert verdict.state.last_evaluation == 15.0


def test_paused_still_fails_over_off_a_pool_without_ready_replicas() -> None:
    k, curves = knobs(), profile_curves(ILLUSTRATIVE)
    state = initial_state(k, Mode.SPECULATIVE, 0.0)
    verdict = PausedDecide(decide)(k, curves, state, sample(15.0, 1.0, ready_spec=0, ready_base=1))
    assert verdict.action is Action.SET_WEIGHTS
    assert verdict.weights == weights_of(0)
    assert verdict.reason.startswith("failover")


def _actions(decider: DecideFn, demand: float) -> list[Action]:
    k = knobs(Strategy.RESTART, speculative_replicas=1)
    curves, state = profile_curves(ILLUSTRATIVE), initial_state(k, Mode.SPECULATIVE, 0.0)
    actions = []
    for i in range(1, 400):
        verdict = decider(k, curves, state, sample(15.0 * i, demand, ready_base=None))
        actions.append(verdict.action)
        state = verdict.state
    return actions


def test_paused_holds_a_restart() -> None:
    assert Action.RESTART in _actions(decide, 500.0)  # the premise: unpaused it restarts
    assert set(_actions(PausedDecide(decide), 500.0)) == {Action.HOLD}

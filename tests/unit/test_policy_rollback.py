"""Rolling back the policy's own failed change: back to what served, the failed mode barred with an exponential,
capped back-off, the policy resuming (never into a barred mode before its time), a converged change lifting it."""

from __future__ import annotations

from dataclasses import replace

from specserve.api.models import Mode, Rule, Strategy
from specserve.policy.rollback import BAR_BASE, BAR_CAP, Failed, backoff, converged, rollback
from specserve.policy.switching import decide, initial_state
from specserve.policy.types import Action, Bar, PolicyState, Sample
from tests.unit.policy_helpers import SEED, knobs, profile_curves, sample

SEED_CURVES = profile_curves(SEED)  # baseline serves more everywhere: a Restart into Baseline is due at once


def test_the_back_off_is_10_minutes_doubling_to_6_hours() -> None:
    assert (BAR_BASE, BAR_CAP) == (600.0, 21600.0)
    assert [backoff(n) for n in (1, 2, 3, 4, 5, 6, 7, 20)] == [600, 1200, 2400, 4800, 9600, 19200, 21600, 21600]


def test_a_failed_restart_goes_back_to_the_mode_that_served_and_bars_the_other() -> None:
    state = PolicyState(mode=Mode.BASELINE, mode_since=100.0, last_switch=100.0, restarts=(100.0,), regret=5.0)
    failure = Failed(serving=Mode.SPECULATIVE, failed=Mode.BASELINE, reason="ProgressDeadlineExceeded: timed out")
    v = rollback(state, failure, 800.0)
    assert (v.action, v.mode, v.applied, v.rule) == (Action.ROLLBACK, Mode.SPECULATIVE, True, Rule.ROLLBACK)
    assert "restart into Baseline did not roll out (ProgressDeadlineExceeded: timed out)" in v.reason
    assert v.state.mode is Mode.SPECULATIVE and v.state.mode_since == 800.0 and v.state.regret == 0.0
    assert v.state.restarts == (100.0, 800.0)  # the pods roll again: it counts against the budget
    assert v.state.barred == (Bar(Mode.BASELINE, 1400.0, 1, "ProgressDeadlineExceeded: timed out"),)
    again = rollback(replace(v.state, mode=Mode.BASELINE), failure, 2000.0)
    assert again.state.barred == (Bar(Mode.BASELINE, 3200.0, 2, "ProgressDeadlineExceeded: timed out"),)


def test_the_policy_resumes_but_never_restarts_into_a_barred_mode_before_its_time() -> None:
    k = knobs(Strategy.RESTART)
    state = replace(initial_state(k, Mode.SPECULATIVE, 0.0), barred=(Bar(Mode.BASELINE, 1000.0, 1, "OOMKilled"),))
    held = decide(k, SEED_CURVES, state, sample(500.0, 50.0, ready_base=None))
    assert held.action is Action.HOLD
    assert "Baseline is barred for 500 s more" in held.reason and "OOMKilled" in held.reason
    after = decide(k, SEED_CURVES, held.state, sample(1000.0, 50.0, ready_base=None))
    assert after.action is Action.RESTART and after.mode is Mode.BASELINE
    assert after.state.barred == state.barred  # kept until the new roll converged
    # that roll converged after the bar: lifted, the next failure starts over at 10 minutes
    assert converged(after.state, 1100.0).barred == ()
    assert converged(held.state, 1100.0).barred == state.barred  # no change made since: the count stays


def test_a_failed_adaptive_rerender_goes_back_to_the_crossover_that_served_and_bars_rerendering() -> None:
    k = knobs(Strategy.ADAPTIVE, crossover=80.0)
    state = replace(initial_state(k, Mode.SPECULATIVE, 0.0), adaptive_crossover=64.0)
    moved = decide(k, None, state, Sample(time=10.0, demand=1.0))
    assert moved.action is Action.RECONFIGURE and moved.state.served_crossover == 64.0
    assert moved.rule is Rule.RECONFIGURE
    failure = Failed(Mode.SPECULATIVE, Mode.SPECULATIVE, "ProgressDeadlineExceeded", crossover=64.0)
    back = rollback(moved.state, failure, 700.0)
    assert back.action is Action.ROLLBACK and back.adaptive_crossover == 64.0
    assert back.state.adaptive_crossover == 64.0 and back.state.served_crossover is None
    assert back.state.barred == (Bar(Mode.SPECULATIVE, 1300.0, 1, "ProgressDeadlineExceeded"),)
    held = decide(k, None, back.state, Sample(time=800.0, demand=1.0))
    assert held.action is Action.HOLD and "re-rendering is barred for 500 s more" in held.reason
    later = decide(k, None, back.state, Sample(time=1300.0, demand=1.0))
    assert later.action is Action.RECONFIGURE and later.adaptive_crossover == 80.0


def test_a_converged_rerender_drops_its_rollback_point() -> None:
    state = PolicyState(mode=Mode.SPECULATIVE, mode_since=0.0, adaptive_crossover=80.0, served_crossover=64.0)
    assert converged(state, 100.0).served_crossover is None

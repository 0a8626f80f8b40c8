"""The rules every strategy shares: unknown demand, converging, no curves, curves without a crossover, advisory,
resume after an operator restart, Adaptive's re-render rule, and the initial state."""

from __future__ import annotations

import json
import math
from dataclasses import replace

from specserve.api.curves import Curve
from specserve.api.models import Mode, Rule, SpecServeStatus, Strategy, Weights
from specserve.policy.knobs import knobs_from_spec
from specserve.policy.reconfigure import DRAFT_ALWAYS, DRAFT_NEVER
from specserve.policy.switching import decide, initial_state
from specserve.policy.types import Action, PolicyState, PoolSignal, Sample
from specserve.reconcile.target import target
from specserve.switching.state import from_status as resumed_state
from specserve.switching.state import to_status as saved_state
from tests.unit.policy_helpers import ILLUSTRATIVE, SEED, changes, knobs, profile_curves, run, sample, specserve

CURVES = profile_curves(ILLUSTRATIVE)


def test_unknown_demand_holds_counts_and_names_the_error_then_recovery_resets() -> None:
    k = knobs(Strategy.RESTART, startup_seconds=0.0)  # a switch would otherwise happen at once
    state = PolicyState(mode=Mode.SPECULATIVE, mode_since=-1e6, regret=1e9)
    for i, demand in enumerate([None, math.nan, math.inf]):
        v = decide(k, CURVES, state, sample(15.0 * i, demand, error="Prometheus: connection refused"))
        assert v.action is Action.HOLD
        assert "Prometheus: connection refused" in v.reason and f"for {i + 1} evaluation" in v.reason
        assert v.state.unknown_streak == i + 1 and v.demand is None
        state = v.state
    recovered = decide(k, CURVES, state, sample(45.0, 200.0))
    assert recovered.state.unknown_streak == 0
    assert recovered.action is Action.RESTART  # the regret was there all along; now the signal is back


def test_unknown_without_an_error_message_still_says_why() -> None:
    v = decide(knobs(), CURVES, initial_state(knobs(), Mode.SPECULATIVE, 0.0), sample(0.0, None))
    assert v.action is Action.HOLD and "load unknown (no reading)" in v.reason


def test_converging_holds_every_strategy() -> None:
    for strategy in Strategy:
        k = knobs(strategy, hysteresis=0.0, crossover=10.0 if strategy is Strategy.ADAPTIVE else None)
        state = PolicyState(
            mode=Mode.SPECULATIVE, mode_since=-1e6, regret=1e12, weights=Weights(speculative=100, baseline=0)
        )
        v = decide(k, CURVES, state, sample(0.0, 500.0), converging=True)
        assert v.action is Action.HOLD and "not converged" in v.reason, strategy


def test_no_curves_and_no_crossover_holds_initial_mode_and_says_so() -> None:
    for strategy in (Strategy.TRAFFIC_SPLIT, Strategy.RESTART):
        k = knobs(strategy)
        _, verdicts = run(k, None, initial_state(k, Mode.BASELINE, 0.0), [1.0, 500.0, 2.0])
        assert changes(verdicts) == []
        assert "no curves and no crossoverConcurrency: holding initialMode Baseline" in verdicts[0].reason


def test_curves_without_a_crossover_stay_on_the_better_mode_and_say_so() -> None:
    seed = profile_curves(SEED)
    k = knobs(Strategy.RESTART, startup_seconds=510.0)
    v = decide(k, seed, initial_state(k, Mode.BASELINE, 0.0), sample(0.0, 3.0))
    assert v.action is Action.HOLD
    assert "no crossover: Baseline serves more" in v.reason and v.notes


def test_advisory_records_once_and_changes_nothing_traffic_split() -> None:
    k = knobs(advisory=True, hysteresis=0.0, max_weight_step=100)
    state = initial_state(k, Mode.SPECULATIVE, 0.0)
    _, verdicts = run(k, CURVES, state, [400.0] * 5)
    first = verdicts[0]
    assert first.action is Action.SET_WEIGHTS and not first.applied
    assert first.weights is not None and first.weights.speculative < 100
    assert first.reason.startswith("advisory (not applied)")
    assert all(v.state.weights == Weights(speculative=100, baseline=0) for v in verdicts)
    assert all(v.state.mode is Mode.SPECULATIVE for v in verdicts)
    assert [v.action for v in verdicts[1:]] == [Action.HOLD] * 4  # the same recommendation is not repeated
    # a different recommendation is recorded again
    v = decide(k, CURVES, verdicts[-1].state, sample(75.0, 1.0))
    assert v.action is Action.HOLD  # 100/0 is what low demand wants: nothing to recommend
    v2 = decide(k, CURVES, v.state, sample(90.0, 400.0))
    assert v2.action is Action.SET_WEIGHTS and not v2.applied


def test_advisory_restart_keeps_the_regret_and_the_mode() -> None:
    k = knobs(Strategy.RESTART, advisory=True, startup_seconds=1.0)
    state = PolicyState(mode=Mode.SPECULATIVE, mode_since=-1e6)
    _, verdicts = run(k, CURVES, state, [300.0] * 6)
    recorded = changes(verdicts)
    assert len(recorded) == 1 and recorded[0].action is Action.RESTART and not recorded[0].applied
    assert recorded[0].mode is Mode.BASELINE
    assert all(v.state.mode is Mode.SPECULATIVE and v.state.restarts == () for v in verdicts)
    assert verdicts[-1].state.regret > verdicts[2].state.regret  # still accumulating: nothing was restarted


def to_status(state: PolicyState) -> str:
    """What the operator keeps in status: plain JSON (status.switching, as the loop writes it)."""
    return json.dumps(SpecServeStatus(switching=saved_state(state)).model_dump(mode="json", by_alias=True))


def from_status(text: str) -> PolicyState:
    saved = SpecServeStatus.model_validate(json.loads(text)).switching
    assert saved is not None
    return resumed_state(saved)


def test_resume_after_an_operator_restart_keeps_dwell_regret_and_budget() -> None:
    k = knobs(Strategy.RESTART, min_dwell=600.0, max_restarts_per_day=2)
    demands = [300.0] * 60 + [3.0] * 80 + [300.0] * 80
    # uninterrupted
    _, straight = run(k, CURVES, initial_state(k, Mode.SPECULATIVE, 0.0), demands)
    # the operator dies after every 7th evaluation and rebuilds its state from status
    state = initial_state(k, Mode.SPECULATIVE, 0.0)
    resumed = []
    for i, d in enumerate(demands):
        if i % 7 == 0:
            state = from_status(to_status(state))
        v = decide(k, CURVES, state, sample(15.0 * i, d))
        resumed.append(v)
        state = v.state
    assert [(v.action, v.mode) for v in resumed] == [(v.action, v.mode) for v in straight]
    assert [v.state.regret for v in resumed] == [v.state.regret for v in straight]
    assert len(changes(straight)) == 2  # the budget of 2 is spent, not reset by the restarts
    assert state.restarts == straight[-1].state.restarts


def test_resume_in_the_middle_of_a_stabilization_window() -> None:
    k = knobs(up_stabilization=120.0, hysteresis=0.0, max_weight_step=100)
    state = initial_state(k, Mode.SPECULATIVE, 0.0)
    state, first = run(k, CURVES, state, [400.0] * 4)  # t = 0 .. 45: waiting
    assert changes(first) == [] and state.pending is not None and state.pending.since == 0.0
    state = from_status(to_status(state))
    _, rest = run(k, CURVES, state, [400.0] * 6, start=60.0)
    moves = [60.0 + 15 * i for i, v in enumerate(rest) if v.action is Action.SET_WEIGHTS]
    assert moves[0] == 120.0  # the window counted from t=0, not from the operator's restart


def test_adaptive_rerenders_only_when_the_crossover_moves_beyond_the_band() -> None:
    k = knobs(Strategy.ADAPTIVE, crossover=64.0, hysteresis=0.1)
    state = initial_state(k, Mode.SPECULATIVE, 0.0)
    assert state.adaptive_crossover == 64.0
    signal = PoolSignal(ready_replicas=1, spec_num_steps=0.0, accept_length=2.4)
    v = decide(k, CURVES, state, Sample(time=0.0, demand=100.0, speculative=signal))
    assert v.action is Action.HOLD and "active speculative steps 0 (drafting off)" in v.notes
    near = decide(replace(k, crossover=68.0), CURVES, state, Sample(time=15.0, demand=1.0))
    assert near.action is Action.HOLD and "within ±0.1 of the rendered 64.0" in near.reason
    far = decide(replace(k, crossover=80.0), CURVES, state, Sample(time=30.0, demand=1.0))
    assert far.action is Action.RECONFIGURE and far.adaptive_crossover == 80.0
    assert far.state.adaptive_crossover == 80.0
    again = decide(replace(k, crossover=80.0), CURVES, far.state, Sample(time=45.0, demand=1.0))
    assert again.action is Action.HOLD


def test_adaptive_takes_the_crossover_from_the_curves_and_leaves_explicit_configs_alone() -> None:
    k = knobs(Strategy.ADAPTIVE)
    v = decide(k, CURVES, initial_state(k, Mode.SPECULATIVE, 0.0), Sample(time=0.0, demand=5.0))
    assert v.action is Action.RECONFIGURE and v.adaptive_crossover == 64.0
    explicit = decide(
        replace(k, adaptive_explicit=True), CURVES, initial_state(k, Mode.SPECULATIVE, 0.0), Sample(0.0, 5.0)
    )
    assert explicit.action is Action.HOLD and "adaptiveConfig is set" in explicit.reason
    # no crossover, one mode better everywhere: a config that drafts never (seed) or always, not SGLang's default
    # (which drafts at small batches: the randomized suite's seed-like Adaptive cases lost 20-80 % of the tokens)
    seed = decide(k, profile_curves(SEED), initial_state(k, Mode.SPECULATIVE, 0.0), Sample(0.0, 5.0))
    assert seed.action is Action.RECONFIGURE and seed.adaptive_crossover == DRAFT_NEVER
    slow = Curve.from_points([(x, 0.1 * y) for x, y in CURVES.baseline.points()])
    faster = replace(CURVES, baseline=slow)
    always = decide(k, faster, initial_state(k, Mode.SPECULATIVE, 0.0), Sample(0.0, 5.0))
    assert always.action is Action.RECONFIGURE and always.adaptive_crossover == DRAFT_ALWAYS


def test_adaptive_advisory_records_once() -> None:
    k = knobs(Strategy.ADAPTIVE, crossover=30.0, advisory=True)
    state = replace(initial_state(k, Mode.SPECULATIVE, 0.0), adaptive_crossover=64.0)
    first = decide(k, CURVES, state, Sample(0.0, 5.0))
    second = decide(k, CURVES, first.state, Sample(15.0, 5.0))
    assert (first.action, first.applied, second.action) == (Action.RECONFIGURE, False, Action.HOLD)
    assert second.state.adaptive_crossover == 64.0


def test_initial_state_from_a_specserve() -> None:
    ts = initial_state(specserve(Strategy.TRAFFIC_SPLIT), Mode.BASELINE, 12.0)
    assert ts.weights == Weights(speculative=0, baseline=100) and ts.mode_since == 12.0
    ad = initial_state(specserve(Strategy.ADAPTIVE, {"crossoverConcurrency": 24}), Mode.SPECULATIVE, 0.0)
    assert ad.weights is None and ad.adaptive_crossover == 24.0
    rs = initial_state(specserve(Strategy.RESTART), Mode.SPECULATIVE, 0.0)
    assert (rs.weights, rs.adaptive_crossover, rs.regret, rs.restarts) == (None, None, 0.0, ())


def test_every_verdict_carries_the_demand_and_the_evaluation_time() -> None:
    v = decide(knobs(), CURVES, initial_state(knobs(), Mode.SPECULATIVE, 0.0), sample(30.0, 12.5))
    assert v.demand == 12.5 and v.state.last_evaluation == 30.0


def test_a_traffic_split_whose_initial_pool_has_no_replicas_starts_on_the_served_weights_with_no_failover() -> None:
    """Render routes everything to the other pool when the initial mode's pool has no replicas (a pool with no
    replicas never gets traffic); the policy's first state must hold the same weights, or its first decision is a
    failover off a pool that never served (recorded in status.lastDecision and counted as a failover)."""
    for mode, empty, ready in ((Mode.SPECULATIVE, "speculative", (0, 1)), (Mode.BASELINE, "baseline", (1, 0))):
        obj = specserve(Strategy.TRAFFIC_SPLIT, {"initialMode": mode.value}, pools={empty: {"replicas": 0}})
        state = initial_state(obj, mode, 0.0)
        assert state.weights == target(obj, SpecServeStatus()).weights  # what the reconcile serves before it
        verdict = decide(knobs_from_spec(obj), None, state, sample(15.0, 2.0, *ready))
        assert verdict.action is Action.HOLD and verdict.rule is not Rule.FAILOVER, verdict.reason
        assert verdict.state.weights == state.weights

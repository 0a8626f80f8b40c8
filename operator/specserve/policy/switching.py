"""The switching policy: one pure function from (knobs, curves, state, sample) to a Verdict.

The rules every strategy shares, in order:
1. TrafficSplit failover (traffic.failover): weight off a pool without a Ready replica, at once, whatever else;
2. unknown demand (None, NaN, infinite, negative, beyond MAX_DEMAND): hold, count the streak, name the error;
   never a switch on unknown;
3. converging (a previous change has not converged, pods pending): hold;
4. no curves and no crossoverConcurrency: hold initialMode and say so;
5. the strategy's own rule (traffic.py, restart.py, reconfigure.py);
6. advisory: the change is recorded (applied=False) but the state does not pretend it happened; the same
   recommendation comes back as HOLD after the first time (state.pending: the advice given, PendingKind.ADVISED).
"""

from __future__ import annotations

import math
from dataclasses import replace

from specserve.api.models import Mode, SpecServe, Strategy, Weights
from specserve.policy.curves import ModeCurves, better_mode, crossover
from specserve.policy.knobs import knobs_from_spec
from specserve.policy.reconfigure import decide_adaptive
from specserve.policy.restart import decide_restart
from specserve.policy.step import Step, hold
from specserve.policy.traffic import decide_traffic, failover
from specserve.policy.types import Action, Knobs, Pending, PendingKind, PolicyState, Sample, Verdict

# Requests in flight across a SpecServe's pods: no deployment holds more. A larger reading is a broken or hostile
# exporter (a gauge near 1e200 overflowed the noise estimate), not load: unknown, never a switch.
MAX_DEMAND = 1e9


def known(demand: float | None) -> float | None:
    if demand is None or not math.isfinite(demand) or demand < 0 or demand > MAX_DEMAND:
        return None
    return demand


def unknown_why(sample: Sample) -> str:
    if sample.error:
        return sample.error
    if sample.demand is None:
        return "no reading"
    return f"a demand of {sample.demand:.3g} requests in flight is no plausible reading"


def initial_state(obj_or_knobs: SpecServe | Knobs, mode: Mode, now: float) -> PolicyState:
    """The state before the first decision: `mode` since `now`; TrafficSplit with the weights the route serves
    (all on that mode's pool, unless it has no replicas); Adaptive remembering the crossover the first rendered
    config came from (spec crossoverConcurrency)."""
    if isinstance(obj_or_knobs, SpecServe):
        knobs = knobs_from_spec(obj_or_knobs)
        rendered = obj_or_knobs.spec.switching.crossover_concurrency
    else:
        knobs, rendered = obj_or_knobs, obj_or_knobs.crossover
    # What the reconcile serves before the first decision: a pool with no replicas gets none (else the first
    # evaluation would fail over off a pool that never served).
    split = knobs.strategy is Strategy.TRAFFIC_SPLIT
    weights = Weights.served(mode, knobs.speculative_replicas, knobs.baseline_replicas) if split else None
    adaptive = rendered if knobs.strategy is Strategy.ADAPTIVE else None
    return PolicyState(mode=mode, mode_since=now, weights=weights, adaptive_crossover=adaptive)


def decide(
    knobs: Knobs, curves: ModeCurves | None, state: PolicyState, sample: Sample, *, converging: bool = False
) -> Verdict:
    """The switching policy (pure): from the SpecServe's knobs, the curves it decides with, the policy's memory
    and one load sample, the next step (hold, move weights, restart, reconfigure) and the new memory. Unknown load
    holds (and counts a streak); `converging` (the previous change has not converged: pods pending) holds; only a
    TrafficSplit failover off a dead pool comes before both (the rules, in order, are in this module's docstring)."""
    now = sample.time
    demand = known(sample.demand)
    streak = 0 if demand is not None else state.unknown_streak + 1
    base = replace(state, unknown_streak=streak, last_evaluation=now)
    step = _rule(knobs, curves, base, state, sample, demand, converging)
    return _verdict(knobs, state, step, demand, now)


def _rule(
    knobs: Knobs,
    curves: ModeCurves | None,
    base: PolicyState,
    before: PolicyState,
    sample: Sample,
    demand: float | None,
    converging: bool,
) -> Step:
    now = sample.time
    if knobs.strategy is Strategy.TRAFFIC_SPLIT:
        moved = failover(knobs, base, sample)
        if moved is not None:
            return moved
    if demand is None:
        why = unknown_why(sample)
        return hold(base, f"load unknown ({why}) for {base.unknown_streak} evaluation(s): holding {base.mode}")
    if converging:
        return hold(base, f"the previous change has not converged (pods pending): holding {base.mode}")
    if knobs.strategy is Strategy.ADAPTIVE:
        return decide_adaptive(knobs, curves, base, sample)
    if curves is None:
        return hold(
            replace(base, pending=None),
            f"no curves and no crossoverConcurrency: holding initialMode {base.mode} "
            "(run `specserve calibrate` to let the policy decide)",
        )
    if knobs.strategy is Strategy.RESTART:
        # regret integrates from the previous evaluation: use the clock before `base` advanced it
        restart_state = replace(base, last_evaluation=before.last_evaluation)
        step = decide_restart(knobs, curves, restart_state, demand, now, sample.history)
    else:
        step = decide_traffic(knobs, curves, base, demand, sample)
    if knobs.crossover is None and crossover(curves) is None:
        note = f"the curves give no crossover: {better_mode(curves)} serves more across the measured concurrencies"
        step = replace(step, reason=f"{step.reason} ({note})", notes=(*step.notes, note))
    return step


def advice(step: Step, since: float | None) -> Pending:
    """The recommendation a step makes, as advisory mode records it (the wish's start kept: its window goes on)."""
    crossover = round(step.adaptive_crossover, 2) if step.adaptive_crossover is not None else None
    weight = step.weights.speculative if step.weights is not None else None
    return Pending(PendingKind.ADVISED, since, weight, step.action, step.mode, crossover)


def _verdict(knobs: Knobs, before: PolicyState, step: Step, demand: float | None, now: float) -> Verdict:
    held = replace(step.held, last_evaluation=now)
    weights = step.weights if step.weights is not None else held.weights
    mode = step.mode if step.mode is not None else held.mode
    if step.action is Action.HOLD or step.changed is None:
        return Verdict(
            state=held, action=Action.HOLD, mode=held.mode, weights=held.weights, reason=step.reason,
            demand=demand, adaptive_crossover=held.adaptive_crossover, notes=step.notes,
        )  # fmt: skip
    if not knobs.advisory:
        return Verdict(
            state=replace(step.changed, last_evaluation=now), action=step.action, mode=mode, weights=weights,
            reason=step.reason, demand=demand, adaptive_crossover=step.adaptive_crossover, notes=step.notes,
            rule=step.rule,
        )  # fmt: skip
    advised = advice(step, held.pending.since if held.pending is not None else None)
    kept = replace(held, pending=advised)
    if advised.same_advice(before.pending):
        return Verdict(
            state=kept, action=Action.HOLD, mode=held.mode, weights=held.weights, applied=False,
            reason=f"advisory, already recommended: {step.reason}", demand=demand,
            adaptive_crossover=held.adaptive_crossover, notes=step.notes,
        )  # fmt: skip
    return Verdict(
        state=kept, action=step.action, mode=mode, weights=weights, applied=False,
        reason=f"advisory (not applied): {step.reason}", demand=demand,
        adaptive_crossover=step.adaptive_crossover, notes=step.notes, rule=step.rule,
    )  # fmt: skip

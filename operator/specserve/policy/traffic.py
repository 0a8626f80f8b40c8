"""TrafficSplit: move the HTTPRoute weights towards the split that serves the most tokens/s (split.py), calmly.

In order, per evaluation:
1. failover (before anything else, see `failover`): no weight on a pool without a Ready replica, at once;
2. the closed loop (`closed_loop`), when both pools are Ready and their requests in flight are read (the usual
   case): the weight policy.predict split_forecasts to serve the most from where the requests are, when its gain beats
   the demand's noise (hysteresis x the jitter of the last readings). It honours the step bound, and it crosses
   the 50/50 line (changes the dominant pool) only once the wish has lasted the direction's stabilization window
   and min dwell allows;
3. otherwise the open-loop rules, from the total demand alone. The target: the weights that hold the best split
   robustly (weights.py);
   a. dead band: weights inside the range of targets over demands D(1-h) .. D(1+h) stay (weights.weight_band);
      a demand that wanders less than the band moves nothing, however often it crosses the crossover;
   b. stabilization: the wish to move in one direction must persist for the window of that direction (towards
      baseline: upStabilizationSeconds; back towards speculative: downStabilizationSeconds; a move that relieves
      a pool over the TPOT SLO: the shorter of the two, see `relieves_overload`). state.pending holds the wish
      (WAITING, the speculative weight wanted, since when); a wish in the other direction or a demand back
      inside the band clears it (HPA-style). Once the window has passed, the move continues evaluation after
      evaluation without waiting again until the target is reached (pending MOVING), inside the band or not: the
      band decides when a move starts, not where it stops;
   c. a bounded step: the speculative weight moves by at most max_weight_step points per evaluation;
   d. the dominant pool changes only for a gain: the weights cross the 50/50 line only when the target serves at
      least weights.MODE_GAIN more than the line itself (near the crossover both pools serve alike and the best
      weights hover around 50/50);
   e. min dwell: the dominant mode (the pool with the larger weight; speculative at 50/50) changes at most once
      per minDwellSeconds (counted from the previous change; the first change has none before it); within it the
      weights may move up to the 50/50 boundary but not across.
"""

from __future__ import annotations

import math
from dataclasses import replace

from specserve.api.models import Mode, Rule, Weights
from specserve.policy.curves import ModeCurves, crossover
from specserve.policy.predict import (
    FLOOR,
    HORIZON_TURNOVERS,
    ROBUST_GAIN,
    best,
    holds_across,
    jitter,
    remember,
    split_forecasts,
    tolerance,
)
from specserve.policy.split import TOKENS_TIE
from specserve.policy.step import Step, hold
from specserve.policy.types import Action, Knobs, Pending, PendingKind, PolicyState, PoolSignal, Sample
from specserve.policy.weights import MODE_GAIN, crossing_gain, settle, weight_band

SPLIT_POINT = 50  # speculative weight at and above which the speculative pool is the dominant mode


def dominant(weights: Weights) -> Mode:
    return Mode.SPECULATIVE if weights.speculative >= SPLIT_POINT else Mode.BASELINE


def weights_of(spec: int) -> Weights:
    return Weights(speculative=spec, baseline=100 - spec)


def current_weights(state: PolicyState) -> Weights:
    if state.weights is not None:
        return state.weights
    return Weights.all_on(state.mode)


def ready(knobs: Knobs, sample: Sample) -> tuple[int, int]:
    """Ready replicas per pool; a pool the sample does not describe counts as its spec replicas."""
    n_s = sample.speculative.ready_replicas if sample.speculative is not None else knobs.speculative_replicas
    n_b = sample.baseline.ready_replicas if sample.baseline is not None else knobs.baseline_replicas
    return max(n_s, 0), max(n_b, 0)


def show(w: Weights) -> str:
    return f"{w.speculative}/{w.baseline}"


def moved(state: PolicyState, new: Weights, now: float) -> PolicyState:
    mode = dominant(new)
    since = now if mode is not state.mode else state.mode_since
    return replace(state, weights=new, mode=mode, mode_since=since, last_switch=now)


def set_weights(held: PolicyState, after: PolicyState, new: Weights, now: float, reason: str, rule: Rule) -> Step:
    """A step that sets `new`: the next state is `held` when the change is not made (advisory), `after` moved to
    `new` when it is."""
    return Step(
        held=held,
        action=Action.SET_WEIGHTS,
        reason=reason,
        changed=moved(after, new, now),
        mode=dominant(new),
        weights=new,
        rule=rule,
    )


def failover(knobs: Knobs, state: PolicyState, sample: Sample) -> Step | None:
    """All weight off a pool with no Ready replica, onto the other one if it has any: overrides the dead band,
    stabilization, the step bound and min dwell, and acts even when the demand is unknown (readiness comes from
    the pods, not from the metrics)."""
    n_s, n_b = ready(knobs, sample)
    w = current_weights(state)
    if n_s == 0 and n_b > 0 and w.speculative > 0:
        new, empty = weights_of(0), "speculative"
    elif n_b == 0 and n_s > 0 and w.baseline > 0:
        new, empty = weights_of(100), "baseline"
    else:
        return None
    held = replace(state, pending=None)
    return set_weights(
        held,
        held,
        new,
        sample.time,
        f"failover: the {empty} pool has no Ready replica: weights {show(w)} -> {show(new)}",
        Rule.FAILOVER,
    )


def pending_target(pending: Pending | None) -> int | None:
    """The speculative weight a pending wish wants (also after an advisory recommendation of weights)."""
    return pending.weight if pending is not None else None


def dwelling(knobs: Knobs, state: PolicyState, now: float) -> bool:
    """Whether the dominant mode is younger than min dwell (the first change has none before it)."""
    return state.last_switch is not None and now - state.mode_since < knobs.min_dwell


def next_weight(knobs: Knobs, state: PolicyState, w: Weights, target: Weights, now: float) -> tuple[int, str]:
    """The speculative weight one evaluation may move to on its way to `target` (the step bound, then min dwell),
    and what limited it, worded for the reason."""
    step = target.speculative - w.speculative
    if knobs.max_weight_step > 0:
        step = max(-knobs.max_weight_step, min(knobs.max_weight_step, step))
    new_spec = w.speculative + step
    if dominant(weights_of(new_spec)) is not dominant(w) and dwelling(knobs, state, now):
        line = SPLIT_POINT if dominant(w) is Mode.SPECULATIVE else SPLIT_POINT - 1
        began = now - state.mode_since
        return (
            line,
            f", held at the 50/50 line: {dominant(w)} began {began:.0f} s ago (min dwell {knobs.min_dwell:.0f} s)",
        )
    if new_spec != target.speculative:
        return new_spec, f", step limited to {knobs.max_weight_step} points"
    return new_spec, ""


def in_flight(signal: PoolSignal | None) -> float | None:
    """A pool's observed requests in flight (running + queued); None: not observed, or no plausible count."""
    if signal is None or signal.running is None:
        return None
    total = signal.running + (signal.queued or 0.0)
    return total if math.isfinite(total) and total >= 0 else None


def beyond_step(knobs: Knobs, w: Weights, spec_weight: int) -> bool:
    return knobs.max_weight_step > 0 and abs(spec_weight - w.speculative) > knobs.max_weight_step


def reachable(knobs: Knobs, state: PolicyState, w: Weights, spec_weight: int, now: float, crossing: bool) -> bool:
    """Whether one evaluation may move the speculative weight from `w` to `spec_weight`: within the step bound, and
    on the dominant pool's side of the 50/50 line unless `crossing` (its window has passed) and min dwell allow."""
    if beyond_step(knobs, w, spec_weight):
        return False
    if dominant(weights_of(spec_weight)) is dominant(w):
        return True
    return crossing and not dwelling(knobs, state, now)


def wanted_side(pending: Pending) -> Mode | None:
    """The pool a pending wish (or advice) would make dominant; None: it wants no weights."""
    return dominant(weights_of(pending.weight)) if pending.weight is not None else None


def crossing_wish(knobs: Knobs, state: PolicyState, w: Weights, ideal: int, now: float) -> tuple[Pending | None, str]:
    """The wish to move the dominant pool across the 50/50 line towards `ideal`, and what still holds it back
    ("" once its stabilization window has passed). A wish on the same side as before keeps its start and its
    first target (status is written only when the state changes)."""
    side = dominant(weights_of(ideal))
    if side is dominant(w):
        return None, ""
    previous = state.pending
    if previous is not None and previous.since is not None and wanted_side(previous) is side:
        wish = replace(previous, kind=PendingKind.WAITING)
    else:
        wish = Pending(PendingKind.WAITING, now, ideal)
    window = knobs.up_stabilization if side is Mode.BASELINE else knobs.down_stabilization
    waited = now - wish.since if wish.since is not None else 0.0
    if waited >= window:
        return wish, ""
    return wish, f"towards {side} for {waited:.0f} s of the {window:.0f} s window"


def closed_loop(knobs: Knobs, curves: ModeCurves, state: PolicyState, sample: Sample, where: str) -> Step | None:
    """Both pools Ready and observed: the weight that policy.predict split_forecasts to serve the most from the loads
    the pools hold, among those one evaluation may reach (the step bound; across the 50/50 line only after the
    direction's stabilization window and min dwell), when it gains more than the demand's noise. None: the
    open-loop rules decide (a pool without a Ready replica or not observed)."""
    now, slo = sample.time, knobs.tpot_slo
    n_s, n_b = ready(knobs, sample)
    c_s, c_b = in_flight(sample.speculative), in_flight(sample.baseline)
    if n_s <= 0 or n_b <= 0 or c_s is None or c_b is None:
        return None
    w = current_weights(state)
    readings = remember(state.recent_demand, c_s + c_b)
    loads = f"{where}: the pools hold {c_s:.1f}/{c_b:.1f} in flight"
    options = split_forecasts(curves, w.speculative, c_s, c_b, n_s, n_b, slo)
    if options is None:
        return hold(replace(state, pending=None, recent_demand=readings), f"{loads}: weights {show(w)} stay")
    ideal = best(options, w.speculative, slo)
    wish, waiting = crossing_wish(knobs, state, w, ideal.weight, now)
    held = replace(state, pending=wish, recent_demand=readings)
    here = next(f for f in options if f.weight == w.speculative)
    top = best([f for f in options if reachable(knobs, state, w, f.weight, now, not waiting)], w.speculative, slo)
    # a move pays the demand's noise and the cost of a weight change (spec.switching.weightChangeCost)
    gain, needed = top.gain_over(here, slo), max(tolerance(knobs.hysteresis, readings), knobs.weight_change_cost)
    limits = ""
    if ideal.weight != top.weight:
        if beyond_step(knobs, w, ideal.weight):
            why = f"step limited to {knobs.max_weight_step} points"
        elif waiting:
            why = waiting
        else:
            why = f"{dominant(w)} began {now - state.mode_since:.0f} s ago, min dwell {knobs.min_dwell:.0f} s"
        limits = f" (best {show(weights_of(ideal.weight))}: {why})"
    told = (
        f"{loads}; over the next {HORIZON_TURNOVERS:g} turnovers weights {show(weights_of(top.weight))} serve "
        f"{gain * 100:+.2f} % (the demand wanders {jitter(readings) * 100:.1f} % over {len(readings)} readings: "
        f"a move needs {needed * 100:.2f} %)"
    )
    stay = f"{told}: weights {show(w)} stay"
    if top.weight == w.speculative or gain <= FLOOR:
        return hold(held, stay + limits)
    if w.speculative in (0, 100) and gain < TOKENS_TIE:
        # an idle pool starts serving only for a gain: a light load split onto a second pool gains a fraction of
        # a percent on paper, and the requests sent there run slower (split.py's light-load rule)
        return hold(held, f"{stay} (leaving a pool idle needs {TOKENS_TIE * 100:g} %)")
    if gain <= needed:
        everywhere = (curves, w.speculative, top.weight, c_s, c_b, n_s, n_b, slo, readings)
        if gain <= max(ROBUST_GAIN, knobs.weight_change_cost) or not holds_across(*everywhere):
            return hold(held, stay + limits)
        told += f", and more than {ROBUST_GAIN * 100:g} % at every demand the noise leaves plausible"
    new = weights_of(top.weight)
    after = replace(held, pending=None) if dominant(new) is not dominant(w) else held
    return set_weights(held, after, new, now, f"{told}: weights {show(w)} -> {show(new)}{limits}", Rule.CLOSED_LOOP)


def relieves_overload(
    knobs: Knobs, curves: ModeCurves, w: Weights, target: Weights, demand: float, n_s: int, n_b: int
) -> bool:
    """Whether the current weights can leave a pool over the TPOT SLO (at their worst settling point; planned at
    split.SLO_MARGIN of it) and the target serves more goodput: overload is what the short window is for
    (upStabilizationSeconds, 0 by default), whichever pool the move loads. Where speculation is the overflow
    pool (the seed profile: baseline serves more but fills up to its SLO), relieving the baseline pool moves
    weight towards speculation, and waiting out downStabilizationSeconds leaves every request on it late."""
    slo = knobs.tpot_slo
    if slo is None:
        return False
    now = settle(curves, w.speculative, demand, n_s, n_b, slo)
    if now.goodput >= now.tokens_per_second * (1 - 1e-6):
        return False
    return settle(curves, target.speculative, demand, n_s, n_b, slo).goodput > now.goodput * (1 + 1e-6)


def objective(knobs: Knobs, curves: ModeCurves) -> Knobs:
    """The knobs the split is weighed with: curves modelled on the crossover are in relative units (the
    baseline's single-stream rate is 1 token/s), so a TPOT SLO in seconds cannot be read off them (every pool
    would miss it at every load and every weight would serve no goodput): they maximise tokens/s."""
    return replace(knobs, tpot_slo=None) if curves.modelled and knobs.tpot_slo is not None else knobs


UNITLESS_SLO = "tpotSloSeconds is not applied: curves modelled on crossoverConcurrency have no units (calibrate)"


def decide_traffic(knobs: Knobs, curves: ModeCurves, state: PolicyState, demand: float, sample: Sample) -> Step:
    weighed = objective(knobs, curves)
    step = split_traffic(weighed, curves, state, demand, sample)
    if weighed is knobs:
        return step
    return replace(step, reason=f"{step.reason} ({UNITLESS_SLO})", notes=(*step.notes, UNITLESS_SLO))


def split_traffic(knobs: Knobs, curves: ModeCurves, state: PolicyState, demand: float, sample: Sample) -> Step:
    now = sample.time
    n_s, n_b = ready(knobs, sample)
    w = current_weights(state)
    if n_s + n_b == 0:
        return hold(replace(state, pending=None), "no Ready replica in either pool: holding")
    c = crossover(curves) if knobs.crossover is None else knobs.crossover
    where = f"demand {demand:.1f} ({demand / (n_s + n_b):.1f}/replica" + (f", crossover {c:.1f})" if c else ")")
    predicted = closed_loop(knobs, curves, state, sample, where)
    if predicted is not None:
        return predicted
    target, split, lo, hi = weight_band(curves, demand, n_s, n_b, knobs.hysteresis, knobs.tpot_slo)
    best = (
        f"best split {split.speculative:.1f}/{split.baseline:.1f} in flight serves {split.tokens_per_second:.0f} "
        f"tok/s, target weights {show(target)}"
    )
    towards = Mode.BASELINE if target.speculative < w.speculative else Mode.SPECULATIVE
    previous = pending_target(state.pending)
    same_way = previous is not None and (previous < w.speculative) == (towards is Mode.BASELINE)
    # a move under way goes on to its target: the band decides when to start moving, not where to stop
    under_way = state.pending is not None and state.pending.kind is PendingKind.MOVING
    moving = same_way and under_way and target.speculative != w.speculative
    if lo <= w.speculative <= hi and not moving:
        band = f"{lo}-{hi}" if lo != hi else f"{lo}"
        return hold(
            replace(state, pending=None),
            f"{where}: {best}; weights {show(w)} are inside the dead band (speculative {band} for demand "
            f"x(1±{knobs.hysteresis:g})): holding",
        )
    if dominant(target) is not dominant(w):
        line = SPLIT_POINT if dominant(w) is Mode.SPECULATIVE else SPLIT_POINT - 1
        gain = crossing_gain(curves, line, target.speculative, demand, n_s, n_b, knobs.tpot_slo)
        if gain < MODE_GAIN:
            best += f" (only {gain * 100:+.2f} % over the 50/50 line: {dominant(w)} stays dominant)"
            if w.speculative == line:
                return hold(replace(state, pending=None), f"{where}: {best}: holding")
            target = weights_of(line)
    window = knobs.up_stabilization if towards is Mode.BASELINE else knobs.down_stabilization
    if relieves_overload(knobs, curves, w, target, demand, n_s, n_b):
        window = min(knobs.up_stabilization, knobs.down_stabilization)
        best += " (relieves a pool over the TPOT SLO: as urgent as overload)"
    began = state.pending.since if state.pending is not None else None
    since = began if same_way and began is not None else now
    # the wish keeps the target it began with while it waits (status is written only when the state changes)
    kept = state.pending if same_way and not moving else None
    wish = replace(kept, since=since) if kept is not None else Pending(PendingKind.WAITING, since, target.speculative)
    waiting = replace(state, pending=wish)
    if now - since < window and not moving:
        return hold(
            waiting,
            f"{where}: {best}; towards {towards} for {now - since:.0f} s of the {window:.0f} s window: "
            f"weights stay {show(w)}",
        )
    new_spec, limits = next_weight(knobs, state, w, target, now)
    if new_spec == w.speculative:
        return hold(waiting, f"{where}: {best}; towards {towards}{limits}: weights stay {show(w)}")
    new = weights_of(new_spec)
    reached = new_spec == target.speculative
    held_after = replace(
        waiting,
        pending=None if reached else Pending(PendingKind.MOVING, since, target.speculative),
    )
    reason = f"{where}: {best}; towards {towards} for {now - since:.0f} s: weights {show(w)} -> {show(new)}{limits}"
    return set_weights(waiting, held_after, new, now, reason, Rule.SPLIT)

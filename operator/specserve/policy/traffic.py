"""TrafficSplit: move the HTTPRoute weights towards the split that serves the most tokens/s (split.py), calmly.

In order, per evaluation:
1. failover (before anything else, see `failover`): no weight on a pool without a Ready replica, at once;
2. the closed loop (`closed_loop`), when both pools are Ready and their requests in flight are read (the usual
   case): the weight closed_loop.py predicts to serve the most from where the requests are, when its gain beats
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

Pools on shared GPUs (spec.placement.gpuSharing Shared: time-slicing, MPS, one device under both) have one
capacity between them, and a split serves less than the better pool alone (measured on one H200:
docs/real-engine.md). There every rule weighs only the two extremes (closed_loop.candidates, weights.extreme_band),
a move goes in one step (moves.step_bound), and min dwell holds the weights where they are instead of at 50/50.
"""

from __future__ import annotations

from dataclasses import replace

from specserve.api.models import Mode, Rule, Weights
from specserve.policy.closed_loop import closed_loop
from specserve.policy.curves import ModeCurves, crossover
from specserve.policy.moves import (
    current_weights,
    dominant,
    dwelling,
    ready,
    set_weights,
    show,
    split_line,
    step_bound,
    weights_of,
)
from specserve.policy.step import Step, hold
from specserve.policy.types import Knobs, Pending, PendingKind, PolicyState, Sample
from specserve.policy.weights import MODE_GAIN, crossing_gain, extreme_band, settle, weight_band


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


def next_weight(knobs: Knobs, state: PolicyState, w: Weights, target: Weights, now: float) -> tuple[int, str]:
    """The speculative weight one evaluation may move to on its way to `target` (the step bound, then min dwell),
    and what limited it, worded for the reason."""
    step, bound = target.speculative - w.speculative, step_bound(knobs)
    if bound > 0:
        step = max(-bound, min(bound, step))
    new_spec = w.speculative + step
    if dominant(weights_of(new_spec)) is not dominant(w) and dwelling(knobs, state, now):
        # shared GPUs: a split serves less than either pool alone, so the weights wait where they are
        line = w.speculative if knobs.shared_gpus else split_line(w)
        began = now - state.mode_since
        return (
            line,
            f", held {'where they are' if knobs.shared_gpus else 'at the 50/50 line'}: {dominant(w)} began "
            f"{began:.0f} s ago (min dwell {knobs.min_dwell:.0f} s)",
        )
    if new_spec != target.speculative:
        return new_spec, f", step limited to {bound} points"
    return new_spec, ""


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
    baseline's single-stream rate is 1 token/s) until the pools' readings give them units (curves.with_units), so
    a TPOT SLO in seconds cannot be read off them (every pool would miss it at every load and every weight would
    serve no goodput): they maximise tokens/s."""
    return replace(knobs, tpot_slo=None) if curves.unitless and knobs.tpot_slo is not None else knobs


UNITLESS_SLO = (
    "tpotSloSeconds is not applied: curves modelled on crossoverConcurrency have no units until the pools' "
    "readings give them (or calibrate)"
)


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
    if n_s == 0 or n_b == 0:
        # Weights only on Ready pools: the failover has moved them off the empty one. Weighing the curves here
        # would tie at no load (both extremes serve 0) and send the weights back onto the dead pool.
        empty = "speculative" if n_s == 0 else "baseline"
        return hold(replace(state, pending=None), f"the {empty} pool has no Ready replica: weights stay {show(w)}")
    c = crossover(curves) if knobs.crossover is None else knobs.crossover
    where = f"demand {demand:.1f} ({demand / (n_s + n_b):.1f}/replica" + (f", crossover {c:.1f})" if c else ")")
    predicted = closed_loop(knobs, curves, state, sample, where)
    if predicted is not None:
        return predicted
    banded = extreme_band if knobs.shared_gpus else weight_band
    target, split, lo, hi = banded(curves, demand, n_s, n_b, knobs.hysteresis, knobs.tpot_slo)
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
    if dominant(target) is not dominant(w) and not knobs.shared_gpus:
        line = split_line(w)
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

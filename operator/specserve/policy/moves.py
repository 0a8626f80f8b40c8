"""The weight moves both TrafficSplit rules make (the open-loop rules in traffic.py, the closed loop in
closed_loop.py): which pool dominates, the state a move leaves, the step bound and min dwell."""

from __future__ import annotations

from dataclasses import replace

from specserve.api.models import Mode, Rule, Weights
from specserve.policy.step import Step
from specserve.policy.types import Action, Knobs, PolicyState, Sample

SPLIT_POINT = 50  # speculative weight at and above which the speculative pool is the dominant mode


def dominant(weights: Weights) -> Mode:
    return Mode.SPECULATIVE if weights.speculative >= SPLIT_POINT else Mode.BASELINE


def split_line(weights: Weights) -> int:
    """The speculative weight on the 50/50 line, on the dominant pool's side of it."""
    return SPLIT_POINT if dominant(weights) is Mode.SPECULATIVE else SPLIT_POINT - 1


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


def dwelling(knobs: Knobs, state: PolicyState, now: float) -> bool:
    """Whether the dominant mode is younger than min dwell (the first change has none before it)."""
    return state.last_switch is not None and now - state.mode_since < knobs.min_dwell


def step_bound(knobs: Knobs) -> int:
    """Points the speculative weight may move per evaluation; 0: unbounded. Pools on shared GPUs have one
    capacity between them: every split between the extremes serves less than both, so a move goes in one step."""
    return 0 if knobs.shared_gpus else knobs.max_weight_step


def beyond_step(knobs: Knobs, w: Weights, spec_weight: int) -> bool:
    return step_bound(knobs) > 0 and abs(spec_weight - w.speculative) > step_bound(knobs)

"""Pausing switching (pure): the annotation `specserve.io/paused: "true"` (set by `kubectl specserve pause`)
holds every change the policy would make, except a TrafficSplit failover off a pool without a Ready replica:
weight on a dead pool fails requests, and no maintenance window makes that acceptable."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

from specserve.api.models import Strategy
from specserve.api.rules import PAUSED_ANNOTATION
from specserve.policy.curves import ModeCurves
from specserve.policy.traffic import failover
from specserve.policy.types import Action, Knobs, PolicyState, Sample, Verdict

PAUSED_MESSAGE = f"switching is paused ({PAUSED_ANNOTATION}=true): no change except failover off a dead pool"


def is_paused(annotations: Mapping[str, str]) -> bool:
    return annotations.get(PAUSED_ANNOTATION, "").strip().lower() == "true"


def hold_paused(knobs: Knobs, state: PolicyState, sample: Sample, verdict: Verdict) -> Verdict:
    """The verdict while paused: `verdict` itself when it holds or is a failover; otherwise a Hold that keeps
    the state (clocks and the unknown streak advanced) and names what would have happened."""
    if verdict.action is Action.HOLD:
        return verdict
    if knobs.strategy is Strategy.TRAFFIC_SPLIT and failover(knobs, state, sample) is not None:
        return verdict
    held = replace(
        state,
        unknown_streak=verdict.state.unknown_streak,
        last_evaluation=verdict.state.last_evaluation,
        pending=None,  # a stabilization window must not run out while paused and fire on resume
    )
    return Verdict(
        state=held,
        action=Action.HOLD,
        mode=state.mode,
        weights=state.weights,
        reason=f"paused: holding {state.mode}; would have: {verdict.action} ({verdict.reason})",
        demand=verdict.demand,
        adaptive_crossover=state.adaptive_crossover,
        notes=verdict.notes,
    )


class DecideFn(Protocol):
    """Anything called like policy.switching.decide (the switching loop's Decide)."""

    def __call__(
        self, knobs: Knobs, curves: ModeCurves | None, state: PolicyState, sample: Sample, *, converging: bool = False
    ) -> Verdict: ...


class PausedDecide:
    """A decide() that honours the pause: what the switching loop calls for a paused SpecServe."""

    def __init__(self, decide: DecideFn) -> None:
        self.decide = decide

    def __call__(
        self, knobs: Knobs, curves: ModeCurves | None, state: PolicyState, sample: Sample, *, converging: bool = False
    ) -> Verdict:
        return hold_paused(knobs, state, sample, self.decide(knobs, curves, state, sample, converging=converging))

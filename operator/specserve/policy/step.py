"""What one strategy's rule proposes in one evaluation, before the shared rules (advisory) turn it into a Verdict."""

from __future__ import annotations

from dataclasses import dataclass

from specserve.api.models import Mode, Rule, Weights
from specserve.policy.types import Action, PolicyState


@dataclass(frozen=True)
class Step:
    held: PolicyState  # the next state when nothing changes (clocks and accumulators advanced)
    action: Action
    reason: str
    changed: PolicyState | None = None  # the next state when the change is made (action != HOLD)
    mode: Mode | None = None  # desired mode; None: held.mode
    weights: Weights | None = None  # desired weights; None: held.weights
    adaptive_crossover: float | None = None
    notes: tuple[str, ...] = ()
    rule: Rule = Rule.HOLD  # which rule proposed the change (HOLD for a hold)


def hold(state: PolicyState, reason: str, notes: tuple[str, ...] = ()) -> Step:
    return Step(held=state, action=Action.HOLD, reason=reason, notes=notes)

"""What the reconcile aims at (pure): the mode and the route weights of the switching loop's target.

The switching loop (specserve.policy) writes its decision to status.switching; before its first decision the
target is spec.switching.initialMode with that mode's weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from specserve.api.models import Mode, SpecServe, SpecServeStatus, Strategy, Weights
from specserve.render.manifests import weights as mode_weights


@dataclass(frozen=True)
class Target:
    mode: Mode
    weights: Weights


def target(obj: SpecServe, status: SpecServeStatus) -> Target:
    switching = status.switching
    mode = switching.mode if switching is not None else obj.spec.switching.initial_mode
    if switching is not None and switching.weights is not None:
        return Target(mode, switching.weights)
    return Target(mode, mode_weights(obj, mode))


def rendered_spec(obj: SpecServe, status: SpecServeStatus) -> SpecServe:
    """The SpecServe as the reconcile renders it. For Adaptive, the adaptive config follows the crossover the
    switching loop last decided on (status.switching.adaptiveCrossover), not the spec's value directly: the loop
    re-renders only when the crossover moved by more than the dead band, so re-measured curves that differ by
    noise roll no pods. An explicit spec.speculative.adaptiveConfig always wins (render uses it as written)."""
    switching = status.switching
    spec = obj.spec
    if spec.strategy != Strategy.ADAPTIVE or switching is None or switching.adaptive_crossover is None:
        return obj
    if spec.switching.crossover_concurrency == switching.adaptive_crossover:
        return obj
    knobs = spec.switching.model_copy(update={"crossover_concurrency": switching.adaptive_crossover})
    return obj.model_copy(update={"spec": spec.model_copy(update={"switching": knobs})})

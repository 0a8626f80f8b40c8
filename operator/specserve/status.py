"""SpecServe status from what was observed (pure): conditions with Kubernetes transition semantics.

Ready rolls up the pools the strategy needs and the route; Degraded is reported beside it, never inside
it (as KServe does), so a bad spec edit does not mark a still-serving SpecServe unready.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from specserve.api.models import Condition, ConditionStatus, Mode, SpecServeStatus, Strategy, Weights

READY = "Ready"
SPECULATIVE_POOL_READY = "SpeculativePoolReady"
BASELINE_POOL_READY = "BaselinePoolReady"
ROUTE_READY = "RouteReady"
METRICS_AVAILABLE = "MetricsAvailable"
SWITCHING = "Switching"
DEGRADED = "Degraded"
CONDITION_ORDER = (
    READY,
    SPECULATIVE_POOL_READY,
    BASELINE_POOL_READY,
    ROUTE_READY,
    METRICS_AVAILABLE,
    SWITCHING,
    DEGRADED,
)


@dataclass(frozen=True)
class PoolHealth:
    """A pool's Deployment as observed: None when it does not exist (yet)."""

    name: str
    desired: int
    ready: int
    updated: int
    up_to_date: bool  # the Deployment controller has seen the current spec

    @classmethod
    def observe(cls, name: str, desired: int, live: Mapping[str, Any] | None) -> PoolHealth:
        if live is None:
            return cls(name, desired, 0, 0, False)
        status = live.get("status") or {}
        generation = (live.get("metadata") or {}).get("generation")
        seen = status.get("observedGeneration")
        # Without generation tracking (the test emulator), trust the replica counts alone.
        up_to_date = generation is None or seen == generation
        return cls(
            name,
            desired,
            int(status.get("readyReplicas") or 0),
            int(status.get("updatedReplicas") or 0),
            up_to_date,
        )

    def condition(self) -> tuple[ConditionStatus, str, str]:
        if self.desired == 0:
            return ConditionStatus.TRUE, "ScaledToZero", f"{self.name} has 0 replicas by spec"
        if self.up_to_date and self.ready >= self.desired and self.updated >= self.desired:
            return ConditionStatus.TRUE, "PodsReady", f"{self.ready}/{self.desired} pods of {self.name} ready"
        return (
            ConditionStatus.FALSE,
            "PodsNotReady",
            f"{self.ready}/{self.desired} pods of {self.name} ready (model loading can take minutes)",
        )


@dataclass(frozen=True)
class RouteHealth:
    requested: bool
    accepted: bool | None  # None: no Gateway controller has reported on it yet
    message: str = ""

    @classmethod
    def observe(cls, requested: bool, live: Mapping[str, Any] | None) -> RouteHealth:
        if not requested:
            return cls(False, None)
        if live is None:
            return cls(True, None, "the HTTPRoute does not exist yet")
        for parent in (live.get("status") or {}).get("parents") or []:
            for cond in parent.get("conditions") or []:
                if cond.get("type") == "Accepted":
                    return cls(True, cond.get("status") == "True", cond.get("message", ""))
        return cls(True, None, "no Gateway controller has accepted the HTTPRoute yet")

    def condition(self) -> tuple[ConditionStatus, str, str]:
        if not self.requested:
            return ConditionStatus.TRUE, "NotRequested", "spec.routing.gateway is unset: no HTTPRoute is managed"
        if self.accepted is True:
            return ConditionStatus.TRUE, "Accepted", "the Gateway accepted the HTTPRoute"
        if self.accepted is False:
            return ConditionStatus.FALSE, "NotAccepted", self.message or "the Gateway rejected the HTTPRoute"
        return ConditionStatus.UNKNOWN, "Pending", self.message


@dataclass(frozen=True)
class Observation:
    """Everything one reconcile learned, the input of the status."""

    generation: int | None
    strategy: Strategy
    mode: Mode
    weights: Weights | None
    speculative_pool: PoolHealth | None  # None: the strategy runs no such pool now
    baseline_pool: PoolHealth | None
    route: RouteHealth
    problems: tuple[str, ...] = ()  # apply or API failures, already worded for users


def set_condition(
    conditions: Iterable[Condition],
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    generation: int | None,
    now: str,
) -> list[Condition]:
    """Replace one condition; lastTransitionTime only moves when the status does."""
    conditions = list(conditions)
    old = next((c for c in conditions if c.type == type_), None)
    new = Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=old.last_transition_time if old is not None and old.status == status else now,
        observed_generation=generation,
    )
    out = [c for c in conditions if c.type != type_] + [new]
    order = {t: i for i, t in enumerate(CONDITION_ORDER)}
    return sorted(out, key=lambda c: order.get(c.type, len(order)))


def _pool_condition(pool: PoolHealth | None, strategy: Strategy, mode: Mode) -> tuple[ConditionStatus, str, str]:
    if pool is not None:
        return pool.condition()
    if strategy == Strategy.ADAPTIVE:
        return ConditionStatus.FALSE, "NotUsed", "the Adaptive strategy runs one pool with in-engine speculation"
    return ConditionStatus.FALSE, "Inactive", f"the Restart strategy runs one pool; it now serves {mode.value}"


def observed_status(previous: SpecServeStatus, seen: Observation, now: str) -> SpecServeStatus:
    """The status after a successful reconcile."""
    gen = seen.generation
    conds: list[Condition] = list(previous.conditions)
    spec_c = _pool_condition(seen.speculative_pool, seen.strategy, seen.mode)
    base_c = _pool_condition(seen.baseline_pool, seen.strategy, seen.mode)
    route_c = seen.route.condition()
    conds = set_condition(conds, SPECULATIVE_POOL_READY, *spec_c, gen, now)
    conds = set_condition(conds, BASELINE_POOL_READY, *base_c, gen, now)
    conds = set_condition(conds, ROUTE_READY, *route_c, gen, now)
    conds = set_condition(
        conds,
        METRICS_AVAILABLE,
        ConditionStatus.UNKNOWN,
        "NotEvaluated",
        "load metrics are not read: this operator version holds the mode set by spec.switching.initialMode",
        gen,
        now,
    )
    conds = set_condition(conds, SWITCHING, ConditionStatus.FALSE, "Stable", f"serving {seen.mode.value}", gen, now)

    pools = [p for p in (seen.speculative_pool, seen.baseline_pool) if p is not None]
    waiting = [p.name for p in pools if p.condition()[0] != ConditionStatus.TRUE]
    if seen.problems:
        ready = (ConditionStatus.FALSE, "ReconcileFailed", "; ".join(seen.problems))
    elif waiting:
        ready = (ConditionStatus.FALSE, "PoolsNotReady", "waiting for " + ", ".join(waiting))
    elif route_c[0] != ConditionStatus.TRUE:
        ready = (ConditionStatus.FALSE, "RouteNotReady", route_c[2])
    else:
        ready = (ConditionStatus.TRUE, "Serving", f"serving {seen.mode.value} with {seen.strategy.value}")
    conds = set_condition(conds, READY, *ready, gen, now)
    if seen.problems:
        degraded = (ConditionStatus.TRUE, "ReconcileFailed", "; ".join(seen.problems))
    else:
        degraded = (ConditionStatus.FALSE, "AsExpected", "the spec is valid and applied")
    conds = set_condition(conds, DEGRADED, *degraded, gen, now)
    return previous.model_copy(
        update={
            "observed_generation": gen if not seen.problems else previous.observed_generation,
            "conditions": conds,
            "active_mode": seen.mode,
            "weights": seen.weights,
        }
    )


def invalid_status(previous: SpecServeStatus, generation: int | None, message: str, now: str) -> SpecServeStatus:
    """The status when the spec cannot be served: Degraded says why; everything else is left as it was,
    including observedGeneration, which stays at the last generation that was applied."""
    conds = set_condition(previous.conditions, DEGRADED, ConditionStatus.TRUE, "InvalidSpec", message, generation, now)
    return previous.model_copy(update={"conditions": conds})


def status_body(status: SpecServeStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def same_status(a: SpecServeStatus, b: SpecServeStatus) -> bool:
    return status_body(a) == status_body(b)

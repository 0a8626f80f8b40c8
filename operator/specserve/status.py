"""SpecServe status from what was observed (pure): conditions with Kubernetes transition semantics.

Ready rolls up the pools the strategy needs and the route; Degraded is reported beside it, never inside
it (as KServe does), so a bad spec edit does not mark a still-serving SpecServe unready.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from specserve.api import reasons
from specserve.api.conditions import (
    BASELINE_POOL_READY,
    CONDITION_ORDER,
    CURVE_DRIFT,
    DEGRADED,
    METRICS_AVAILABLE,
    POD_MONITOR_READY,
    PROGRESSING,
    READY,
    ROUTE_READY,
    SPECULATIVE_POOL_READY,
    SWITCHING,
    find_condition,
)
from specserve.api.models import (
    Condition,
    ConditionStatus,
    Mode,
    PoolFailure,
    PoolStatus,
    SpecServeStatus,
    Strategy,
    Weights,
)
from specserve.layout import MANAGER, SWITCHING_MANAGER
from specserve.pool_state import read_pool


@dataclass(frozen=True)
class PoolHealth:
    """A pool's Deployment as observed (through the one reader, `specserve.pool_state`)."""

    name: str
    desired: int
    ready: int
    updated: int
    up_to_date: bool  # no template roll in flight (an unobserved scale is no roll)
    role: str = ""
    failure: PoolFailure | None = None  # why its pods do not come up ("since" is filled by observed_status)

    @classmethod
    def observe(
        cls, name: str, desired: int | None, live: Mapping[str, Any] | None, role: str = "",
        failure: PoolFailure | None = None,
    ) -> PoolHealth:  # fmt: skip
        """`desired` None: an autoscaler owns the count, so the live Deployment's spec.replicas is the truth."""
        if live is None:
            return cls(name, desired or 0, 0, 0, False, role, failure)
        counts = read_pool(live, name)
        return cls(name, counts.wanted(desired), counts.ready, counts.updated, not counts.rolling, role, failure)

    def report(self) -> PoolStatus:
        return PoolStatus(
            role=self.role, name=self.name, desired=self.desired, ready=self.ready, updated=self.updated,
            failure=self.failure,
        )  # fmt: skip

    def condition(self) -> tuple[ConditionStatus, str, str]:
        counted = f"{self.ready}/{self.desired} pods of {self.name} ready"
        if self.desired == 0:
            return ConditionStatus.TRUE, reasons.SCALED_TO_ZERO, f"{self.name} has 0 replicas by spec"
        if self.up_to_date and self.ready >= self.desired and self.updated >= self.desired:
            return ConditionStatus.TRUE, reasons.PODS_READY, counted
        cause = f": {self.failure.reason}: {self.failure.message}" if self.failure is not None else ""
        if self.up_to_date and self.ready >= 1:
            # Pods of a scale-up still starting do not make a serving pool unready: it is scaling, not rolling.
            return ConditionStatus.TRUE, reasons.SCALING, f"{counted}; the others are starting{cause}"
        if self.failure is not None:
            return ConditionStatus.FALSE, self.failure.reason, f"{counted}: {self.failure.message}"
        return ConditionStatus.FALSE, reasons.PODS_NOT_READY, f"{counted} (model loading can take minutes)"


def pool_moved(recorded: Iterable[Mapping[str, Any]], deployment: Mapping[str, Any]) -> bool:
    """Whether a pool's live Deployment counts (or its progress deadline) differ from what the SpecServe's
    status.pools last recorded of it (a pool the status does not list has moved too)."""
    counts = read_pool(deployment)
    for pool in recorded:
        if pool.get("name") == counts.name:
            if (int(pool.get("ready") or 0), int(pool.get("updated") or 0)) != (counts.ready, counts.updated):
                return True
            # The progress deadline passing, or pods refused creation, changes no count: it is news all the same
            # (named within one event).
            failure = pool.get("failure") or {}
            if bool(failure.get("deadlineExceeded")) != counts.deadline_exceeded:
                return True
            refused = counts.create_failure
            return not counts.deadline_exceeded and refused is not None and failure.get("reason") != refused.reason
    return True


@dataclass(frozen=True)
class RouteHealth:
    requested: bool
    accepted: bool | None  # None: no Gateway controller has reported on it yet
    message: str = ""
    installed: bool = True  # False: the Gateway API (its HTTPRoute CRD) is not installed

    @classmethod
    def observe(cls, requested: bool, live: Mapping[str, Any] | None, installed: bool = True) -> RouteHealth:
        if not requested:
            return cls(False, None)
        if not installed:
            return cls(
                True, False, "the Gateway API (HTTPRoute CRD) is not installed: no route; pools are served", False
            )
        if live is None:
            return cls(True, None, "the HTTPRoute does not exist yet")
        for parent in (live.get("status") or {}).get("parents") or []:
            for cond in parent.get("conditions") or []:
                if cond.get("type") == "Accepted":
                    return cls(True, cond.get("status") == "True", cond.get("message", ""))
        return cls(True, None, "no Gateway controller has accepted the HTTPRoute yet")

    def condition(self) -> tuple[ConditionStatus, str, str]:
        if not self.requested:
            return ConditionStatus.TRUE, reasons.NOT_REQUESTED, "spec.routing.gateway is unset: no HTTPRoute is managed"
        if not self.installed:
            return ConditionStatus.FALSE, reasons.NOT_INSTALLED, self.message
        if self.accepted is True:
            return ConditionStatus.TRUE, reasons.ACCEPTED, "the Gateway accepted the HTTPRoute"
        if self.accepted is False:
            return ConditionStatus.FALSE, reasons.NOT_ACCEPTED, self.message or "the Gateway rejected the HTTPRoute"
        return ConditionStatus.UNKNOWN, reasons.PENDING, self.message


@dataclass(frozen=True)
class Part:
    """An optional part's own condition (e.g. the PodMonitor): its trouble never makes the SpecServe unready."""

    type: str
    status: ConditionStatus
    reason: str
    message: str


@dataclass(frozen=True)
class Observation:
    """Everything one reconcile learned, the input of the status."""

    generation: int | None
    strategy: Strategy
    mode: Mode  # the mode actually serving
    weights: Weights | None  # the weights actually on the HTTPRoute
    speculative_pool: PoolHealth | None  # None: the strategy runs no such pool now
    baseline_pool: PoolHealth | None
    route: RouteHealth
    problems: tuple[str, ...] = ()  # apply or API failures, already worded for users
    pools: tuple[PoolHealth, ...] = ()  # every pool observed, replaced ones included
    progressing: tuple[str, str] | None = None  # (reason, message) of the rollout step running; None: settled
    parts: tuple[Part, ...] = ()
    dropped_parts: tuple[str, ...] = ()  # condition types of optional parts no longer requested
    conflicts: tuple[str, ...] = ()  # objects of our names that this SpecServe does not own
    read_errors: tuple[str, ...] = ()  # nothing was changed: conditions stay as they were
    autoscaler_conflicts: tuple[str, ...] = ()  # pools whose replicas the operator owns and something else scales


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
    old = find_condition(conditions, type_)
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
        return ConditionStatus.FALSE, reasons.NOT_USED, "the Adaptive strategy runs one pool with in-engine speculation"
    return ConditionStatus.FALSE, reasons.INACTIVE, f"the Restart strategy runs one pool; it now serves {mode.value}"


def read_status(body: Mapping[str, Any]) -> SpecServeStatus:
    """The status stored in a SpecServe's body (the reconcile's and the switching loop's one reader of it)."""
    try:
        return SpecServeStatus.model_validate(body.get("status") or {})
    except ValidationError:
        return SpecServeStatus()  # unreadable (hand-edited) status: rebuild it from observation


def observed_status(previous: SpecServeStatus, seen: Observation, now: str) -> SpecServeStatus:
    """The status after a reconcile that got to observe the live objects."""
    gen = seen.generation
    conds: list[Condition] = list(previous.conditions)
    if seen.read_errors:
        # A transient read error says nothing about the pools: keep what was known, say what failed.
        message = "could not read the live objects, nothing changed: " + "; ".join(seen.read_errors)
        conds = set_condition(conds, DEGRADED, ConditionStatus.TRUE, reasons.READ_FAILED, message, gen, now)
        return previous.model_copy(update={"conditions": conds})

    spec_c = _pool_condition(seen.speculative_pool, seen.strategy, seen.mode)
    base_c = _pool_condition(seen.baseline_pool, seen.strategy, seen.mode)
    route_c = seen.route.condition()
    conds = set_condition(conds, SPECULATIVE_POOL_READY, *spec_c, gen, now)
    conds = set_condition(conds, BASELINE_POOL_READY, *base_c, gen, now)
    conds = set_condition(conds, ROUTE_READY, *route_c, gen, now)
    conds = [c for c in conds if c.type not in seen.dropped_parts]
    for part in seen.parts:
        conds = set_condition(conds, part.type, part.status, part.reason, part.message, gen, now)
    pools_seen = _with_since(previous, seen.pools, now)
    conds = set_condition(conds, PROGRESSING, *_progressing(pools_seen, seen.progressing), gen, now)

    pools = [p for p in (seen.speculative_pool, seen.baseline_pool) if p is not None]
    waiting = [p.name for p in pools if p.condition()[0] != ConditionStatus.TRUE]
    conflict = "; ".join(
        f"{c} exists and is not owned by this SpecServe: left alone (delete or rename it)" for c in seen.conflicts
    )
    if seen.conflicts:
        ready = (ConditionStatus.FALSE, reasons.CONFLICT, conflict)
    elif seen.problems:
        ready = (ConditionStatus.FALSE, reasons.RECONCILE_FAILED, "; ".join(seen.problems))
    elif waiting:
        ready = (ConditionStatus.FALSE, reasons.POOLS_NOT_READY, "waiting for " + ", ".join(waiting))
    elif route_c[0] != ConditionStatus.TRUE:
        ready = (ConditionStatus.FALSE, reasons.ROUTE_NOT_READY, route_c[2])
    else:
        ready = (ConditionStatus.TRUE, reasons.SERVING, f"serving {seen.mode.value} with {seen.strategy.value}")
    conds = set_condition(conds, READY, *ready, gen, now)
    if seen.conflicts:
        degraded = (ConditionStatus.TRUE, reasons.CONFLICT, conflict)
    elif seen.problems:
        degraded = (ConditionStatus.TRUE, reasons.RECONCILE_FAILED, "; ".join(seen.problems))
    elif seen.autoscaler_conflicts:
        degraded = (ConditionStatus.TRUE, reasons.AUTOSCALER_CONFLICT, "; ".join(seen.autoscaler_conflicts))
    else:
        degraded = (ConditionStatus.FALSE, reasons.AS_EXPECTED, "the spec is valid and applied")
    conds = set_condition(conds, DEGRADED, *degraded, gen, now)
    failed_apply = seen.problems or seen.conflicts
    return previous.model_copy(
        update={
            "observed_generation": gen if not failed_apply else previous.observed_generation,
            "conditions": conds,
            "active_mode": seen.mode,
            "weights": seen.weights,
            "pools": [p.report() for p in pools_seen],
        }
    )


def _progressing(pools: list[PoolHealth], step: tuple[str, str] | None) -> tuple[ConditionStatus, str, str]:
    """A stuck or failed roll is not progressing: False with the cause, in the pods' or the Deployment's own
    words (ProgressDeadlineExceeded first, the reason the switching loop rolls back on)."""
    failed = [(p.name, p.failure) for p in pools if p.failure is not None]
    if failed:
        first = next((f for _, f in failed if f.deadline_exceeded), failed[0][1])
        message = "; ".join(f"{name}: {f.reason}: {f.message}" for name, f in failed)
        return ConditionStatus.FALSE, first.reason, message
    if step is not None:
        return ConditionStatus.TRUE, *step
    return ConditionStatus.FALSE, reasons.SETTLED, "every pool runs the current spec"


def _with_since(previous: SpecServeStatus, pools: Iterable[PoolHealth], now: str) -> list[PoolHealth]:
    """Each failure dated from when it was first seen: kept from the last status while the reason stays."""
    before = {p.name: p.failure for p in previous.pools}
    out = []
    for pool in pools:
        failure = pool.failure
        if failure is not None and failure.since is None:
            old = before.get(pool.name)
            since = old.since if old is not None and old.reason == failure.reason and old.since else now
            failure = failure.model_copy(update={"since": since})
        out.append(replace(pool, failure=failure))
    return out


def new_failures(previous: SpecServeStatus, current: SpecServeStatus) -> tuple[tuple[str, str], ...]:
    """(reason, message) of each cause the last status did not report: one Warning event per new cause."""
    before = {p.name: p.failure.reason for p in previous.pools if p.failure is not None}
    out = [
        (p.failure.reason, f"{p.name}: {p.failure.message}")
        for p in current.pools
        if p.failure is not None and before.get(p.name) != p.failure.reason
    ]
    old = find_condition(previous.conditions, DEGRADED)
    new = find_condition(current.conditions, DEGRADED)
    if new is not None and new.reason == reasons.AUTOSCALER_CONFLICT and (old is None or old.message != new.message):
        out.append((reasons.AUTOSCALER_CONFLICT, new.message))
    return tuple(out)


def invalid_status(
    previous: SpecServeStatus,
    generation: int | None,
    message: str,
    now: str,
    running: Mapping[str, PoolHealth] | None = None,
) -> SpecServeStatus:
    """The status when the spec cannot be served: Degraded says why; observedGeneration stays at the last
    generation that was applied. `running` (pool condition type -> the pool left running, as observed) keeps the
    pools reported: an invalid edit does not blind the status to the pods still serving."""
    conds = set_condition(
        previous.conditions, DEGRADED, ConditionStatus.TRUE, reasons.INVALID_SPEC, message, generation, now
    )
    if running is None:
        return previous.model_copy(update={"conditions": conds})
    for type_, pool in running.items():
        conds = set_condition(conds, type_, *pool.condition(), generation, now)
    return previous.model_copy(update={"conditions": conds, "pools": [p.report() for p in running.values()]})


JSON = dict[str, Any]


@dataclass(frozen=True)
class Writer:
    """One writer of the status: the fields and condition types it owns, server-side applied under its own field
    manager (as cert-manager's sub-controllers do). `conditions` is a list map keyed by type, so each writer owns
    its condition types; neither ever sends the other's, so neither can undo the other with an older copy."""

    manager: str
    fields: tuple[str, ...]
    conditions: frozenset[str]

    def body(self, status: SpecServeStatus) -> JSON:
        """The writer's whole apply body: its fields and its conditions (when it has any), nothing of the other's."""
        full = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        out = {k: full[k] for k in self.fields if k in full}
        conditions = [c for c in full.get("conditions") or [] if c["type"] in self.conditions]
        if conditions:
            out["conditions"] = conditions
        return out

    def differs(self, stored: SpecServeStatus, new: SpecServeStatus) -> bool:
        """Whether the stored status (`read_status` of the live body) differs from `new` in this writer's own
        fields: a steady state writes nothing."""
        return self._comparable(stored) != self._comparable(new)

    def _comparable(self, status: SpecServeStatus) -> JSON:
        # A list map's order is the server's business (the other writer's apply can reorder it).
        body = self.body(status)
        return {**body, "conditions": sorted(body.get("conditions", []), key=lambda c: str(c["type"]))}


RECONCILE = Writer(
    MANAGER,
    ("observedGeneration", "activeMode", "weights", "pools", "rollout"),
    frozenset({READY, SPECULATIVE_POOL_READY, BASELINE_POOL_READY, ROUTE_READY, POD_MONITOR_READY, PROGRESSING,
               DEGRADED}),
)  # fmt: skip
SWITCHING_LOOP = Writer(
    SWITCHING_MANAGER,
    ("switching", "load", "lastDecision", "history", "learning"),
    frozenset({METRICS_AVAILABLE, SWITCHING, CURVE_DRIFT}),
)

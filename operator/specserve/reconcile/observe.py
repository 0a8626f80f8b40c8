"""What one reconcile pass saw (pure): the records the I/O fills, the one `Pass` record that carries them, and
what the planner and the status are built from it.

The pass gathers its facts as it goes (core.py): the spec and the status it started from, the render, what was
read (`Snapshot`), why pools fail (`Cause`), the plan, what applying returned (`Applied`). `world()` turns them
into the planner's `World`; `observe()` into the `Observation` the status is written from. No I/O here:
reconcile/apply.py and reconcile/causes.py fill the records this module declares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from specserve.api import reasons
from specserve.api.conditions import BASELINE_POOL_READY, POD_MONITOR_READY, SPECULATIVE_POOL_READY, find_condition
from specserve.api.models import ConditionStatus, Mode, PoolFailure, SpecServe, SpecServeStatus, Strategy, Weights
from specserve.kube.kinds import DEPLOYMENT, HTTPROUTE, PODMONITOR, Ref
from specserve.layout import LABEL_MODE, LABEL_POOL, PoolLayout, PoolRole
from specserve.pool_state import read_pool
from specserve.reconcile.intent import JSON, desired_pool, live_pool, route_backends
from specserve.reconcile.rollout import Plan, World
from specserve.reconcile.target import Target
from specserve.reconcile.traffic import gateway_pending
from specserve.status import Observation, Part, PoolHealth, RouteHealth


@dataclass
class Snapshot:
    """What is live: owned objects by "Kind/name", objects of our names owned by someone else, read errors."""

    owned: dict[str, JSON] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    read_errors: list[str] = field(default_factory=list)
    unread: dict[str, str] = field(default_factory=dict)  # non-essential kind -> why it could not be read


@dataclass
class Applied:
    live: dict[str, JSON] = field(default_factory=dict)  # the objects as the server returned them
    applied: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # ref -> the server's message, for required objects
    held: list[str] = field(default_factory=list)  # not sent: an object they need was refused this pass
    optional: dict[str, str] = field(default_factory=dict)  # ref -> problem, for optional kinds
    not_installed: set[str] = field(default_factory=set)  # refs of optional kinds whose API is absent

    @property
    def failures(self) -> list[str]:
        """The failed applies, worded for users: the object and the server's message."""
        return [f"{key}: {message}" for key, message in self.failed.items()]

    def merge(self, other: Applied) -> None:
        self.live.update(other.live)
        self.applied += other.applied
        self.failed.update(other.failed)
        self.held += other.held
        self.optional.update(other.optional)
        self.not_installed |= other.not_installed


@dataclass(frozen=True)
class Cause:
    """Why a pool's pods do not come up (a pod's reason, or the Deployment's ProgressDeadlineExceeded)."""

    reason: str
    message: str
    deadline_exceeded: bool = False


@dataclass(frozen=True)
class Pass:
    """One reconcile pass over one SpecServe, as far as it got: filled in as it goes (`dataclasses.replace`)."""

    obj: SpecServe
    target: Target
    old: SpecServeStatus  # the status the pass started from
    now: str  # the pass's time (RFC 3339)
    layout: tuple[PoolLayout, ...]  # the pools the rendered spec runs, by name, role and flavour
    desired: tuple[JSON, ...]  # the rendered manifests
    snap: Snapshot
    causes: Mapping[str, Cause] = field(default_factory=dict)  # pool -> why its pods do not come up
    autoscaling: tuple[str, ...] = ()  # pools the operator sizes and something else scales
    plan: Plan = field(default_factory=Plan)
    applied: Applied = field(default_factory=Applied)
    prune_failures: tuple[str, ...] = ()

    @property
    def route_key(self) -> str:
        return Ref.of(HTTPROUTE, self.obj.metadata.name)

    @property
    def live(self) -> dict[str, JSON]:
        """Every owned object as it now is: as read, or as the server returned it when this pass applied it."""
        return {**self.snap.owned, **self.applied.live}

    @property
    def rendered_replicas(self) -> dict[str, int | None]:
        """Desired pool -> its rendered replica count (None: the Deployment leaves it to an autoscaler)."""
        return {m["metadata"]["name"]: m["spec"].get("replicas") for m in self.desired if m["kind"] == DEPLOYMENT.kind}


def _time(text: str | None) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) if text else None
    except ValueError:
        return None


def world(p: Pass) -> World:
    """The planner's input: the desired pools, the live ones (with their causes), the route, the target's
    weights, what was announced, and why the Gateway may not have taken the last weight change yet."""
    deployments = {m["metadata"]["name"]: m for m in p.desired if m["kind"] == DEPLOYMENT.kind}
    live = {
        (name := item["metadata"]["name"]): live_pool(
            item, deployments.get(name), p.causes[name].reason if name in p.causes else None
        )
        for key, item in p.snap.owned.items()
        if Ref(key).is_a(DEPLOYMENT)
    }
    by_role = {PoolRole.SPECULATIVE: p.target.weights.speculative, PoolRole.BASELINE: p.target.weights.baseline}
    rollout = p.old.rollout
    moved = _time(rollout.weights_changed if rollout is not None else None)
    route = p.snap.owned.get(p.route_key)
    return World(
        desired=tuple(
            desired_pool(d)
            for d in deployments.values()
            if Ref.of(DEPLOYMENT, d["metadata"]["name"]) not in p.snap.conflicts
        ),
        live=live,
        route=p.obj.spec.routing.gateway is not None,
        live_route=route_backends(route),
        target_weights={pool.name: by_role.get(pool.role, 100) for pool in p.layout},
        announced=frozenset(rollout.announced) if rollout is not None else frozenset(),
        # A pool with any object of its name owned by someone else (its Service, say) gets no traffic.
        excluded=frozenset(Ref(c).name for c in p.snap.conflicts) & frozenset(deployments),
        gateway_pending=gateway_pending(
            route, moved, _time(p.now) or datetime.now(UTC), p.obj.spec.routing.settle_seconds
        ),
    )


def _template_applied(name: str, p: Pass) -> bool:
    """Whether this pass applied a new pod template to the pool (a scale or a drift repair is none)."""
    key = Ref.of(DEPLOYMENT, name)
    if key not in p.applied.applied or key not in p.applied.live:
        return False
    before = p.snap.owned.get(key)
    return before is None or read_pool(before).template_hash != read_pool(p.applied.live[key]).template_hash


def _failure(cause: Cause) -> PoolFailure:
    return PoolFailure(
        reason=cause.reason[:256], message=cause.message[:4096], deadline_exceeded=cause.deadline_exceeded
    )


def _speculative_flavour(name: str, flavours: Mapping[str, bool], live: Mapping[str, JSON]) -> bool:
    deployment = live.get(Ref.of(DEPLOYMENT, name))
    if deployment is not None:
        labels = ((deployment.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
        if LABEL_MODE in labels:
            return bool(labels[LABEL_MODE] != "baseline")
    return flavours.get(name, True)


def _live_weights(
    route: Mapping[str, int] | None, flavours: Mapping[str, bool], live: Mapping[str, JSON]
) -> Weights | None:
    """The route's weights as percentages per flavour."""
    if route is None:
        return None
    spec = sum(w for n, w in route.items() if _speculative_flavour(n, flavours, live))
    total = sum(route.values())
    if total == 0:
        return Weights(speculative=0, baseline=0)
    share = round(100 * spec / total)
    return Weights(speculative=share, baseline=100 - share)


def _serving_mode(p: Pass, weights: Weights | None, engine: PoolHealth | None) -> Mode:
    """The mode actually serving, from live objects."""
    strategy = p.obj.spec.strategy
    if strategy == Strategy.TRAFFIC_SPLIT:
        if weights is None or weights.speculative == weights.baseline:
            return p.target.mode
        return Mode.SPECULATIVE if weights.speculative > weights.baseline else Mode.BASELINE
    if strategy == Strategy.RESTART and not (p.plan.settled and engine is not None and engine.ready > 0):
        return p.old.active_mode or p.target.mode  # the roll to the target mode has not finished
    return p.target.mode


def observe(p: Pass) -> Observation:
    """What the pass leaves live, as the status reports it: each pool's health (a cause read before this pass
    applied a new template belongs to the pods that template replaces), the route's, the mode and weights
    actually serving, the step running, and what failed."""
    live = p.live
    wanted = p.rendered_replicas
    failures = {n: _failure(c) for n, c in p.causes.items() if not _template_applied(n, p)}
    health = {
        pool.name: PoolHealth.observe(
            pool.name, wanted.get(pool.name), live.get(Ref.of(DEPLOYMENT, pool.name)), pool.role,
            failures.get(pool.name),
        )
        for pool in p.layout
    }  # fmt: skip
    replaced = [
        PoolHealth.observe(name, None, item, (item["metadata"].get("labels") or {}).get(LABEL_POOL, ""),
                           failures.get(name))
        for key, item in live.items()
        if Ref(key).is_a(DEPLOYMENT) and (name := item["metadata"]["name"]) not in health
    ]  # fmt: skip
    by_flavour = {pool.flavour.speculative: health[pool.name] for pool in p.layout}
    flavours = {pool.name: pool.flavour.speculative for pool in p.layout}
    requested = p.obj.spec.routing.gateway is not None
    route_live = live.get(p.route_key)
    weights = _live_weights(route_backends(route_live), flavours, live) if requested else None
    engine = health.get(p.layout[0].name) if len(p.layout) == 1 else None
    progressing = None
    if p.plan.steps:
        progressing = (p.plan.steps[0].reason, "; ".join(s.message for s in p.plan.steps))
    elif not p.plan.settled:
        progressing = (reasons.APPLYING, "applying the current spec")
    return Observation(
        generation=p.obj.metadata.generation,
        strategy=p.obj.spec.strategy,
        mode=_serving_mode(p, weights, engine),
        weights=weights,
        speculative_pool=by_flavour.get(True),
        baseline_pool=by_flavour.get(False),
        route=RouteHealth.observe(requested, route_live, installed=p.route_key not in p.applied.not_installed),
        problems=(*p.applied.failures, *p.prune_failures),
        pools=(*health.values(), *replaced),
        progressing=progressing,
        parts=_parts(p, live),
        dropped_parts=() if p.obj.spec.monitoring.pod_monitor else (POD_MONITOR_READY,),
        conflicts=tuple(p.snap.conflicts),
        autoscaler_conflicts=p.autoscaling,
    )


def _parts(p: Pass, live: Mapping[str, JSON]) -> tuple[Part, ...]:
    if not p.obj.spec.monitoring.pod_monitor:
        return ()
    key = Ref.of(PODMONITOR, p.obj.metadata.name)
    if key in p.applied.not_installed:
        message = "the PodMonitor API (Prometheus Operator CRDs) is not installed; serving is not affected"
        return (Part(POD_MONITOR_READY, ConditionStatus.FALSE, reasons.NOT_INSTALLED, message),)
    if key in p.applied.optional:
        return (Part(POD_MONITOR_READY, ConditionStatus.FALSE, reasons.APPLY_FAILED, p.applied.optional[key]),)
    if key in live:
        return (Part(POD_MONITOR_READY, ConditionStatus.TRUE, reasons.APPLIED, "the PodMonitor is in place"),)
    previous = find_condition(p.old.conditions, POD_MONITOR_READY)
    if previous is not None:  # not tried again this pass (known absent, or held behind a failure)
        return (Part(POD_MONITOR_READY, previous.status, previous.reason, previous.message),)
    return (Part(POD_MONITOR_READY, ConditionStatus.UNKNOWN, reasons.PENDING, "the PodMonitor is not applied yet"),)


def blind(obj: SpecServe, tgt: Target, snap: Snapshot) -> Observation:
    """A pass that could not read an essential kind: nothing is known, nothing changed."""
    return Observation(
        generation=obj.metadata.generation,
        strategy=obj.spec.strategy,
        mode=tgt.mode,
        weights=None,
        speculative_pool=None,
        baseline_pool=None,
        route=RouteHealth(False, None),
        read_errors=tuple(snap.read_errors),
    )


def owned_by(obj: Mapping[str, Any], uid: str | None) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return uid is not None and any(r.get("uid") == uid for r in refs)


def left_running(deployments: Iterable[Mapping[str, Any]], uid: str | None) -> dict[str, PoolHealth]:
    """The pools an invalid spec left running, by the condition type that reports each (this SpecServe's own
    Deployments only, by owner uid)."""
    out: dict[str, PoolHealth] = {}
    for item in deployments:
        if not owned_by(item, uid):
            continue
        role = (item["metadata"].get("labels") or {}).get(LABEL_POOL, "")
        labels = ((item.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
        speculative = role == PoolRole.SPECULATIVE or (role == PoolRole.ENGINE and labels.get(LABEL_MODE) != "baseline")
        out[SPECULATIVE_POOL_READY if speculative else BASELINE_POOL_READY] = PoolHealth.observe(
            item["metadata"]["name"], None, item, role
        )
    return out

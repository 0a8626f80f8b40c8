"""One level-based reconcile of a SpecServe: validate, render the switching target, read what is live, let the
planner choose the next safe step, apply it, prune what it allows, and write the status only when it changed.
The handlers call this; it knows nothing of kopf.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from specserve.api import reasons
from specserve.api.conditions import (
    BASELINE_POOL_READY,
    DEGRADED,
    POD_MONITOR_READY,
    SPECULATIVE_POOL_READY,
    find_condition,
)
from specserve.api.install_policy import InstallPolicy, check_install_policy
from specserve.api.models import (
    ConditionStatus,
    Mode,
    PoolFailure,
    RolloutState,
    SpecServe,
    SpecServeStatus,
    Strategy,
    Weights,
)
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.clock import rfc3339
from specserve.kube.client import KubeError
from specserve.kube.kinds import DEPLOYMENT, HTTPROUTE, PODMONITOR, SERVICE, SPECSERVE, Ref
from specserve.layout import LABEL_INSTANCE, LABEL_MODE, LABEL_POOL, PoolRole
from specserve.pool_state import read_pool
from specserve.reconcile.apply import Applied, Kube, Snapshot, apply_changed, owned_by, prune, snapshot
from specserve.reconcile.autoscalers import autoscaler_conflicts
from specserve.reconcile.causes import Cause, pool_causes
from specserve.reconcile.intent import (
    JSON,
    desired_pool,
    live_pool,
    route_backends,
    with_route_weights,
)
from specserve.reconcile.rendered import remembered_render
from specserve.reconcile.rollout import Plan, RolloutStep, World, plan
from specserve.reconcile.rolls import RollBudget
from specserve.reconcile.target import Target, rendered_spec, target
from specserve.reconcile.traffic import gateway_pending, keep_serving, moves_off_dead, servable, with_live_backends
from specserve.render.manifests import Pool, pools
from specserve.status import (
    RECONCILE_MANAGER,
    Observation,
    Part,
    PoolHealth,
    RouteHealth,
    invalid_status,
    new_failures,
    observed_status,
    read_status,
    reconcile_fields,
    reconcile_fields_differ,
    same_status,
)

log = logging.getLogger(__name__)
NO_HOST_PATHS = InstallPolicy()  # the default installation: no hostPath volumes at all


@dataclass(frozen=True)
class StatusWrite:
    """A status the switching loop wrote (its merge-patch base). The reconcile no longer keeps one: it applies
    its own fields with its own field manager. Kept only until switching/evaluate.py does the same."""

    before: SpecServeStatus
    after: SpecServeStatus


@dataclass(frozen=True)
class Outcome:
    """What a reconcile did, for logs, events and tests."""

    applied: tuple[str, ...] = ()
    pruned: tuple[str, ...] = ()
    status_written: bool = False
    invalid: str | None = None  # the message, when the spec was rejected
    newly_invalid: bool = False  # the rejection is new (emit one event, not one per resync)
    status: SpecServeStatus | None = None  # the status after this reconcile
    stored: JSON | None = None  # the SpecServe as the server stored it, when this reconcile wrote its status
    warnings: tuple[tuple[str, str], ...] = ()  # (reason, message): Warning events to post, each once
    held: tuple[str, ...] = ()  # Deployments whose change waits for a later step


def current_status(body: Mapping[str, Any], last_write: StatusWrite | None = None) -> SpecServeStatus:
    """The status to start from (the switching loop's view: its own last write when the body predates it)."""
    seen = read_status(body)
    if last_write is not None and same_status(seen, last_write.before):
        return last_write.after
    return seen


async def _write_status(kube: Kube, body: Mapping[str, Any], new: SpecServeStatus) -> JSON | None:
    """Server-side apply of the reconcile's own status fields, only when they differ from the live ones; the
    object as the server stored it (None: nothing written)."""
    if not reconcile_fields_differ(body.get("status"), new):
        return None
    meta = body["metadata"]
    try:
        return await kube.apply_status(
            SPECSERVE, meta["namespace"], meta["name"], reconcile_fields(new), field_manager=RECONCILE_MANAGER
        )
    except KubeError as exc:  # the next reconcile writes it again
        log.warning("status of %s/%s not written: %s", meta["namespace"], meta["name"], exc)
        return None


async def reconcile(
    kube: Kube,
    body: Mapping[str, Any],
    now: Callable[[], str] = rfc3339,
    install: InstallPolicy = NO_HOST_PATHS,
    rolls: RollBudget | None = None,
) -> Outcome:
    """One level-based pass over one SpecServe: parse and check the spec (an invalid one is refused in status and
    nothing is applied), render what it wants, read what exists, take the next safe rollout step (make before
    break, one pool at a time, weights only on Ready pools; `rollout.plan`), apply what changed, prune what is
    no longer wanted, and write the reconcile's own status fields when they changed. Idempotent: a pass over a
    converged SpecServe makes no write."""
    old = read_status(body)
    try:
        obj = parse_object(body)
        # What the installation allows (host paths) is refused like any invalid spec: nothing applied.
        if errors := check_install_policy(obj.spec, install):
            raise InvalidSpecServe(errors)
    except InvalidSpecServe as exc:
        return await _reject(kube, body, old, exc, now)
    tgt = target(obj, old)
    shown = rendered_spec(obj, old)
    the_pools = pools(shown, tgt.mode)
    desired = remembered_render(shown, tgt.mode)  # the last render while nothing changed (render() is pure)
    meta = obj.metadata
    snap = await snapshot(kube, meta.namespace, meta.name, meta.uid, desired)
    if snap.read_errors:
        seen = _blind(obj, tgt, snap)
        new = observed_status(old, seen, now())
        stored = await _write_status(kube, body, new)
        return Outcome(status_written=stored is not None, status=new, stored=stored)

    route_key = Ref.of(HTTPROUTE, meta.name)
    rendered = _rendered_replicas(desired)
    causes = await pool_causes(kube, meta.namespace, meta.name, snap.owned, rendered, _reported_causes(old))
    autoscaling = await autoscaler_conflicts(kube, meta.namespace, snap.owned, rendered, _conflict_reported(old))
    world = _world(obj, tgt, the_pools, desired, snap, old, causes)
    if rolls is not None:  # the cluster-wide roll budget: read and updated with no await in between
        owner = (meta.namespace, meta.name)
        world = rolls.budgeted(owner, world)
    the_plan = _await_gateway(
        plan(world), world, snap.owned.get(route_key), old, obj.spec.routing.settle_seconds, now()
    )
    if rolls is not None:
        rolls.record(owner, world, the_plan)
    skip = set(snap.conflicts) | {Ref.of(DEPLOYMENT, n) for n in the_plan.held} | _known_absent(obj, old)
    skip |= {Ref.of_object(m) for m in desired if m["kind"] in snap.unread}  # not read this pass: left as they are
    serving = frozenset(n for n, p in world.live.items() if p.serving and n not in world.excluded)
    applied = await _apply_traffic_first(
        kube, [m for m in desired if Ref.of_object(m) not in skip], snap.owned, route_key, the_plan, serving
    )
    pruned, prune_failures = ([], []) if applied.failed else await _prune(kube, obj, desired, snap, the_plan)
    prune_failures += [f"{why}; left as they are this pass" for why in snap.unread.values()]

    live = {**snap.owned, **applied.live}
    seen = _observe(obj, tgt, old, the_pools, desired, live, the_plan, snap, applied, prune_failures, causes,
                    autoscaling)  # fmt: skip
    new = observed_status(old, seen, now())
    moved = route_backends(snap.owned.get(route_key)) != route_backends(live.get(route_key))
    state = _rollout_state(old, world, the_plan, now() if moved else None, _refused(old, desired, applied))
    new = new.model_copy(update={"rollout": state})
    stored = await _write_status(kube, body, new)
    return Outcome(
        applied=tuple(applied.applied),
        pruned=tuple(pruned),
        status_written=stored is not None,
        status=new,
        stored=stored,
        warnings=_warnings(old, the_plan, applied) + new_failures(old, new),
        held=tuple(sorted(the_plan.held | {Ref(k).name for k in applied.held})),
    )


def _services(live: Mapping[str, JSON]) -> frozenset[str]:
    return frozenset(Ref(k).name for k in live if Ref(k).is_a(SERVICE))


async def _apply_traffic_first(
    kube: Kube, manifests: list[JSON], owned: Mapping[str, JSON], route_key: str, the_plan: Plan,
    serving: frozenset[str],
) -> Applied:  # fmt: skip
    """Apply everything, the HTTPRoute with the planner's weights restricted to backends whose Service exists.

    The route goes first when it moves traffic off a pool with no Ready replica (a failover must not wait for, or
    fail with, any other object), else last (a new pool's Service exists before the route names it). Every object
    is tried whatever failed before it."""
    route = next((m for m in manifests if Ref.of_object(m) == route_key), None)
    rest = [m for m in manifests if Ref.of_object(m) != route_key]
    if route is None:
        return await apply_changed(kube, rest, owned)
    weights = the_plan.route_weights

    def routable(live: Mapping[str, JSON]) -> tuple[tuple[str, int], ...]:
        services = _services(live)
        return keep_serving(servable(weights, services), serving & services)

    out = Applied()
    if moves_off_dead(route_backends(owned.get(route_key)), weights, serving):
        out = await apply_changed(kube, [with_route_weights(route, routable(owned))], owned)
    out.merge(await apply_changed(kube, rest, owned))
    if route_key in out.failed:
        return out
    # Last (or again, when a Service applied this pass lets a backend take its share; unchanged: no write).
    # A backend whose Service change was refused keeps addressing the Service as it is.
    refused = frozenset(Ref(k).name for k in out.failed if Ref(k).is_a(SERVICE))
    route = with_live_backends(route, owned.get(route_key), refused)
    seen = {**owned, **out.live}
    out.merge(await apply_changed(kube, [with_route_weights(route, routable(seen))], seen))
    return out


def _template_applied(name: str, snap: Snapshot, applied: Applied) -> bool:
    """Whether this pass applied a new pod template to the pool (a scale or a drift repair is none)."""
    key = Ref.of(DEPLOYMENT, name)
    if key not in applied.applied or key not in applied.live:
        return False
    before = snap.owned.get(key)
    return before is None or read_pool(before).template_hash != read_pool(applied.live[key]).template_hash


def _rendered_replicas(desired: list[JSON]) -> dict[str, int | None]:
    """Desired pool -> its rendered replica count (None: the Deployment leaves it to an autoscaler)."""
    return {m["metadata"]["name"]: m["spec"].get("replicas") for m in desired if m["kind"] == DEPLOYMENT.kind}


def _reported_causes(old: SpecServeStatus) -> dict[str, Cause]:
    return {
        p.name: Cause(p.failure.reason, p.failure.message, p.failure.deadline_exceeded)
        for p in old.pools
        if p.failure is not None
    }


def _conflict_reported(old: SpecServeStatus) -> bool:
    return any(c.type == DEGRADED and c.reason == reasons.AUTOSCALER_CONFLICT for c in old.conditions)


def _failure(cause: Cause | None) -> PoolFailure | None:
    if cause is None:
        return None
    return PoolFailure(
        reason=cause.reason[:256], message=cause.message[:4096], deadline_exceeded=cause.deadline_exceeded
    )


def _world(
        obj: SpecServe, tgt: Target, the_pools: list[Pool], desired: list[JSON], snap: Snapshot,
        old: SpecServeStatus, causes: Mapping[str, Cause] | None = None,
) -> World:  # fmt: skip
    deployments = {m["metadata"]["name"]: m for m in desired if m["kind"] == DEPLOYMENT.kind}
    causes = causes or {}
    live = {
        (name := item["metadata"]["name"]): live_pool(
            item, deployments.get(name), causes[name].reason if name in causes else None
        )
        for key, item in snap.owned.items()
        if Ref(key).is_a(DEPLOYMENT)
    }
    by_role = {PoolRole.SPECULATIVE: tgt.weights.speculative, PoolRole.BASELINE: tgt.weights.baseline}
    return World(
        desired=tuple(
            desired_pool(d)
            for d in deployments.values()
            if Ref.of(DEPLOYMENT, d["metadata"]["name"]) not in snap.conflicts
        ),
        live=live,
        route=obj.spec.routing.gateway is not None,
        live_route=route_backends(snap.owned.get(Ref.of(HTTPROUTE, obj.metadata.name))),
        target_weights={p.name: by_role.get(p.role, 100) for p in the_pools},
        announced=frozenset(old.rollout.announced) if old.rollout is not None else frozenset(),
        # A pool with any object of its name owned by someone else (its Service, say) gets no traffic.
        excluded=frozenset(Ref(c).name for c in snap.conflicts) & frozenset(deployments),
    )


def _time(text: str | None) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) if text else None
    except ValueError:
        return None


def _await_gateway(
    the_plan: Plan, world: World, route: JSON | None, old: SpecServeStatus, settle: float, now: str
) -> Plan:
    """Hold the rolls of serving pools and the prunes of serving pools until the Gateway has taken the last
    weight change (the drained pool may still get requests until it has)."""
    moved = _time(old.rollout.weights_changed if old.rollout is not None else None)
    why = gateway_pending(route, moved, _time(now) or datetime.now(UTC), settle)
    if why is None:
        return the_plan
    rolling = {
        p.name
        for p in world.desired
        if p.name not in the_plan.held
        and (live := world.live.get(p.name)) is not None
        and live.serving
        and not live.template_current
    }
    serving_pruned = {n for n in the_plan.prune_pools if world.live[n].serving}
    if not rolling and not serving_pruned:
        return the_plan
    return replace(
        the_plan,
        held=the_plan.held | rolling,
        prune_pools=tuple(n for n in the_plan.prune_pools if n not in serving_pruned),
        steps=(*the_plan.steps, RolloutStep(reasons.WAITING_FOR_GATEWAY, why)),
        settled=False,
    )


def _refused(old: SpecServeStatus, desired: list[JSON], applied: Applied) -> list[str]:
    """Objects refused and not applied since: those refused now, and those refused before and not tried again
    (held) that are still wanted."""
    wanted = {Ref.of_object(m) for m in desired}
    before = set(old.rollout.refused) if old.rollout is not None else set()
    kept = {k for k in before if k in wanted and k not in applied.applied}
    return sorted(kept | set(applied.failed))


def _rollout_state(
    old: SpecServeStatus, world: World, the_plan: Plan, moved_at: str | None, refused: list[str]
) -> RolloutState | None:
    """Announcements stay until their pool's template is current (a refused roll is not announced twice); the
    time of the last weight change moves when this pass changed the route's weights (`moved_at`)."""
    pending = {
        p.announcement for p in world.desired if (lp := world.live.get(p.name)) is not None and not lp.template_current
    }
    announced = (world.announced & pending) | ({the_plan.announcement} if the_plan.announcement else set())
    previous = old.rollout or RolloutState()
    state = RolloutState(
        announced=sorted(announced), weights_changed=moved_at or previous.weights_changed, refused=refused
    )
    return None if state == RolloutState() else state


def _known_absent(obj: SpecServe, old: SpecServeStatus) -> set[str]:
    """The PodMonitor API was found missing for this very generation: do not try again every resync (a spec
    edit, or an operator restart with the condition cleared, tries again)."""
    cond = find_condition(old.conditions, POD_MONITOR_READY)
    if (
        cond is not None
        and cond.reason == reasons.NOT_INSTALLED
        and cond.observed_generation == obj.metadata.generation
    ):
        return {Ref.of(PODMONITOR, obj.metadata.name)}
    return set()


async def _prune(
    kube: Kube, obj: SpecServe, desired: list[JSON], snap: Snapshot, the_plan: Plan
) -> tuple[list[str], list[str]]:
    """Stale objects the plan lets go: a replaced pool (with its Service and budget) once its traffic moved;
    other stale objects at once, except config that pods may still mount: a ConfigMap goes once the rollout
    settled (a roll held back by DowntimeAhead has not: its pods still mount the old config)."""
    keep = {Ref.of_object(m) for m in desired}
    stale = [k for k in snap.owned if k not in keep]
    old_pools = {Ref(k).name for k in stale if Ref(k).is_a(DEPLOYMENT)}
    go: list[str] = []
    for key in stale:
        kind, name = Ref(key).kind, Ref(key).name
        if name in old_pools:
            if name in the_plan.prune_pools:
                go.append(key)
        elif kind != "ConfigMap" or the_plan.settled:
            go.append(key)
    return await prune(kube, obj.metadata.namespace, go)


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


def _serving_mode(
    obj: SpecServe, tgt: Target, old: SpecServeStatus, weights: Weights | None, engine: PoolHealth | None,
    settled: bool,
) -> Mode:  # fmt: skip
    """The mode actually serving, from live objects."""
    strategy = obj.spec.strategy
    if strategy == Strategy.TRAFFIC_SPLIT:
        if weights is None or weights.speculative == weights.baseline:
            return tgt.mode
        return Mode.SPECULATIVE if weights.speculative > weights.baseline else Mode.BASELINE
    if strategy == Strategy.RESTART and not (settled and engine is not None and engine.ready > 0):
        return old.active_mode or tgt.mode  # the roll to the target mode has not finished
    return tgt.mode


def _observe(
    obj: SpecServe,
    tgt: Target,
    old: SpecServeStatus,
    the_pools: list[Pool],
    desired: list[JSON],
    live: Mapping[str, JSON],
    the_plan: Plan,
    snap: Snapshot,
    applied: Applied,
    prune_failures: list[str],
    causes: Mapping[str, Cause] | None = None,
    autoscaling: tuple[str, ...] = (),
) -> Observation:
    # The rendered count; None when the Deployment leaves replicas to an autoscaler (the live count is the truth).
    wanted = _rendered_replicas(desired)
    # A cause read before this pass applied a new template belongs to the pods that template replaces.
    failures = {n: _failure(c) for n, c in (causes or {}).items() if not _template_applied(n, snap, applied)}
    health = {
        p.name: PoolHealth.observe(
            p.name, wanted.get(p.name), live.get(Ref.of(DEPLOYMENT, p.name)), p.role, failures.get(p.name)
        )
        for p in the_pools
    }
    flavours = {p.name: p.flavour.speculative for p in the_pools}
    replaced = [
        PoolHealth.observe(
            item["metadata"]["name"],
            None,
            item,
            (item["metadata"].get("labels") or {}).get(LABEL_POOL, ""),
            failures.get(item["metadata"]["name"]),
        )
        for key, item in live.items()
        if Ref(key).is_a(DEPLOYMENT) and item["metadata"]["name"] not in health
    ]
    by_flavour = {p.flavour.speculative: health[p.name] for p in the_pools}
    route_requested = obj.spec.routing.gateway is not None
    route_key = Ref.of(HTTPROUTE, obj.metadata.name)
    route_live = live.get(route_key)
    weights = _live_weights(route_backends(route_live), flavours, live) if route_requested else None
    engine = health.get(the_pools[0].name) if len(the_pools) == 1 else None
    progressing = None
    if the_plan.steps:
        progressing = (the_plan.steps[0].reason, "; ".join(s.message for s in the_plan.steps))
    elif not the_plan.settled:
        progressing = (reasons.APPLYING, "applying the current spec")
    return Observation(
        generation=obj.metadata.generation,
        strategy=obj.spec.strategy,
        mode=_serving_mode(obj, tgt, old, weights, engine, the_plan.settled),
        weights=weights,
        speculative_pool=by_flavour.get(True),
        baseline_pool=by_flavour.get(False),
        route=RouteHealth.observe(route_requested, route_live, installed=route_key not in applied.not_installed),
        problems=tuple(applied.failures + prune_failures),
        pools=tuple(health.values()) + tuple(replaced),
        progressing=progressing,
        parts=_parts(obj, old, applied, live),
        dropped_parts=() if obj.spec.monitoring.pod_monitor else (POD_MONITOR_READY,),
        conflicts=tuple(snap.conflicts),
        autoscaler_conflicts=autoscaling,
    )


def _parts(obj: SpecServe, old: SpecServeStatus, applied: Applied, live: Mapping[str, JSON]) -> tuple[Part, ...]:
    if not obj.spec.monitoring.pod_monitor:
        return ()
    key = Ref.of(PODMONITOR, obj.metadata.name)
    if key in applied.not_installed:
        message = "the PodMonitor API (Prometheus Operator CRDs) is not installed; serving is not affected"
        return (Part(POD_MONITOR_READY, ConditionStatus.FALSE, reasons.NOT_INSTALLED, message),)
    if key in applied.optional:
        return (Part(POD_MONITOR_READY, ConditionStatus.FALSE, reasons.APPLY_FAILED, applied.optional[key]),)
    if key in live:
        return (Part(POD_MONITOR_READY, ConditionStatus.TRUE, reasons.APPLIED, "the PodMonitor is in place"),)
    previous = find_condition(old.conditions, POD_MONITOR_READY)
    if previous is not None:  # not tried again this pass (known absent, or held behind a failure)
        return (Part(POD_MONITOR_READY, previous.status, previous.reason, previous.message),)
    return (Part(POD_MONITOR_READY, ConditionStatus.UNKNOWN, reasons.PENDING, "the PodMonitor is not applied yet"),)


def _blind(obj: SpecServe, tgt: Target, snap: Snapshot) -> Observation:
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


def _warnings(old: SpecServeStatus, the_plan: Plan, applied: Applied) -> tuple[tuple[str, str], ...]:
    """Warning events, each once: the downtime announcement (the pass that first makes it; the next one acts),
    and each object whose apply newly failed (one that already failed on the previous pass is not repeated)."""
    out: list[tuple[str, str]] = []
    announced = old.rollout.announced if old.rollout is not None else []
    if the_plan.downtime is not None and the_plan.announcement not in announced:
        out.append((reasons.DOWNTIME_AHEAD, the_plan.downtime))
    refused_before = set(old.rollout.refused) if old.rollout is not None else set()
    out += [
        (reasons.APPLY_FAILED, f"{key}: {message}")
        for key, message in applied.failed.items()
        if key not in refused_before
    ]
    return tuple(out)


async def _reject(
    kube: Kube, body: Mapping[str, Any], old: SpecServeStatus, exc: InvalidSpecServe,
    now: Callable[[], str],
) -> Outcome:  # fmt: skip
    meta = body.get("metadata") or {}
    message = f"not applied, running pods are left as they are: {exc}"
    running = await _running_pools(kube, meta)
    new = invalid_status(old, meta.get("generation"), message, now(), running)
    stored = await _write_status(kube, body, new)
    newly = stored is not None and not any(
        c.type == DEGRADED and c.reason == reasons.INVALID_SPEC and c.message == message for c in old.conditions
    )
    return Outcome(status_written=stored is not None, invalid=str(exc), newly_invalid=newly, status=new, stored=stored)


async def _running_pools(kube: Kube, meta: Mapping[str, Any]) -> dict[str, PoolHealth] | None:
    """The pools an invalid spec left running (condition type -> health); None when they cannot be read."""
    try:
        items = await kube.list(DEPLOYMENT, meta.get("namespace", ""), {LABEL_INSTANCE: meta.get("name", "")})
    except KubeError:
        return None
    out: dict[str, PoolHealth] = {}
    for item in items:
        if not owned_by(item, meta.get("uid")):
            continue
        role = (item["metadata"].get("labels") or {}).get(LABEL_POOL, "")
        labels = ((item.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
        speculative = role == PoolRole.SPECULATIVE or (role == PoolRole.ENGINE and labels.get(LABEL_MODE) != "baseline")
        out[SPECULATIVE_POOL_READY if speculative else BASELINE_POOL_READY] = PoolHealth.observe(
            item["metadata"]["name"], None, item, role
        )
    return out

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

from pydantic import ValidationError

from specserve.api.install_policy import InstallPolicy, check_install_policy
from specserve.api.models import ConditionStatus, Mode, SpecServe, SpecServeStatus, Strategy, Weights
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.kube.client import KubeError
from specserve.kube.kinds import DEPLOYMENT, HTTPROUTE, PODMONITOR, SPECSERVE
from specserve.reconcile.apply import Applied, Kube, Snapshot, apply_changed, owned_by, prune, snapshot
from specserve.reconcile.intent import (
    JSON,
    desired_pool,
    live_pool,
    ref,
    route_backends,
    with_route_weights,
)
from specserve.reconcile.rendered import remembered_render
from specserve.reconcile.rollout import Plan, World, announced_in, plan
from specserve.reconcile.rolls import RollBudget
from specserve.reconcile.target import Target, rendered_spec, target
from specserve.render.manifests import LABEL_INSTANCE, LABEL_MODE, LABEL_POOL, Pool, PoolRole, pools
from specserve.status import (
    BASELINE_POOL_READY,
    POD_MONITOR_READY,
    PROGRESSING,
    SPECULATIVE_POOL_READY,
    Observation,
    Part,
    PoolHealth,
    RouteHealth,
    invalid_status,
    merge_patch,
    observed_status,
    same_status,
    status_body,
)

log = logging.getLogger(__name__)
NO_HOST_PATHS = InstallPolicy()  # the default installation: no hostPath volumes at all


@dataclass(frozen=True)
class StatusWrite:
    """A status this operator wrote, and the one it replaced: lets the next reconcile read its own write even
    when the object it is handed predates it (watch events and timers can lag behind our own patches)."""

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
    write: StatusWrite | None = None  # set when this reconcile wrote the status
    warnings: tuple[tuple[str, str], ...] = ()  # (reason, message): Warning events to post, each once
    held: tuple[str, ...] = ()  # Deployments whose change waits for a later step


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def previous_status(body: Mapping[str, Any]) -> SpecServeStatus:
    raw = body.get("status") or {}
    try:
        return SpecServeStatus.model_validate(raw)
    except ValidationError:
        return SpecServeStatus()  # unreadable (hand-edited) status: rebuild it from observation


def current_status(body: Mapping[str, Any], last_write: StatusWrite | None) -> SpecServeStatus:
    return _current(body, last_write)[0]


def _current(body: Mapping[str, Any], last_write: StatusWrite | None) -> tuple[SpecServeStatus, JSON]:
    """The status to start from, and the status body the server holds (the base of the merge patch)."""
    seen = previous_status(body)
    if last_write is not None and same_status(seen, last_write.before):
        return last_write.after, status_body(last_write.after)  # our last write has not come back yet
    raw = body.get("status")
    return seen, dict(raw) if isinstance(raw, dict) else {}


async def _write_status(
    kube: Kube, body: Mapping[str, Any], old: SpecServeStatus, server: JSON, new: SpecServeStatus
) -> StatusWrite | None:
    if same_status(old, new):
        return None
    patch = merge_patch(server, status_body(new))
    if not patch:
        return None
    meta = body["metadata"]
    try:
        await kube.patch_status(SPECSERVE, meta["namespace"], meta["name"], patch)
    except KubeError as exc:  # the next reconcile writes it again
        log.warning("status of %s/%s not written: %s", meta["namespace"], meta["name"], exc)
        return None
    return StatusWrite(before=old, after=new)


async def reconcile(
    kube: Kube,
    body: Mapping[str, Any],
    last_write: StatusWrite | None = None,
    now: Callable[[], str] = _now,
    install: InstallPolicy = NO_HOST_PATHS,
    rolls: RollBudget | None = None,
) -> Outcome:
    old, server = _current(body, last_write)
    try:
        obj = parse_object(body)
        # What the installation allows (host paths) is refused like any invalid spec: nothing applied.
        if errors := check_install_policy(obj.spec, install):
            raise InvalidSpecServe(errors)
    except InvalidSpecServe as exc:
        return await _reject(kube, body, old, server, exc, now)
    tgt = target(obj, old)
    shown = rendered_spec(obj, old)
    the_pools = pools(shown, tgt.mode)
    desired = remembered_render(shown, tgt.mode)  # the last render while nothing changed (render() is pure)
    meta = obj.metadata
    snap = await snapshot(kube, meta.namespace, meta.name, meta.uid, desired)
    if snap.read_errors:
        seen = _blind(obj, tgt, snap)
        new = observed_status(old, seen, now())
        write = await _write_status(kube, body, old, server, new)
        return Outcome(status_written=write is not None, status=new, write=write)

    route_key = f"{HTTPROUTE.kind}/{meta.name}"
    world = _world(obj, tgt, the_pools, desired, snap, old)
    if rolls is not None:  # the cluster-wide roll budget: read and updated with no await in between
        owner = (meta.namespace, meta.name)
        world = replace(world, roll_slots=rolls.slots(owner, world))
    the_plan = plan(world)
    if rolls is not None:
        rolls.record(owner, world, the_plan)
    skip = set(snap.conflicts) | {f"{DEPLOYMENT.kind}/{n}" for n in the_plan.held} | _known_absent(obj, old)
    skip |= {ref(m) for m in desired if m["kind"] in snap.unread}  # not read this pass: left as they are
    to_apply = [
        with_route_weights(m, the_plan.route_weights) if ref(m) == route_key else m
        for m in desired
        if ref(m) not in skip
    ]
    applied = await apply_changed(kube, to_apply, snap.owned)
    pruned, prune_failures = ([], []) if applied.failures else await _prune(kube, obj, desired, snap, the_plan)
    prune_failures += [f"{why}; left as they are this pass" for why in snap.unread.values()]

    live = {**snap.owned, **applied.live}
    seen = _observe(obj, tgt, old, the_pools, desired, live, the_plan, snap, applied, prune_failures)
    new = observed_status(old, seen, now())
    write = await _write_status(kube, body, old, server, new)
    return Outcome(
        applied=tuple(applied.applied),
        pruned=tuple(pruned),
        status_written=write is not None,
        status=new,
        write=write,
        warnings=_warnings(old, the_plan),
        held=tuple(sorted(the_plan.held)),
    )


def _world(
        obj: SpecServe, tgt: Target, the_pools: list[Pool], desired: list[JSON], snap: Snapshot,
        old: SpecServeStatus,
) -> World:  # fmt: skip
    deployments = {m["metadata"]["name"]: m for m in desired if m["kind"] == DEPLOYMENT.kind}
    live = {
        item["metadata"]["name"]: live_pool(item, deployments.get(item["metadata"]["name"]))
        for key, item in snap.owned.items()
        if key.startswith(f"{DEPLOYMENT.kind}/")
    }
    by_role = {PoolRole.SPECULATIVE: tgt.weights.speculative, PoolRole.BASELINE: tgt.weights.baseline}
    progressing = next((c for c in old.conditions if c.type == PROGRESSING), None)
    return World(
        desired=tuple(
            desired_pool(d)
            for d in deployments.values()
            if f"{DEPLOYMENT.kind}/{d['metadata']['name']}" not in snap.conflicts
        ),
        live=live,
        route=obj.spec.routing.gateway is not None,
        live_route=route_backends(snap.owned.get(f"{HTTPROUTE.kind}/{obj.metadata.name}")),
        target_weights={p.name: by_role.get(p.role, 100) for p in the_pools},
        announced=announced_in(progressing.reason, progressing.message) if progressing else frozenset(),
        # A pool with any object of its name owned by someone else (its Service, say) gets no traffic.
        excluded=frozenset(c.partition("/")[2] for c in snap.conflicts) & frozenset(deployments),
    )


def _known_absent(obj: SpecServe, old: SpecServeStatus) -> set[str]:
    """The PodMonitor API was found missing for this very generation: do not try again every resync (a spec
    edit, or an operator restart with the condition cleared, tries again)."""
    cond = next((c for c in old.conditions if c.type == POD_MONITOR_READY), None)
    if cond is not None and cond.reason == "NotInstalled" and cond.observed_generation == obj.metadata.generation:
        return {f"{PODMONITOR.kind}/{obj.metadata.name}"}
    return set()


async def _prune(
    kube: Kube, obj: SpecServe, desired: list[JSON], snap: Snapshot, the_plan: Plan
) -> tuple[list[str], list[str]]:
    """Stale objects the plan lets go: a replaced pool (with its Service and budget) once its traffic moved;
    other stale objects at once, except config that pods may still mount: a ConfigMap goes once the rollout
    settled (a roll held back by DowntimeAhead has not: its pods still mount the old config)."""
    keep = {ref(m) for m in desired}
    stale = [k for k in snap.owned if k not in keep]
    old_pools = {k.partition("/")[2] for k in stale if k.startswith(f"{DEPLOYMENT.kind}/")}
    go: list[str] = []
    for key in stale:
        kind, _, name = key.partition("/")
        if name in old_pools:
            if name in the_plan.prune_pools:
                go.append(key)
        elif kind != "ConfigMap" or the_plan.settled:
            go.append(key)
    return await prune(kube, obj.metadata.namespace, go)


def _speculative_flavour(name: str, flavours: Mapping[str, bool], live: Mapping[str, JSON]) -> bool:
    deployment = live.get(f"{DEPLOYMENT.kind}/{name}")
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
) -> Observation:
    # The rendered count; None when the Deployment leaves replicas to an autoscaler (the live count is the truth).
    wanted = {m["metadata"]["name"]: m["spec"].get("replicas") for m in desired if m["kind"] == DEPLOYMENT.kind}
    health = {
        p.name: PoolHealth.observe(p.name, wanted.get(p.name), live.get(f"{DEPLOYMENT.kind}/{p.name}"), p.role)
        for p in the_pools
    }
    flavours = {p.name: p.flavour.speculative for p in the_pools}
    replaced = [
        PoolHealth.observe(
            item["metadata"]["name"], None, item, (item["metadata"].get("labels") or {}).get(LABEL_POOL, "")
        )
        for key, item in live.items()
        if key.startswith(f"{DEPLOYMENT.kind}/") and item["metadata"]["name"] not in health
    ]
    by_flavour = {p.flavour.speculative: health[p.name] for p in the_pools}
    route_requested = obj.spec.routing.gateway is not None
    route_key = f"{HTTPROUTE.kind}/{obj.metadata.name}"
    route_live = live.get(route_key)
    weights = _live_weights(route_backends(route_live), flavours, live) if route_requested else None
    engine = health.get(the_pools[0].name) if len(the_pools) == 1 else None
    progressing = None
    if the_plan.steps:
        progressing = (the_plan.steps[0].reason, "; ".join(s.message for s in the_plan.steps))
    elif not the_plan.settled:
        progressing = ("Applying", "applying the current spec")
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
    )


def _parts(obj: SpecServe, old: SpecServeStatus, applied: Applied, live: Mapping[str, JSON]) -> tuple[Part, ...]:
    if not obj.spec.monitoring.pod_monitor:
        return ()
    key = f"{PODMONITOR.kind}/{obj.metadata.name}"
    if key in applied.not_installed:
        message = "the PodMonitor API (Prometheus Operator CRDs) is not installed; serving is not affected"
        return (Part(POD_MONITOR_READY, ConditionStatus.FALSE, "NotInstalled", message),)
    if key in applied.optional:
        return (Part(POD_MONITOR_READY, ConditionStatus.FALSE, "ApplyFailed", applied.optional[key]),)
    if key in live:
        return (Part(POD_MONITOR_READY, ConditionStatus.TRUE, "Applied", "the PodMonitor is in place"),)
    previous = next((c for c in old.conditions if c.type == POD_MONITOR_READY), None)
    if previous is not None:  # not tried again this pass (known absent, or held behind a failure)
        return (Part(POD_MONITOR_READY, previous.status, previous.reason, previous.message),)
    return (Part(POD_MONITOR_READY, ConditionStatus.UNKNOWN, "Pending", "the PodMonitor is not applied yet"),)


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


def _warnings(old: SpecServeStatus, the_plan: Plan) -> tuple[tuple[str, str], ...]:
    """The downtime announcement, once: the pass that first makes it (the next one acts)."""
    if the_plan.downtime is None:
        return ()
    previous = next((c for c in old.conditions if c.type == PROGRESSING), None)
    if previous is not None and previous.message.endswith(the_plan.downtime):
        return ()
    return (("DowntimeAhead", the_plan.downtime),)


async def _reject(
    kube: Kube, body: Mapping[str, Any], old: SpecServeStatus, server: JSON, exc: InvalidSpecServe,
    now: Callable[[], str],
) -> Outcome:  # fmt: skip
    meta = body.get("metadata") or {}
    message = f"not applied, running pods are left as they are: {exc}"
    running = await _running_pools(kube, meta)
    new = invalid_status(old, meta.get("generation"), message, now(), running)
    write = await _write_status(kube, body, old, server, new)
    written = write is not None
    newly = written and not any(c.type == "Degraded" and c.reason == "InvalidSpec" and c.message == message
                                for c in old.conditions)  # fmt: skip
    return Outcome(status_written=written, invalid=str(exc), newly_invalid=newly, status=new, write=write)


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

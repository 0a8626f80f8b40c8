"""One level-based reconcile of a SpecServe: validate, render the switching target, read what is live, let the
planner choose the next safe step, apply it, prune what it allows, and write the status only when it changed.
The handlers call this; it knows nothing of kopf. It only orchestrates: what the pass saw is one `Pass` record
(observe.py, pure), what it remembers between passes is memory.py (pure), what is safe is rollout.py (pure),
and the I/O is apply.py, causes.py and autoscalers.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from specserve.api import reasons
from specserve.api.conditions import DEGRADED
from specserve.api.install_policy import InstallPolicy, check_install_policy
from specserve.api.models import SpecServeStatus
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.clock import rfc3339
from specserve.kube.client import KubeError
from specserve.kube.kinds import DEPLOYMENT, SERVICE, SPECSERVE, Ref
from specserve.layout import LABEL_INSTANCE, pool_layout
from specserve.reconcile import memory
from specserve.reconcile.apply import Kube, apply_changed, prune, snapshot
from specserve.reconcile.autoscalers import autoscaler_conflicts
from specserve.reconcile.causes import pool_causes
from specserve.reconcile.intent import JSON, route_backends, with_route_weights
from specserve.reconcile.observe import Applied, Pass, blind, left_running, observe, world
from specserve.reconcile.rendered import remembered_render
from specserve.reconcile.rollout import Plan, plan
from specserve.reconcile.rolls import RollBudget
from specserve.reconcile.target import rendered_spec, target
from specserve.reconcile.traffic import keep_serving, moves_off_dead, servable, with_live_backends
from specserve.status import RECONCILE, PoolHealth, invalid_status, new_failures, observed_status, read_status

log = logging.getLogger(__name__)
NO_HOST_PATHS = InstallPolicy()  # the default installation: no hostPath volumes at all


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


async def _write_status(kube: Kube, body: Mapping[str, Any], new: SpecServeStatus) -> JSON | None:
    """Server-side apply of the reconcile's own status fields, only when they differ from the live ones; the
    object as the server stored it (None: nothing written)."""
    if not RECONCILE.differs(read_status(body), new):
        return None
    meta = body["metadata"]
    try:
        return await kube.apply_status(
            SPECSERVE, meta["namespace"], meta["name"], RECONCILE.body(new), field_manager=RECONCILE.manager
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
    desired = remembered_render(shown, tgt.mode)  # the last render while nothing changed (render() is pure)
    meta = obj.metadata
    snap = await snapshot(kube, meta.namespace, meta.name, meta.uid, desired)
    if snap.read_errors:
        new = observed_status(old, blind(obj, tgt, snap), now())
        stored = await _write_status(kube, body, new)
        return Outcome(status_written=stored is not None, status=new, stored=stored)

    p = Pass(obj, tgt, old, now(), tuple(pool_layout(shown, tgt.mode)), tuple(desired), snap)
    rendered = p.rendered_replicas
    p = replace(
        p,
        causes=await pool_causes(kube, meta.namespace, meta.name, snap.owned, rendered, memory.reported_causes(old)),
        autoscaling=await autoscaler_conflicts(kube, meta.namespace, snap.owned, rendered,
                                               memory.conflict_reported(old)),
    )  # fmt: skip
    seen = world(p)
    if rolls is not None:  # the cluster-wide roll budget: read and updated with no await in between
        seen = rolls.budgeted((meta.namespace, meta.name), seen)
    p = replace(p, plan=plan(seen))
    if rolls is not None:
        rolls.record((meta.namespace, meta.name), seen, p.plan)
    skip = set(snap.conflicts) | {Ref.of(DEPLOYMENT, n) for n in p.plan.held} | memory.known_absent(obj, old)
    skip |= {Ref.of_object(m) for m in desired if m["kind"] in snap.unread}  # not read this pass: left as they are
    serving = frozenset(n for n, lp in seen.live.items() if lp.serving and n not in seen.excluded)
    applied = await _apply_traffic_first(
        kube, [m for m in desired if Ref.of_object(m) not in skip], snap.owned, p.route_key, p.plan, serving
    )
    pruned, prune_failures = ([], []) if applied.failed else await _prune(kube, p)
    prune_failures += [f"{why}; left as they are this pass" for why in snap.unread.values()]
    p = replace(p, applied=applied, prune_failures=tuple(prune_failures))

    moved = route_backends(snap.owned.get(p.route_key)) != route_backends(p.live.get(p.route_key))
    new = observed_status(old, observe(p), p.now)
    new = new.model_copy(update={"rollout": memory.rollout_state(p, seen, p.now if moved else None)})
    stored = await _write_status(kube, body, new)
    return Outcome(
        applied=tuple(applied.applied),
        pruned=tuple(pruned),
        status_written=stored is not None,
        status=new,
        stored=stored,
        warnings=memory.warnings(p) + new_failures(old, new),
        held=tuple(sorted(p.plan.held | {Ref(k).name for k in applied.held})),
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


async def _prune(kube: Kube, p: Pass) -> tuple[list[str], list[str]]:
    """Stale objects the plan lets go: a replaced pool (with its Service and budget) once its traffic moved;
    other stale objects at once, except config that pods may still mount: a ConfigMap goes once the rollout
    settled (a roll held back by DowntimeAhead has not: its pods still mount the old config)."""
    keep = {Ref.of_object(m) for m in p.desired}
    stale = [k for k in p.snap.owned if k not in keep]
    old_pools = {Ref(k).name for k in stale if Ref(k).is_a(DEPLOYMENT)}
    go: list[str] = []
    for key in stale:
        kind, name = Ref(key).kind, Ref(key).name
        if name in old_pools:
            if name in p.plan.prune_pools:
                go.append(key)
        elif kind != "ConfigMap" or p.plan.settled:
            go.append(key)
    return await prune(kube, p.obj.metadata.namespace, go)


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
    return left_running(items, meta.get("uid"))

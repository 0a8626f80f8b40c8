"""The failover fast path: weight off every pool the watch reports without a Ready replica, onto the Ready pools
of the live route, in one read and one write, holding no reconcile lock and making no LIST.

A full pass makes a dozen sequential round trips (a LIST per owned kind, pod and autoscaler reads, the applies);
with a slow API server a failover queued behind one, then making its own, left traffic on a dead pool for tens of
seconds. This path reads the one object it writes (the route: its live backends and resourceVersion), computes the
move from what the Deployment watch delivered, and applies the route with the resourceVersion as a precondition
(a route written meanwhile answers 409: read again, move again). The full pass that follows does everything else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.kube.client import KubeError
from specserve.kube.drift import with_applied_hash
from specserve.kube.kinds import DEPLOYMENT, HTTPROUTE, SPECSERVE, Kind, Ref
from specserve.layout import LABEL_INSTANCE
from specserve.pool_state import read_pool
from specserve.reconcile.apply import Kube
from specserve.reconcile.intent import JSON, route_backends, with_route_weights
from specserve.reconcile.observe import owned_by
from specserve.reconcile.rendered import remembered_render
from specserve.reconcile.target import rendered_spec, target
from specserve.reconcile.traffic import relieve, with_live_backends
from specserve.status import read_status

log = logging.getLogger(__name__)
ATTEMPTS = 3  # a route written between our read and our write: read it again (a 409 each time)


def rendered_route(body: Mapping[str, Any]) -> JSON | None:
    """The HTTPRoute the reconcile would render for this SpecServe now (None: invalid spec, or no route)."""
    try:
        obj = parse_object(body)
    except InvalidSpecServe:
        return None
    if obj.spec.routing.gateway is None:
        return None
    old = read_status(body)
    desired = remembered_render(rendered_spec(obj, old), target(obj, old).mode)
    key = Ref.of(HTTPROUTE, obj.metadata.name)
    return next((m for m in desired if Ref.of_object(m) == key), None)


def failover_route(rendered: Mapping[str, Any], live: Mapping[str, Any], weights: tuple[tuple[str, int], ...]) -> JSON:
    """The route to apply: the rendered intent, the live backends (a replaced pool keeps its backendRef) with the
    new weights, and the live resourceVersion as the write's precondition."""
    names = frozenset(n for n, _ in weights)
    route = with_applied_hash(with_route_weights(with_live_backends(rendered, live, names), weights))
    route["metadata"] = {**route["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]}
    return route


async def fail_over(
    kube: Kube,
    body: Mapping[str, Any],
    pools: Mapping[str, bool],
    before_write: Callable[[], Awaitable[None] | None] = lambda: None,
    listed: JSON | None = None,
) -> tuple[tuple[str, int], ...] | None:
    """Move the live route's weight off the `pools` without a Ready replica (pool -> has one: the watch's view, or
    a listing's), onto the Ready ones. `before_write` runs right before each route write (the dispatcher cancels
    the in-flight pass there: its world is older than this move). `listed`: the route as a LIST just returned
    it, for the first attempt instead of a read. The weights written, or None when nothing was written."""
    meta = body.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    rendered = rendered_route(body)
    if rendered is None:
        return None
    serving, known = frozenset(n for n, ready in pools.items() if ready), frozenset(pools)
    for attempt in range(ATTEMPTS):
        try:
            live = listed if attempt == 0 and listed is not None else await kube.get(HTTPROUTE, namespace, name)
        except KubeError as exc:
            log.warning("failover of %s/%s: reading the HTTPRoute failed: %s", namespace, name, exc)
            return None
        if live is None or not owned_by(live, meta.get("uid")):
            return None
        weights = relieve(route_backends(live), serving, known)
        if weights is None:
            return None
        waited = before_write()
        if waited is not None:
            await waited
        try:
            await kube.apply(failover_route(rendered, live, weights))
        except KubeError as exc:
            if exc.status == 409:  # written meanwhile: move again from what is live now
                continue
            log.warning("failover of %s/%s: the HTTPRoute write failed: %s", namespace, name, exc)
            return None
        return weights
    return None


def split(pools: Mapping[str, bool]) -> bool:
    """Some pools serve and some do not: weight may sit on a dead one."""
    return any(pools.values()) and not all(pools.values())


class Lister(Kube, Protocol):
    async def list_labelled(self, kind: Kind, namespace: str | None, label: str | None) -> list[JSON]: ...


async def fail_over_everywhere(kube: Lister, namespaces: Iterable[str | None]) -> int:
    """A leader's first act: weight off every pool that lost its last Ready replica while no leader acted (the
    old one died, or its Lease lapsed), in two round trips: the SpecServes, their Deployments and their routes
    listed at once, then the route writes at once. kopf's own start (API discovery, a watch per kind, then the
    first-sight failover's read of the route) took five under a slow API server; controller-runtime's standbys
    keep warm caches for the same reason. The number of routes written; a failed LIST skips its scope (kopf's
    first sight of each pool fails over the slower way)."""

    async def scope(namespace: str | None) -> list[Awaitable[Any]]:
        try:
            owners, pools, routes = await asyncio.gather(
                kube.list_labelled(SPECSERVE, namespace, None),
                kube.list_labelled(DEPLOYMENT, namespace, LABEL_INSTANCE),
                kube.list_labelled(HTTPROUTE, namespace, LABEL_INSTANCE),
            )
        except KubeError as exc:
            log.warning("failover at start: listing %s failed: %s", namespace or "every namespace", exc)
            return []
        # A LIST leaves out each item's apiVersion and kind, which reading a SpecServe needs.
        bodies = [{"apiVersion": SPECSERVE.api_version, "kind": SPECSERVE.kind, **o} for o in owners]
        return [fail_over(kube, body, seen, listed=route) for body, seen, route in _split_owners(bodies, pools, routes)]

    moves = [move for moves in await asyncio.gather(*(scope(n) for n in namespaces)) for move in moves]
    moved = [weights for weights in await asyncio.gather(*moves) if weights is not None]
    if moved:
        log.info("failover at start: %d routes moved off pools without a Ready replica", len(moved))
    return len(moved)


def _split_owners(
    owners: list[JSON], pools: list[JSON], routes: list[JSON]
) -> Iterable[tuple[JSON, dict[str, bool], JSON]]:
    """(SpecServe, whether each of its pools serves, its live route) for each SpecServe with a pool that serves
    beside one that does not (owner references by uid: a pool or route of its name owned by another is not ours)."""
    by_uid: dict[str, dict[str, bool]] = {}
    for pool in pools:
        for uid in _owners(pool):
            by_uid.setdefault(uid, {})[str(pool["metadata"].get("name"))] = read_pool(pool).serving
    route_by_uid = {uid: route for route in routes for uid in _owners(route)}
    for body in owners:
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid"))
        seen, route = by_uid.get(uid, {}), route_by_uid.get(uid)
        if route is not None and split(seen) and not meta.get("deletionTimestamp"):
            yield body, seen, route


def _owners(obj: JSON) -> list[str]:
    return [str(ref.get("uid")) for ref in (obj.get("metadata") or {}).get("ownerReferences") or []]

"""The failover fast path: weight off every pool the watch reports without a Ready replica, onto the Ready pools
of the live route, in one read and one write, holding no reconcile lock and making no LIST.

A full pass makes a dozen sequential round trips (a LIST per owned kind, pod and autoscaler reads, the applies);
with a slow API server a failover queued behind one, then making its own, left traffic on a dead pool for tens of
seconds. This path reads the one object it writes (the route: its live backends and resourceVersion), computes the
move from what the Deployment watch delivered, and applies the route with the resourceVersion as a precondition
(a route written meanwhile answers 409: read again, move again). The full pass that follows does everything else.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Set
from typing import Any

from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.kube.client import KubeError
from specserve.kube.drift import with_applied_hash
from specserve.kube.kinds import HTTPROUTE, Ref
from specserve.reconcile.apply import Kube, owned_by
from specserve.reconcile.core import previous_status
from specserve.reconcile.intent import JSON, route_backends, with_route_weights
from specserve.reconcile.rendered import remembered_render
from specserve.reconcile.target import rendered_spec, target
from specserve.reconcile.traffic import relieve, with_live_backends

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
    old = previous_status(body)
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
    serving: Set[str],
    known: Set[str],
    before_write: Callable[[], Awaitable[None] | None] = lambda: None,
) -> tuple[tuple[str, int], ...] | None:
    """Move the live route's weight off the pools in `known` but not in `serving` (the watch's view), onto the
    Ready ones. `before_write` runs right before each route write (the dispatcher cancels the in-flight pass
    there: its world is older than this move). The weights written, or None when nothing was written."""
    meta = body.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    rendered = rendered_route(body)
    if rendered is None:
        return None
    for _ in range(ATTEMPTS):
        try:
            live = await kube.get(HTTPROUTE, namespace, name)
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

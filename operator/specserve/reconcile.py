"""One level-based reconcile of a SpecServe: validate, render, apply what drifted, prune what is no longer
rendered, observe, and write status only when it changed. The handlers call this; it knows nothing of kopf.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import ValidationError

from specserve.api.models import Mode, SpecServe, SpecServeStatus, Weights
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.kube.client import KubeError
from specserve.kube.drift import contains
from specserve.kube.kinds import DEPLOYMENT, HTTPROUTE, OWNED_KINDS, SPECSERVE, Kind, kind_of
from specserve.render import render
from specserve.render.manifests import LABEL_INSTANCE, PoolRole, pools, weights
from specserve.status import (
    Observation,
    PoolHealth,
    RouteHealth,
    invalid_status,
    observed_status,
    same_status,
    status_body,
)

log = logging.getLogger(__name__)
JSON = dict[str, Any]


class Kube(Protocol):
    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None: ...
    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]: ...
    async def apply(self, manifest: JSON) -> JSON: ...
    async def delete(self, kind: Kind, namespace: str, name: str) -> None: ...
    async def patch_status(self, kind: Kind, namespace: str, name: str, status_body: JSON) -> None: ...


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


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ref(manifest: Mapping[str, Any]) -> str:
    return f"{manifest['kind']}/{manifest['metadata']['name']}"


def previous_status(body: Mapping[str, Any]) -> SpecServeStatus:
    raw = body.get("status") or {}
    try:
        return SpecServeStatus.model_validate(raw)
    except ValidationError:
        return SpecServeStatus()  # unreadable (hand-edited) status: rebuild it from observation


def current_status(body: Mapping[str, Any], last_write: StatusWrite | None) -> SpecServeStatus:
    seen = previous_status(body)
    if last_write is not None and same_status(seen, last_write.before):
        return last_write.after  # our last write has not come back through the watch yet
    return seen


def active_mode(obj: SpecServe, status: SpecServeStatus) -> Mode:
    """The mode of the last applied switching decision; before any, spec.switching.initialMode."""
    decision = status.last_decision
    if decision is not None and decision.applied:
        return decision.to_mode
    return obj.spec.switching.initial_mode


async def _write_status(
    kube: Kube, body: Mapping[str, Any], old: SpecServeStatus, new: SpecServeStatus
) -> StatusWrite | None:
    if same_status(old, new):
        return None
    meta = body["metadata"]
    await kube.patch_status(SPECSERVE, meta["namespace"], meta["name"], status_body(new))
    return StatusWrite(before=previous_status(body), after=new)


async def reconcile(
    kube: Kube, body: Mapping[str, Any], last_write: StatusWrite | None = None, now: Callable[[], str] = _now
) -> Outcome:
    meta = body.get("metadata") or {}
    namespace, generation = meta.get("namespace", "default"), meta.get("generation")
    old = current_status(body, last_write)
    try:
        obj = parse_object(body)
    except InvalidSpecServe as exc:
        message = f"not applied, running pods are left as they are: {exc}"
        new = invalid_status(old, generation, message, now())
        write = await _write_status(kube, body, old, new)
        written = write is not None
        return Outcome(status_written=written, invalid=str(exc), newly_invalid=written, status=new, write=write)

    mode = active_mode(obj, old)
    desired = render(obj, mode)
    applied, problems = [], []
    live_by_ref: dict[str, JSON | None] = {}
    for manifest in desired:
        kind, name = kind_of(manifest), manifest["metadata"]["name"]
        try:
            live = await kube.get(kind, namespace, name)
            if live is None or not contains(live, manifest):
                live = await kube.apply(manifest)
                applied.append(_ref(manifest))
            live_by_ref[_ref(manifest)] = live
        except KubeError as exc:
            problems.append(f"{_ref(manifest)}: {exc}")
    pruned = await _prune(kube, obj, desired, problems)

    the_pools = {p.role: p for p in pools(obj, mode)}

    def health(role: str) -> PoolHealth | None:
        pool = the_pools.get(role)
        if pool is None:
            return None
        return PoolHealth.observe(pool.name, pool.replicas, live_by_ref.get(f"{DEPLOYMENT.kind}/{pool.name}"))

    engine = the_pools.get(PoolRole.ENGINE)
    speculative = health(PoolRole.SPECULATIVE)
    baseline = health(PoolRole.BASELINE)
    if engine is not None:  # one pool: it stands for the flavour it runs
        speculative, baseline = (
            (health(PoolRole.ENGINE), None) if engine.flavour.speculative else (None, health(PoolRole.ENGINE))
        )
    route_requested = obj.spec.routing.gateway is not None
    w = weights(obj, mode)
    seen = Observation(
        generation=generation,
        strategy=obj.spec.strategy,
        mode=mode,
        weights=Weights(speculative=w.speculative, baseline=w.baseline) if route_requested else None,
        speculative_pool=speculative,
        baseline_pool=baseline,
        route=RouteHealth.observe(route_requested, live_by_ref.get(f"{HTTPROUTE.kind}/{obj.metadata.name}")),
        problems=tuple(problems),
    )
    new = observed_status(old, seen, now())
    write = await _write_status(kube, body, old, new)
    return Outcome(
        applied=tuple(applied), pruned=tuple(pruned), status_written=write is not None, status=new, write=write
    )


async def _prune(kube: Kube, obj: SpecServe, desired: list[JSON], problems: list[str]) -> list[str]:
    """Delete objects this SpecServe owns that the current spec no longer renders (e.g. after a
    strategy change). Only objects carrying our instance label AND our owner reference are touched."""
    keep = {(m["kind"], m["metadata"]["name"]) for m in desired}
    pruned = []
    namespace, uid = obj.metadata.namespace, obj.metadata.uid
    for kind in OWNED_KINDS:
        try:
            items = await kube.list(kind, namespace, {LABEL_INSTANCE: obj.metadata.name})
            for item in items:
                meta = item.get("metadata") or {}
                owned = any(ref.get("uid") == uid for ref in meta.get("ownerReferences") or [])
                if owned and (kind.kind, meta.get("name")) not in keep:
                    await kube.delete(kind, namespace, meta["name"])
                    pruned.append(f"{kind.kind}/{meta['name']}")
        except KubeError as exc:
            if exc.status != 404:
                problems.append(f"pruning {kind.plural}: {exc}")
    return pruned

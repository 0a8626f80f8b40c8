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

from specserve.api.models import Mode, SpecServe, SpecServeStatus
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.kube.client import KubeError
from specserve.kube.drift import contains
from specserve.kube.kinds import DEPLOYMENT, HTTPROUTE, OWNED_KINDS, SPECSERVE, Kind, kind_of
from specserve.render import render
from specserve.render.manifests import LABEL_INSTANCE, pools, weights
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
    old = current_status(body, last_write)
    try:
        obj = parse_object(body)
    except InvalidSpecServe as exc:
        message = f"not applied, running pods are left as they are: {exc}"
        new = invalid_status(old, (body.get("metadata") or {}).get("generation"), message, now())
        write = await _write_status(kube, body, old, new)
        written = write is not None
        return Outcome(status_written=written, invalid=str(exc), newly_invalid=written, status=new, write=write)

    mode = active_mode(obj, old)
    desired = render(obj, mode)
    live, applied, problems = await _apply_drifted(kube, obj.metadata.namespace, desired)
    pruned = await _prune(kube, obj, desired, problems)
    seen = observe(obj, mode, live, problems)
    new = observed_status(old, seen, now())
    write = await _write_status(kube, body, old, new)
    return Outcome(
        applied=tuple(applied), pruned=tuple(pruned), status_written=write is not None, status=new, write=write
    )


async def _apply_drifted(
    kube: Kube, namespace: str, desired: list[JSON]
) -> tuple[dict[str, JSON | None], list[str], list[str]]:
    """Apply each desired object that is missing or drifted; return the live objects by "Kind/name",
    what was applied, and the failures (reported in status, never raised)."""
    live_by_ref: dict[str, JSON | None] = {}
    applied, problems = [], []
    for manifest in desired:
        ref = _ref(manifest)
        try:
            live = await kube.get(kind_of(manifest), namespace, manifest["metadata"]["name"])
            if live is None or not contains(live, manifest):
                live = await kube.apply(manifest)
                applied.append(ref)
            live_by_ref[ref] = live
        except KubeError as exc:
            problems.append(f"{ref}: {exc}")
    return live_by_ref, applied, problems


def observe(obj: SpecServe, mode: Mode, live: Mapping[str, JSON | None], problems: list[str]) -> Observation:
    """What the live objects say about the pools and the route (pure). A single-pool strategy's pool
    stands for the flavour it runs."""
    health = {
        pool.flavour.speculative: PoolHealth.observe(
            pool.name, pool.replicas, live.get(f"{DEPLOYMENT.kind}/{pool.name}")
        )
        for pool in pools(obj, mode)
    }
    route_requested = obj.spec.routing.gateway is not None
    return Observation(
        generation=obj.metadata.generation,
        strategy=obj.spec.strategy,
        mode=mode,
        weights=weights(obj, mode) if route_requested else None,
        speculative_pool=health.get(True),
        baseline_pool=health.get(False),
        route=RouteHealth.observe(route_requested, live.get(f"{HTTPROUTE.kind}/{obj.metadata.name}")),
        problems=tuple(problems),
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

"""Drift repair: every resync interval, reconcile every SpecServe the watch has delivered.

Each SpecServe has its own phase in the interval (a stable offset from its uid), so a round is spread over the
interval rather than one burst of hundreds of reconciles; the round's reconciles take background slots
(specserve.slots), which urgent triggers overtake.

One task for all SpecServes, not a kopf timer per object: a kopf timer keeps a live copy of its object's body and
a task per object for as long as the object exists (about 12 MB of the operator's memory at 200 SpecServes), and
it makes kopf put its finalizer on the object. The reconciles of a round queue for the reconcile slots
(specserve.slots) like any other trigger, so a round of hundreds never runs them all at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from specserve.api.conditions import DEGRADED, PROGRESSING
from specserve.api.models import ConditionStatus
from specserve.kube.client import KubeError
from specserve.kube.kinds import OWNED_KINDS, SPECSERVE, Kind
from specserve.layout import LABEL_INSTANCE
from specserve.objects import Objects, ObjectState, older, uid_of
from specserve.reconcile import Outcome

log = logging.getLogger(__name__)

Reconcile = Callable[[ObjectState], Awaitable[None]]
BeforeRound = Callable[[], Awaitable[None]]
Key = tuple[str, str]


def fingerprints(listed: Iterable[tuple[str, dict[str, Any]]], label: str) -> dict[Key, str]:
    """(namespace, instance) -> a digest of every object (kind, name, resourceVersion, owners) labelled with that
    instance: equal digests mean nothing any SpecServe owns changed in between (every write bumps the
    resourceVersion). `listed` holds (kind, object) pairs."""
    seen: dict[Key, list[tuple[str, ...]]] = defaultdict(list)
    for kind, obj in listed:
        meta = obj.get("metadata") or {}
        instance = (meta.get("labels") or {}).get(label)
        if instance is None:
            continue
        owners = ",".join(sorted(str(r.get("uid")) for r in meta.get("ownerReferences") or []))
        seen[(str(meta.get("namespace", "")), str(instance))].append(
            (kind, str(meta.get("name")), str(meta.get("resourceVersion")), owners)
        )
    return {key: hashlib.blake2b(repr(sorted(rows)).encode(), digest_size=16).hexdigest() for key, rows in seen.items()}


class LabelledLister(Protocol):
    async def list_labelled(self, kind: Kind, namespace: str | None, label: str | None) -> list[dict[str, Any]]: ...


def phase(item: ObjectState, interval: float) -> float:
    """The SpecServe's stable offset in [0, interval): the same on every round and every operator start."""
    meta = item.body.get("metadata") or {}
    key = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
    return interval * zlib.crc32(key.encode()) / 2**32


async def _until(deadline: float, stop: asyncio.Event | None) -> None:
    delay = deadline - time.monotonic()
    if delay <= 0:
        return
    if stop is None:
        await asyncio.sleep(delay)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=delay)


async def resync_round(
    objects: Objects, reconcile: Reconcile, spread: float = 0.0, stop: asyncio.Event | None = None
) -> int:
    """Reconcile every tracked SpecServe once, each at its phase within `spread` seconds (0: all at once); returns
    how many failed. A failure is logged and retried next round: one SpecServe's error never stops the others'
    repair. An API error is one line (it names the call); anything else is a bug and keeps its traceback. When
    `stop` is set the round launches nothing more (and waits for what it launched)."""
    began = time.monotonic()
    items = sorted(objects, key=lambda i: phase(i, spread)) if spread > 0 else list(objects)
    launched: list[tuple[ObjectState, asyncio.Task[None]]] = []
    try:
        for item in items:
            if spread > 0:
                await _until(began + phase(item, spread), stop)
            if stop is not None and stop.is_set():
                break
            launched.append((item, asyncio.ensure_future(reconcile(item))))
        results = await asyncio.gather(*(t for _, t in launched), return_exceptions=True)
    except asyncio.CancelledError:
        for _, task in launched:
            task.cancel()
        raise
    failed = 0
    for (item, _), result in zip(launched, results, strict=True):
        if isinstance(result, asyncio.CancelledError):
            raise result
        if isinstance(result, BaseException):
            failed += 1
            meta = item.body.get("metadata") or {}
            log.warning(
                "resync of %s/%s failed: %s", meta.get("namespace"), meta.get("name"), result,
                exc_info=None if isinstance(result, KubeError) else result,
            )  # fmt: skip
    return failed


async def resync_forever(
    objects: Objects,
    reconcile: Reconcile,
    interval: float,
    stop: asyncio.Event,
    before_round: BeforeRound | None = None,
) -> None:
    """A round every `interval` seconds (the first one interval after the start: the start-up already reconciled
    everything), each SpecServe at its own phase within the interval, until `stop` is set. A round that runs
    over (more work than the slots get through in an interval) delays the next one: rounds never pile up.
    `before_round` runs first in each round (handlers read what changed since the last round there)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=interval)
    while not stop.is_set():
        began = time.monotonic()
        if before_round is not None:
            await before_round()
        await resync_round(objects, reconcile, spread=interval, stop=stop)
        await _until(began + interval, stop)


class ResyncProbe:
    """What changed since the last resync round, read with one LIST per owned kind and namespace (every object a
    SpecServe owns carries its instance label). A SpecServe whose last resync reconcile was clean (nothing
    written, nothing failed, settled) and whose objects and own resourceVersion are unchanged is skipped this round;
    every `full_every`-th round reconciles it anyway (what no resourceVersion shows: time, other kinds)."""

    def __init__(self, objects: Objects, kube: LabelledLister, full_every: int) -> None:
        self._objects, self._kube, self._full_every = objects, kube, full_every
        self._prints: dict[tuple[str, str], str] = {}
        self._probed: set[str] = set()  # namespaces read this round

    async def read(self) -> None:
        self._prints, self._probed = {}, set()
        if self._full_every <= 1:
            return
        per_namespace = Counter(state.key[0] for state in self._objects)
        for namespace, count in per_namespace.items():
            if count < 2:  # nothing to gain over the SpecServe's own reads
                continue
            rows: list[tuple[str, dict[str, Any]]] = []
            try:
                for kind in OWNED_KINDS:
                    for item in await self._kube.list_labelled(kind, namespace, LABEL_INSTANCE):
                        meta = item.get("metadata") or {}
                        rows.append((kind.kind, {"metadata": {k: meta.get(k) for k in _PRINTED}}))
            except KubeError as exc:
                log.warning("resync: could not read %s (every SpecServe there is reconciled): %s", namespace, exc)
                continue
            self._prints.update(fingerprints(rows, LABEL_INSTANCE))
            self._probed.add(namespace)

    def _print(self, item: ObjectState) -> tuple[str, str] | None:
        meta = item.body.get("metadata") or {}
        if item.key[0] not in self._probed:
            return None
        return self._prints.get(item.key, ""), str(meta.get("resourceVersion"))

    def unchanged(self, item: ObjectState) -> bool:
        now, clean = self._print(item), item.clean
        if now is None or clean is None or clean[0] != now or clean[1] + 1 >= self._full_every:
            return False
        item.clean = (now, clean[1] + 1)
        return True

    def reconciled(self, item: ObjectState, outcome: Outcome | None) -> None:
        now = self._print(item)
        item.clean = (now, 0) if now is not None and outcome is not None and _clean(outcome) else None


_PRINTED = ("name", "namespace", "labels", "resourceVersion", "ownerReferences")


def _clean(outcome: Outcome) -> bool:
    """Nothing to do and nothing pending: the reconcile wrote nothing, nothing failed, the rollout is settled."""
    if outcome.applied or outcome.pruned or outcome.status_written or outcome.invalid or outcome.warnings:
        return False
    if outcome.held or outcome.status is None:
        return False
    # Not Ready can be clean too (a Gateway that has not accepted the route yet): what would change that changes
    # a resourceVersion. A failure (Degraded) is retried every round: a refused write may pass the next time.
    conds = {c.type: c.status for c in outcome.status.conditions}
    return (conds.get(PROGRESSING), conds.get(DEGRADED)) == (ConditionStatus.FALSE, ConditionStatus.FALSE)


# ------------------------------------------------------------------------------- what the watch did not deliver


def _generation(body: Mapping[str, Any]) -> int:
    return int((body.get("metadata") or {}).get("generation") or 0)


def behind(held: Mapping[str, Any], listed: Mapping[str, Any]) -> bool:
    """Whether a LIST's body of a SpecServe carries a spec change the held body (the watch's) lacks: a higher
    generation, not from an older resourceVersion. A status write does not bump the generation: the watch's usual
    lag behind our own status writes is no sign."""
    return _generation(listed) > _generation(held) and not older(listed, held)


async def catch_up(objects: Objects, kube: LabelledLister, namespaces: Sequence[str]) -> list[ObjectState]:
    """One LIST of SpecServes (per watched namespace; every namespace when none are named): each held SpecServe
    whose listed spec is newer than the one the watch delivered takes the listed body, so this round's reconcile
    acts on it; returns those. The watch can stop delivering one object's events while its stream stays open
    (after an etcd outage, once in four runs of the cluster tier: docs/fault-tolerance.md), and the resync
    reconciles from the watch's bodies: without this a spec change could wait for the watch's server timeout."""
    caught: list[ObjectState] = []
    for namespace in namespaces or (None,):
        try:
            listed = await kube.list_labelled(SPECSERVE, namespace, None)
        except KubeError as exc:  # the next round tries again
            log.warning("resync: could not list SpecServes to check the watch: %s", exc)
            continue
        for item in listed:
            state = objects.get(uid_of(item))
            if state is None or state.gone or not behind(state.body, item):
                continue
            log.warning(
                "the watch has not delivered %s/%s generation %d (it holds %d): reconciling from the API server's",
                *state.key, _generation(item), _generation(state.body),
            )  # fmt: skip
            state.observe({"apiVersion": SPECSERVE.api_version, "kind": SPECSERVE.kind, **item})
            caught.append(state)
    return caught

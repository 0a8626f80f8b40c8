"""kopf wiring: every change event, the resync loop and the switching loop call the same reconcile; the two
loops run beside kopf (started and stopped with the operator)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping, MutableMapping
from typing import Any, cast

import kopf

from specserve import telemetry
from specserve.api.models import GROUP, PLURAL, VERSION, ConditionStatus
from specserve.config import OperatorConfig
from specserve.finalizers import GONE
from specserve.kube.client import KubeError
from specserve.policy.switching import decide
from specserve.reconcile import Kube, Outcome, reconcile
from specserve.reconcile.rendered import forget as forget_render
from specserve.reconcile.rolls import RollBudget
from specserve.render.manifests import LABEL_INSTANCE
from specserve.resync import ResyncProbe, resync_forever
from specserve.slots import slot
from specserve.status import READY, pool_moved
from specserve.switching.loop import LoopConfig, Registry, SwitchingLoop, Tracked, older
from specserve.switching.sources import Sources

log = logging.getLogger(__name__)


def _plain(body: Mapping[str, Any]) -> dict[str, Any]:
    # kopf hands out read-only views; the API models want plain data. managedFields are a third of a SpecServe's
    # body and nothing here reads them: the copy the registry keeps of every SpecServe goes without.
    data: dict[str, Any] = json.loads(json.dumps(dict(body), default=dict))
    (data.get("metadata") or {}).pop("managedFields", None)
    return data


def _record(body: Mapping[str, Any], outcome: Outcome) -> None:
    meta = body.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    telemetry.RECONCILES.labels(ns, name, "invalid" if outcome.invalid else "ok").inc()
    for ref in outcome.applied:
        telemetry.APPLIES.labels(ns, name, ref.split("/")[0]).inc()
    for ref in outcome.pruned:
        telemetry.PRUNES.labels(ns, name, ref.split("/")[0]).inc()
    if outcome.status is not None:
        ready = any(c.type == READY and c.status == ConditionStatus.TRUE for c in outcome.status.conditions)
        telemetry.READY.labels(ns, name).set(1 if ready else 0)
        if outcome.status.weights is not None:
            telemetry.SPECULATIVE_WEIGHT.labels(ns, name).set(outcome.status.weights.speculative)
        telemetry.observe_status(ns, name, outcome.status)


async def _warn(kube: Kube, body: Mapping[str, Any], reason: str, message: str) -> None:
    # Through our own client when there is one: its writes are fenced by the leader Lease (kopf's poster is not),
    # and it works outside a kopf handler too (a reconcile the switching loop triggered has no kopf event queue).
    post = getattr(kube, "post_event", None)
    if post is not None:
        await post(dict(body), reason=reason, message=message, type_="Warning")
        return
    with contextlib.suppress(LookupError):  # no client of ours (handlers called directly in tests)
        kopf.warn(kopf.Body(cast(kopf.RawBody, dict(body))), reason=reason, message=message)


QUEUED = "specserve.queued"  # per-object memo: an urgent reconcile is waiting for the object's lock


def register(registry: kopf.OperatorRegistry, config: OperatorConfig) -> None:  # noqa: PLR0915 (one wiring)
    resource = (GROUP, VERSION, PLURAL)
    tracked = Registry()  # the latest body of every SpecServe, for the switching loop and the reconcile
    rolls = RollBudget(config.max_concurrent_rolls)  # pools rolling a template change, across the cluster
    wakeups: set[asyncio.Task[None]] = set()  # reconciles of SpecServes a freed roll slot lets go on

    async def reconcile_latest(
        body: Mapping[str, Any], memo: MutableMapping[str, Any], kube: Kube
    ) -> tuple[dict[str, Any], Outcome] | None:
        if memo.get(GONE):  # deleted (no finalizer holds it): triggers queued before must not re-create children
            return None
        # The freshest body the watch delivered (status included) beats the one this handler was handed.
        latest = tracked.get(Registry.key(body))
        plain = latest.body if latest is not None else _plain(body)
        with telemetry.RECONCILE_SECONDS.time():
            outcome = await reconcile(kube, plain, install=config.install_policy, rolls=rolls)
        # Read our own write from the server's answer, unless the watch delivered something newer meanwhile
        # (an event that arrived during the pass may be older than our write: the next pass must not see it).
        if outcome.stored is not None and latest is not None and not older(outcome.stored, latest.body):
            latest.body = _plain(outcome.stored)
        return plain, outcome

    async def wake(item: Tracked) -> None:
        try:
            await run_once(item.body, item.memo, log, urgent=False)
        except KubeError as exc:  # the next resync tries again
            log.warning("reconcile of %s/%s for a freed roll slot failed: %s", *Registry.key(item.body), exc)

    async def run_once(
        body: Mapping[str, Any], memo: MutableMapping[str, Any], logger: kopf.Logger, urgent: bool = True
    ) -> Outcome | None:
        kube: Kube = memo["kube"]
        # One reconcile per object at a time: change handlers, the resync loop and the switching loop.
        lock: asyncio.Lock = memo.setdefault("lock", asyncio.Lock())
        if urgent:
            # A trigger already queued for this object will read everything afresh when it runs (the latest body
            # from the registry, the live objects from the API): a second one would only repeat it.
            if memo.get(QUEUED):
                return None
            memo[QUEUED] = True
            try:
                await lock.acquire()
            finally:
                memo[QUEUED] = False
            try:
                # Lock first, then an urgent slot: triggers queued behind one object's reconcile hold no slot.
                async with slot(memo, urgent=True):
                    result = await reconcile_latest(body, memo, kube)
            finally:
                lock.release()
        else:
            # Background work waits for its slot holding no lock (an urgent trigger of the same object must not
            # queue behind a whole round), and skips an object that is being reconciled right now: that
            # reconcile reads the same live state, level-based.
            async with slot(memo, urgent=False):
                if lock.locked():
                    return None
                async with lock:
                    result = await reconcile_latest(body, memo, kube)
        if result is None:
            return None
        plain, outcome = result
        for owner in rolls.wake():  # a roll finished: the SpecServes waiting for its slot go on now
            waiting = tracked.get(owner)
            if waiting is not None and owner != Registry.key(plain):
                task = asyncio.create_task(wake(waiting))
                wakeups.add(task)
                task.add_done_callback(wakeups.discard)
        _record(plain, outcome)
        if outcome.newly_invalid and outcome.invalid:
            await _warn(kube, body, "InvalidSpec", outcome.invalid)
            logger.warning("spec rejected, nothing changed: %s", outcome.invalid)
        for reason, message in outcome.warnings:  # e.g. DowntimeAhead, posted before the next pass acts
            await _warn(kube, body, reason, message)
            logger.warning("%s: %s", reason, message)
        for ref in outcome.applied:
            logger.info("applied %s", ref)
        for ref in outcome.pruned:
            logger.info("pruned %s", ref)
        return outcome

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # The same credentials as specserve.kube.client: in-cluster service account or kubeconfig.
        info: kopf.ConnectionInfo | None = kopf.login_via_client(**kwargs)
        return info

    @kopf.on.resume(*resource, registry=registry)
    async def on_resume(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
        # Every existing SpecServe at the operator's start: background work, like a resync round.
        await run_once(body, memo, logger, urgent=False)

    @kopf.on.create(*resource, registry=registry)
    @kopf.on.update(*resource, field="spec", registry=registry)
    async def on_change(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
        await run_once(body, memo, logger)

    @kopf.on.event(*resource, registry=registry)
    async def track(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
        # Every watch event, status-only changes included; no API call, no kopf bookkeeping.
        if event.get("type") == "DELETED":
            memo[GONE] = True  # reconciles already queued behind the lock must not re-create its children
            tracked.forget(body)
            rolls.forget(Registry.key(body))
            forget_render(*Registry.key(body))
            telemetry.forget(*Registry.key(body))
        else:
            tracked.update(_plain(body), memo)

    @kopf.on.event("apps", "v1", "deployments", labels={LABEL_INSTANCE: kopf.PRESENT}, registry=registry)
    async def pool_changed(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        # A pool's readiness moved, or the pool was deleted: reconcile its owner now, not at the next resync, so
        # traffic leaves a pool that lost its last Ready replica (or its Deployment) at once, a deleted pool is
        # re-created, and a rollout takes its next step as soon as a pool is Ready. The pools of a deleted
        # SpecServe go with it (garbage collection): its owner is no longer tracked, or is being deleted.
        meta = body.get("metadata") or {}
        owner = next((r for r in meta.get("ownerReferences") or [] if r.get("kind") == "SpecServe"), None)
        item = tracked.get((str(meta.get("namespace", "")), str(owner["name"]))) if owner else None
        if item is None or owner is None:
            return
        # A listing (the operator's start, a re-list after a watch gap) reports every pool: only those that moved
        # since the status recorded them need a reconcile (at start every SpecServe gets one anyway, on.resume).
        recorded = (item.body.get("status") or {}).get("pools") or []
        if event.get("type") is None and not pool_moved(recorded, body):
            return
        owner_meta = item.body.get("metadata") or {}
        if owner_meta.get("uid") == owner.get("uid") and not owner_meta.get("deletionTimestamp"):
            await run_once(item.body, item.memo, log)

    @kopf.on.startup(registry=registry)
    async def start_loops(memo: kopf.Memo, **_: Any) -> None:
        sources = Sources()

        async def trigger(item: Tracked) -> None:
            await run_once(item.body, item.memo, log)  # the switching loop's decision: urgent

        probe = ResyncProbe(tracked, memo["kube"], config.full_resync_every)

        async def resync(item: Tracked) -> None:
            # A SpecServe left clean by its last resync, with nothing it owns changed since, is not reconciled
            # again (at most full_resync_every - 1 rounds in a row): a round costs one LIST per kind and
            # namespace instead of seven LISTs per SpecServe.
            if probe.unchanged(item):
                return
            outcome = await run_once(item.body, item.memo, log, urgent=False)
            probe.reconciled(item, outcome)

        loop = SwitchingLoop(
            tracked, memo["kube"], sources, decide, trigger, LoopConfig(prometheus_url=config.prometheus_url)
        )
        stop = asyncio.Event()
        switching = asyncio.create_task(loop.run(stop), name="specserve switching")
        resyncing = asyncio.create_task(
            resync_forever(tracked, resync, config.resync_seconds, stop, before_round=probe.read), name="resync"
        )
        memo["loops"] = (stop, switching, resyncing, sources)

    @kopf.on.cleanup(registry=registry)
    async def stop_loops(memo: kopf.Memo, **_: Any) -> None:
        stop, switching, resync, sources = memo.get("loops", (None, None, None, None))
        if stop is None:
            return
        stop.set()  # the switching loop finishes the evaluation it is in
        resync.cancel()  # a round can hold hundreds of queued reconciles: the next start repairs what it missed
        for task in (switching, resync):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await sources.close()

"""What the kopf handlers delegate to: one reconcile per object at a time, in its lane; what a pass did recorded,
logged and posted as events; the switching and resync loops started and stopped with the operator.

Every change event, the resync loop and the switching loop call the same `Dispatcher.run_once`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Coroutine, Mapping, MutableMapping
from typing import Any, cast

import kopf

from specserve import telemetry
from specserve.api import reasons
from specserve.config import OperatorConfig
from specserve.finalizers import GONE
from specserve.kube.client import KubeClient, KubeError
from specserve.kube.kinds import Ref
from specserve.policy.switching import decide
from specserve.pool_state import read_pool
from specserve.reconcile import Kube, Outcome, reconcile
from specserve.reconcile.failover import fail_over, split
from specserve.reconcile.rendered import forget as forget_render
from specserve.reconcile.rolls import RollBudget
from specserve.resync import ResyncProbe, resync_forever
from specserve.slots import slot
from specserve.status import pool_moved
from specserve.switching.loop import LoopConfig, Registry, SwitchingLoop, Tracked, older
from specserve.switching.sources import Sources

log = logging.getLogger(__name__)

QUEUED = "specserve.queued"  # per-object memo: an urgent reconcile is waiting for the object's lock
PASS = "specserve.pass"  # per-object memo: the task of the reconcile pass holding the object's lock
FAILOVER = "specserve.failover"  # per-object memo: one failover fast path at a time
BACKGROUND_QUEUED = "specserve.background_queued"  # per-object memo: a background reconcile waits for a slot
LOOPS = "loops"  # kopf's memo: the running loops, for stop()


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
        telemetry.APPLIES.labels(ns, name, Ref(ref).kind).inc()
    for ref in outcome.pruned:
        telemetry.PRUNES.labels(ns, name, Ref(ref).kind).inc()
    # The status-derived gauges are computed at scrape time from the cache (telemetry.SpecServeCollector).


async def _warn(kube: Kube, body: Mapping[str, Any], reason: str, message: str) -> None:
    # Through our own client when there is one: its writes are fenced by the leader Lease (kopf's poster is not),
    # and it works outside a kopf handler too (a reconcile the switching loop triggered has no kopf event queue).
    post = getattr(kube, "post_event", None)
    if post is not None:
        await post(dict(body), reason=reason, message=message, type_="Warning")
        return
    with contextlib.suppress(LookupError):  # no client of ours (handlers called directly in tests)
        kopf.warn(kopf.Body(cast(kopf.RawBody, dict(body))), reason=reason, message=message)


class Dispatcher:
    """The operator's shared state between handlers: the latest body of every SpecServe, the roll budget."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self.tracked = Registry()  # the latest body of every SpecServe, for the switching loop and the reconcile
        # What the metrics endpoint serves per SpecServe, at each scrape: the SpecServes in this cache.
        self.cached_bodies = lambda: [item.body for item in list(self.tracked.items.values())]
        self.rolls = RollBudget(config.max_concurrent_rolls)  # pools rolling a template change, cluster-wide
        # Reconciles in the background: SpecServes a freed roll slot lets go on, owners of pools that changed.
        self._wakeups: set[asyncio.Task[None]] = set()
        # (namespace, SpecServe) -> pool -> has a Ready replica, as the Deployment watch last delivered it: what the
        # failover fast path reads instead of listing.
        self.pools: dict[tuple[str, str], dict[str, bool]] = {}
        self._lane: KubeClient | None = None  # the failover's own connections (KubeClient.lane), while running

    async def _reconcile_latest(
        self, body: Mapping[str, Any], memo: MutableMapping[str, Any], kube: Kube
    ) -> tuple[dict[str, Any], Outcome] | None:
        if memo.get(GONE):  # deleted (no finalizer holds it): triggers queued before must not re-create children
            return None
        # The freshest body the watch delivered (status included) beats the one this handler was handed.
        latest = self.tracked.get(Registry.key(body))
        plain = latest.body if latest is not None else _plain(body)
        with telemetry.RECONCILE_SECONDS.time():
            outcome = await reconcile(kube, plain, install=self.config.installation, rolls=self.rolls)
        # Read our own write from the server's answer, unless the watch delivered something newer meanwhile
        # (an event that arrived during the pass may be older than our write: the next pass must not see it).
        if outcome.stored is not None and latest is not None and not older(outcome.stored, latest.body):
            latest.body = _plain(outcome.stored)
        return plain, outcome

    async def _pass(
        self, body: Mapping[str, Any], memo: MutableMapping[str, Any], kube: Kube
    ) -> tuple[dict[str, Any], Outcome] | None:
        """One pass, in a task of its own that a failover may cancel (None: superseded). The pass is level-based:
        the urgent pass the failover queues reads everything afresh, so nothing a cancelled pass left half done
        is lost; what must not happen is that a pass that read the world before the failover writes after it
        (its route would put the weight back on the dead pool, its roll could take the pool that just got it)."""
        task = asyncio.ensure_future(self._reconcile_latest(body, memo, kube))
        memo[PASS] = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise  # we were cancelled ourselves (the operator stops), not superseded
            return None
        finally:
            if memo.get(PASS) is task:
                del memo[PASS]

    @staticmethod
    def _supersede(memo: MutableMapping[str, Any]) -> None:
        task = memo.get(PASS)
        if task is not None and not task.done():
            log.info("a failover supersedes the reconcile in progress")
            task.cancel()

    async def _fail_over(self, item: Tracked) -> None:
        """Traffic first: weight off the owner's pools the watch reports without a Ready replica, onto its Ready
        pools, now: not behind the object's lock nor a reconcile slot (a pass in progress may take many slow
        round trips), with no LIST. The urgent full pass follows."""
        key = Registry.key(item.body)
        pools = dict(self.pools.get(key) or {})  # as the watch reports them now (later events change the registry's)
        lock: asyncio.Lock = item.memo.setdefault(FAILOVER, asyncio.Lock())
        async with lock:
            try:
                kube = self._lane or item.memo["kube"]
                moved = await fail_over(kube, item.body, pools, lambda: self._supersede(item.memo))
            except KubeError as exc:  # the full pass that follows tries again
                log.warning("failover of %s/%s failed: %s", *key, exc)
                return
        if moved is not None:
            log.info("failover of %s/%s: route weights now %s", *key, dict(moved))

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._wakeups.add(task)
        task.add_done_callback(self._wakeups.discard)

    async def _reconcile_for_pool(self, item: Tracked) -> None:
        try:
            await self.run_once(item.body, item.memo, log)
        except KubeError as exc:  # the next pool event or resync tries again
            log.warning("reconcile of %s/%s for a pool change failed: %s", *Registry.key(item.body), exc)

    async def _wake(self, item: Tracked) -> None:
        try:
            await self.run_once(item.body, item.memo, log, urgent=False)
        except KubeError as exc:  # the next resync tries again
            log.warning("reconcile of %s/%s for a freed roll slot failed: %s", *Registry.key(item.body), exc)

    async def run_once(
        self, body: Mapping[str, Any], memo: MutableMapping[str, Any], logger: kopf.Logger, urgent: bool = True
    ) -> Outcome | None:
        """Reconcile one SpecServe once, one pass per object at a time. `urgent` (a change, a trigger): wait for
        the object's lock, then an urgent slot; a queued urgent trigger makes a second one redundant. Background
        work (resync, freed roll slots) waits for a slot without the lock and skips an object being reconciled
        or already queued. None: skipped."""
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
                    result = await self._pass(body, memo, kube)
            finally:
                lock.release()
        else:
            # Background work waits for its slot holding no lock (an urgent trigger of the same object must not
            # queue behind a whole round), and skips an object that is being reconciled right now: that
            # reconcile reads the same live state, level-based. Likewise an object that already waits for a
            # background slot: at start-up with hundreds of SpecServes the first resync round comes while the
            # resume reconciles still queue, and would queue a second one for each (twice the work, all of it
            # ahead of what the first round would find clean).
            if memo.get(BACKGROUND_QUEUED):
                return None
            memo[BACKGROUND_QUEUED] = True
            try:
                async with slot(memo, urgent=False):
                    memo[BACKGROUND_QUEUED] = False
                    if lock.locked():
                        return None
                    async with lock:
                        result = await self._pass(body, memo, kube)
            finally:
                memo[BACKGROUND_QUEUED] = False
        if result is None:
            return None
        plain, outcome = result
        for owner in self.rolls.wake():  # a roll finished: the SpecServes waiting for its slot go on now
            waiting = self.tracked.get(owner)
            if waiting is not None and owner != Registry.key(plain):
                self._background(self._wake(waiting))
        _record(plain, outcome)
        if outcome.newly_invalid and outcome.invalid:
            await _warn(kube, body, reasons.INVALID_SPEC, outcome.invalid)
            logger.warning("spec rejected, nothing changed: %s", outcome.invalid)
        for reason, message in outcome.warnings:  # e.g. DowntimeAhead, posted before the next pass acts
            await _warn(kube, body, reason, message)
            logger.warning("%s: %s", reason, message)
        for ref in outcome.applied:
            logger.info("applied %s", ref)
        for ref in outcome.pruned:
            logger.info("pruned %s", ref)
        return outcome

    def track(self, event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo) -> None:
        """Every watch event of a SpecServe, status-only changes included; no API call, no kopf bookkeeping."""
        if event.get("type") == "DELETED":
            memo[GONE] = True  # reconciles already queued behind the lock must not re-create its children
            self.tracked.forget(body)
            self.pools.pop(Registry.key(body), None)
            self.rolls.forget(Registry.key(body))
            forget_render(*Registry.key(body))
            telemetry.forget(*Registry.key(body))
        else:
            first = self.tracked.get(Registry.key(body)) is None
            self.tracked.update(_plain(body), memo)
            item = self.tracked.get(Registry.key(body))
            # Its pools were listed before it (a leader that just started): one dead beside one Ready may be a
            # loss nobody has acted on yet (pool_changed).
            deleting = (body.get("metadata") or {}).get("deletionTimestamp")
            if first and item is not None and not deleting and split(self.pools.get(Registry.key(body), {})):
                self._background(self._fail_over(item))

    async def pool_changed(self, event: kopf.RawEvent, body: kopf.Body) -> None:
        """A pool's readiness moved, or the pool was deleted: reconcile its owner now, not at the next resync, so
        traffic leaves a pool that lost its last Ready replica (or its Deployment) at once, a deleted pool is
        re-created, and a rollout takes its next step as soon as a pool is Ready. The pools of a deleted
        SpecServe go with it (garbage collection): its owner is no longer tracked, or is being deleted."""
        meta = body.get("metadata") or {}
        owner = next((r for r in meta.get("ownerReferences") or [] if r.get("kind") == "SpecServe"), None)
        if owner is None:
            return
        key = (str(meta.get("namespace", "")), str(owner["name"]))
        name = str(meta.get("name", ""))
        deleted = event.get("type") == "DELETED"
        item = self.tracked.get(key)
        if item is None:
            # Not tracked (yet): a leader that just started may list the Deployments before the SpecServes. Keep
            # what it saw, so that the SpecServe's first sight can fail over (track); forget a deleted pool.
            seen = self.pools.setdefault(key, {})
            if deleted:
                seen.pop(name, None)
            else:
                seen[name] = read_pool(body).serving
            if not seen:
                self.pools.pop(key, None)
            return
        owner_meta = item.body.get("metadata") or {}
        if owner_meta.get("uid") != owner.get("uid"):
            return
        pools = self.pools.setdefault(key, {})
        known, was = name in pools, pools.get(name, False)
        pools[name] = now = not deleted and read_pool(body).serving
        lost = was and not now
        # A leader that just started (or re-listed) has no "before": the first sight of a SpecServe's pools that
        # shows one without a Ready replica beside one with may be a loss nobody has acted on yet.
        unseen_loss = not known and split(pools)
        if (lost or unseen_loss) and not owner_meta.get("deletionTimestamp") and not item.memo.get(GONE):
            await self._fail_over(item)  # before anything else, and holding nothing
        # A listing (the operator's start, a re-list after a watch gap) reports every pool: only those that moved
        # since the status recorded them need a reconcile (at start every SpecServe gets one anyway, on.resume).
        recorded = (item.body.get("status") or {}).get("pools") or []
        if event.get("type") is None and not pool_moved(recorded, body):
            return
        if not owner_meta.get("deletionTimestamp"):
            # In the background: kopf hands a Deployment's events to its handler one at a time, so a handler that
            # waited here for the owner's lock (a slow pass in progress) would hold the pool's next event, and the
            # failover it calls for, behind that whole pass.
            self._background(self._reconcile_for_pool(item))

    async def start(self, memo: kopf.Memo) -> None:
        """The switching loop and the resync loop, beside kopf; the failover's connections."""
        telemetry.COLLECTOR.serve(self.cached_bodies)
        lane = getattr(memo["kube"], "lane", None)  # a KubeClient (tests may hand in a stand-in)
        self._lane = lane() if lane is not None else None
        # Queries go only to the Prometheus URLs allowed, with the installation's credentials.
        sources = Sources(installation=self.config.installation, token_file=self.config.prometheus_token_file)

        async def trigger(item: Tracked) -> None:
            await self.run_once(item.body, item.memo, log)  # the switching loop's decision: urgent

        probe = ResyncProbe(self.tracked, memo["kube"], self.config.full_resync_every)

        async def resync(item: Tracked) -> None:
            # A SpecServe left clean by its last resync, with nothing it owns changed since, is not reconciled
            # again (at most full_resync_every - 1 rounds in a row): a round costs one LIST per kind and
            # namespace instead of seven LISTs per SpecServe.
            if probe.unchanged(item):
                return
            outcome = await self.run_once(item.body, item.memo, log, urgent=False)
            probe.reconciled(item, outcome)

        loop_config = LoopConfig(prometheus_url=self.config.prometheus_url)
        loop = SwitchingLoop(self.tracked, memo["kube"], sources, decide, trigger, loop_config)
        stop = asyncio.Event()
        switching = asyncio.create_task(loop.run(stop), name="specserve switching")
        resyncing = asyncio.create_task(
            resync_forever(self.tracked, resync, self.config.resync_seconds, stop, before_round=probe.read),
            name="resync",
        )
        memo[LOOPS] = (stop, switching, resyncing, sources)

    async def stop(self, memo: kopf.Memo) -> None:
        if telemetry.COLLECTOR.serving(self.cached_bodies):
            telemetry.COLLECTOR.serve(None)
        stop, switching, resync, sources = memo.get(LOOPS, (None, None, None, None))
        if stop is None:
            return
        stop.set()  # the switching loop finishes the evaluation it is in
        resync.cancel()  # a round can hold hundreds of queued reconciles: the next start repairs what it missed
        background = list(self._wakeups)  # reconciles for pool changes and freed roll slots: the next start repairs
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        for task in (switching, resync):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await sources.close()
        lane, self._lane = self._lane, None  # a failover from now on goes through the shared client
        if lane is not None:
            await lane.close()

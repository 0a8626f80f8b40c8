"""What the kopf handlers delegate to: one reconcile per object at a time, in its lane; what a pass did recorded,
logged and posted as events; the switching and resync loops started and stopped with the operator.

Every change event, the resync loop and the switching loop call the same `Dispatcher.run_once`. What the operator
holds of each SpecServe (its body, lock, lane flags, pass, pools) is its `ObjectState` in specserve.objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

import kopf

from specserve import telemetry
from specserve.api import reasons
from specserve.config import OperatorConfig
from specserve.kube.client import KubeError
from specserve.kube.kinds import Ref
from specserve.objects import Objects, ObjectState, uid_of
from specserve.policy.switching import decide
from specserve.pool_state import read_pool
from specserve.reconcile import Outcome, reconcile
from specserve.reconcile.failover import Lister, fail_over, split
from specserve.reconcile.rendered import forget as forget_render
from specserve.reconcile.rolls import RollBudget
from specserve.resync import ResyncProbe, catch_up, resync_forever
from specserve.slots import slot
from specserve.status import pool_moved
from specserve.switching.loop import LoopConfig, LoopKube, SwitchingLoop
from specserve.switching.sources import Sources

log = logging.getLogger(__name__)
KUBE = "kube"  # kopf's memo: the operator's client (commands.run injects it with the reconcile slots)


class OperatorKube(Lister, LoopKube, Protocol):
    """The operator's client as its parts use it (specserve.kube.client.KubeClient): the reconcile's calls and
    the failover's LIST, the switching loop's, Events, and a lane of connections of its own for the failover."""

    def lane(self) -> OperatorKube: ...
    async def close(self) -> None: ...


@dataclass(frozen=True)
class _Loops:
    stop: asyncio.Event
    switching: asyncio.Task[None]
    resync: asyncio.Task[None]
    sources: Sources


def _record(body: Mapping[str, Any], outcome: Outcome) -> None:
    meta = body.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    telemetry.RECONCILES.labels(ns, name, "invalid" if outcome.invalid else "ok").inc()
    for ref in outcome.applied:
        telemetry.APPLIES.labels(ns, name, Ref(ref).kind).inc()
    for ref in outcome.pruned:
        telemetry.PRUNES.labels(ns, name, Ref(ref).kind).inc()
    # The status-derived gauges are computed at scrape time from the cache (telemetry.SpecServeCollector).


async def _warn(kube: OperatorKube, body: Mapping[str, Any], reason: str, message: str) -> None:
    # Through our own client: its writes are fenced by the leader Lease (kopf's poster is not), and it works
    # outside a kopf handler too (a reconcile the switching loop triggered has no kopf event queue).
    await kube.post_event(dict(body), reason=reason, message=message, type_="Warning")


class Dispatcher:
    """Routing only: which SpecServe a handler's event, a loop's decision or a freed roll slot concerns, and the
    pass that follows; what the operator holds of each SpecServe is in `objects` (specserve.objects)."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self.rolls = RollBudget(config.max_concurrent_rolls)  # pools rolling a template change, cluster-wide
        # Deletion is one forget: the object's state, and its entries in the tables that go by name.
        forgetting = (lambda ns, name: self.rolls.forget((ns, name)), forget_render, telemetry.forget)
        self.objects = Objects(forgetting)
        # What the metrics endpoint serves per SpecServe, at each scrape: the SpecServes held (one bound method, so
        # that stop() recognises it).
        self.cached_bodies = self.objects.bodies
        # Reconciles in the background: SpecServes a freed roll slot lets go on, owners of pools that changed.
        self._wakeups: set[asyncio.Task[None]] = set()
        self._shared: Mapping[str, Any] = {}  # kopf's memo at start: the injected shared objects (client, slots)
        self._lane: OperatorKube | None = None  # the failover's own connections (KubeClient.lane), while running
        self._loops: _Loops | None = None

    def _kube(self, shared: Mapping[str, Any] | None = None) -> OperatorKube:
        return cast(OperatorKube, (self._shared if shared is None else shared)[KUBE])

    async def _reconcile_latest(self, state: ObjectState, kube: OperatorKube) -> tuple[dict[str, Any], Outcome] | None:
        if state.gone:  # deleted (no finalizer holds it): triggers queued before must not re-create children
            return None
        # The freshest body the watch delivered (status included), not the one a handler was handed.
        plain = state.body
        with telemetry.RECONCILE_SECONDS.time():
            outcome = await reconcile(kube, plain, install=self.config.installation, rolls=self.rolls)
        # Read our own write from the server's answer, unless the watch delivered something newer meanwhile
        # (an event that arrived during the pass may be older than our write: the next pass must not see it).
        if outcome.stored is not None:
            state.observe(outcome.stored)
        return plain, outcome

    async def _pass(self, state: ObjectState, kube: OperatorKube) -> tuple[dict[str, Any], Outcome] | None:
        """One pass, in a task of its own that a failover may cancel (None: superseded). The pass is level-based:
        the urgent pass the failover queues reads everything afresh, so nothing a cancelled pass left half done
        is lost; what must not happen is that a pass that read the world before the failover writes after it
        (its route would put the weight back on the dead pool, its roll could take the pool that just got it)."""
        task = asyncio.ensure_future(self._reconcile_latest(state, kube))
        state.running = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not task.cancelled() or (current is not None and current.cancelling()):
                raise  # we were cancelled ourselves (the operator stops), not superseded
            return None
        finally:
            if state.running is task:
                state.running = None

    @staticmethod
    def _supersede(state: ObjectState) -> None:
        task = state.running
        if task is not None and not task.done():
            log.info("a failover supersedes the reconcile in progress")
            task.cancel()

    async def _fail_over(self, state: ObjectState) -> None:
        """Traffic first: weight off the owner's pools the watch reports without a Ready replica, onto its Ready
        pools, now: not behind the object's lock nor a reconcile slot (a pass in progress may take many slow
        round trips), with no LIST. The urgent full pass follows."""
        pools = dict(state.pools)  # as the watch reports them now (later events change the state's)
        async with state.failover:
            try:
                kube = self._lane or self._kube()
                moved = await fail_over(kube, state.body, pools, lambda: self._supersede(state))
            except KubeError as exc:  # the full pass that follows tries again
                log.warning("failover of %s/%s failed: %s", *state.key, exc)
                return
        if moved is not None:
            log.info("failover of %s/%s: route weights now %s", *state.key, dict(moved))

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._wakeups.add(task)
        task.add_done_callback(self._wakeups.discard)

    async def _reconcile_for_pool(self, state: ObjectState) -> None:
        try:
            await self.run_once(state, log)
        except KubeError as exc:  # the next pool event or resync tries again
            log.warning("reconcile of %s/%s for a pool change failed: %s", *state.key, exc)

    async def _wake(self, state: ObjectState) -> None:
        try:
            await self.run_once(state, log, urgent=False)
        except KubeError as exc:  # the next resync tries again
            log.warning("reconcile of %s/%s for a freed roll slot failed: %s", *state.key, exc)

    async def handle(
        self, body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, urgent: bool = True
    ) -> Outcome | None:
        """A kopf change handler's reconcile of its object (see run_once), with the shared objects of the memo
        kopf handed it (each object's memo is a shallow copy of the one commands.run injects)."""
        return await self.run_once(self.objects.entry(body), logger, urgent, shared=memo)

    async def run_once(
        self, state: ObjectState, logger: kopf.Logger, urgent: bool = True, shared: Mapping[str, Any] | None = None
    ) -> Outcome | None:
        """Reconcile one SpecServe once, one pass per object at a time. `urgent` (a change, a trigger): wait for
        the object's lock, then an urgent slot; a queued urgent trigger makes a second one redundant. Background
        work (resync, freed roll slots) waits for a slot without the lock and skips an object being reconciled
        or already queued. None: skipped. `shared`: the client and the slots (default: those given at start)."""
        shared = self._shared if shared is None else shared
        kube = self._kube(shared)
        # One reconcile per object at a time: change handlers, the resync loop and the switching loop.
        lock = state.lock
        if urgent:
            # A trigger already queued for this object will read everything afresh when it runs (the latest body
            # from the registry, the live objects from the API): a second one would only repeat it.
            if state.queued:
                return None
            state.queued = True
            try:
                await lock.acquire()
            finally:
                state.queued = False
            try:
                # Lock first, then an urgent slot: triggers queued behind one object's reconcile hold no slot.
                async with slot(shared, urgent=True):
                    result = await self._pass(state, kube)
            finally:
                lock.release()
        else:
            # Background work waits for its slot holding no lock (an urgent trigger of the same object must not
            # queue behind a whole round), and skips an object that is being reconciled right now: that
            # reconcile reads the same live state, level-based. Likewise an object that already waits for a
            # background slot: at start-up with hundreds of SpecServes the first resync round comes while the
            # resume reconciles still queue, and would queue a second one for each (twice the work, all of it
            # ahead of what the first round would find clean).
            if state.background_queued:
                return None
            state.background_queued = True
            try:
                async with slot(shared, urgent=False):
                    state.background_queued = False
                    if lock.locked():
                        return None
                    async with lock:
                        result = await self._pass(state, kube)
            finally:
                state.background_queued = False
        if result is None:
            return None
        plain, outcome = result
        for owner in self.rolls.wake():  # a roll finished: the SpecServes waiting for its slot go on now
            waiting = self.objects.named(owner)
            if waiting is not None and owner != state.key:
                self._background(self._wake(waiting))
        _record(plain, outcome)
        if outcome.newly_invalid and outcome.invalid:
            await _warn(kube, plain, reasons.INVALID_SPEC, outcome.invalid)
            logger.warning("spec rejected, nothing changed: %s", outcome.invalid)
        for reason, message in outcome.warnings:  # e.g. DowntimeAhead, posted before the next pass acts
            await _warn(kube, plain, reason, message)
            logger.warning("%s: %s", reason, message)
        for ref in outcome.applied:
            logger.info("applied %s", ref)
        for ref in outcome.pruned:
            logger.info("pruned %s", ref)
        return outcome

    def track(self, event: kopf.RawEvent, body: kopf.Body) -> None:
        """Every watch event of a SpecServe, status-only changes included; no API call, no kopf bookkeeping."""
        if event.get("type") == "DELETED":
            self.objects.forget(uid_of(body))  # reconciles already queued behind its lock see it gone
            return
        first = self.objects.get(uid_of(body)) is None
        state = self.objects.observe(body)
        # Its pools were listed before it (a leader that just started): one dead beside one Ready may be a
        # loss nobody has acted on yet (pool_changed).
        deleting = (body.get("metadata") or {}).get("deletionTimestamp")
        if first and not deleting and split(state.pools):
            self._background(self._fail_over(state))

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
        owner_uid = uid_of({"metadata": {"namespace": key[0], "name": key[1], "uid": owner.get("uid")}})
        name = str(meta.get("name", ""))
        deleted = event.get("type") == "DELETED"
        state = self.objects.get(owner_uid)
        if state is None:
            if self.objects.named(key) is not None:
                return  # a pool of an earlier SpecServe of that name
            # Not tracked (yet): a leader that just started may list the Deployments before the SpecServes. Keep
            # what it saw, so that the SpecServe's first sight can fail over (track); forget a deleted pool.
            seen = self.objects.early_pools(owner_uid)
            if deleted:
                seen.pop(name, None)
            else:
                seen[name] = read_pool(body).serving
            if not seen:
                self.objects.drop_early_pools(owner_uid)
            return
        owner_meta = state.body.get("metadata") or {}
        pools = state.pools
        known, was = name in pools, pools.get(name, False)
        pools[name] = now = not deleted and read_pool(body).serving
        lost = was and not now
        # A leader that just started (or re-listed) has no "before": the first sight of a SpecServe's pools that
        # shows one without a Ready replica beside one with may be a loss nobody has acted on yet.
        unseen_loss = not known and split(pools)
        if (lost or unseen_loss) and not owner_meta.get("deletionTimestamp") and not state.gone:
            await self._fail_over(state)  # before anything else, and holding nothing
        # A listing (the operator's start, a re-list after a watch gap) reports every pool: only those that moved
        # since the status recorded them need a reconcile (at start every SpecServe gets one anyway, on.resume).
        recorded = (state.body.get("status") or {}).get("pools") or []
        if event.get("type") is None and not pool_moved(recorded, body):
            return
        if not owner_meta.get("deletionTimestamp"):
            # In the background: kopf hands a Deployment's events to its handler one at a time, so a handler that
            # waited here for the owner's lock (a slow pass in progress) would hold the pool's next event, and the
            # failover it calls for, behind that whole pass.
            self._background(self._reconcile_for_pool(state))

    async def start(self, memo: kopf.Memo) -> None:
        """The switching loop and the resync loop, beside kopf; the failover's connections."""
        self._shared = memo
        kube = self._kube()
        telemetry.COLLECTOR.serve(self.cached_bodies)
        self._lane = kube.lane()
        # Queries go only to the Prometheus URLs allowed, with the installation's credentials.
        sources = Sources(installation=self.config.installation, token_file=self.config.prometheus_token_file)

        async def trigger(state: ObjectState) -> None:
            await self.run_once(state, log)  # the switching loop's decision: urgent

        probe = ResyncProbe(self.objects, kube, self.config.full_resync_every)

        async def resync(state: ObjectState) -> None:
            # A SpecServe left clean by its last resync, with nothing it owns changed since, is not reconciled
            # again (at most full_resync_every - 1 rounds in a row): a round costs one LIST per kind and
            # namespace instead of seven LISTs per SpecServe.
            if probe.unchanged(state):
                return
            outcome = await self.run_once(state, log, urgent=False)
            probe.reconciled(state, outcome)

        async def before_round() -> None:
            await probe.read()
            # The watch's view checked against a LIST: a spec change it never delivered is reconciled this round.
            for state in await catch_up(self.objects, kube, self.config.namespaces):
                telemetry.WATCH_STALE.labels(*state.key).inc()

        loop_config = LoopConfig(prometheus_url=self.config.prometheus_url)
        loop = SwitchingLoop(self.objects, kube, sources, decide, trigger, loop_config)
        stop = asyncio.Event()
        switching = asyncio.create_task(loop.run(stop), name="specserve switching")
        resyncing = asyncio.create_task(
            resync_forever(self.objects, resync, self.config.resync_seconds, stop, before_round=before_round),
            name="resync",
        )
        self._loops = _Loops(stop, switching, resyncing, sources)

    async def stop(self) -> None:
        if telemetry.COLLECTOR.serving(self.cached_bodies):
            telemetry.COLLECTOR.serve(None)
        loops, self._loops = self._loops, None
        if loops is None:
            return
        loops.stop.set()  # the switching loop finishes the evaluation it is in
        loops.resync.cancel()  # a round can hold hundreds of queued reconciles: the next start repairs what it missed
        background = list(self._wakeups)  # reconciles for pool changes and freed roll slots: the next start repairs
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        for task in (loops.switching, loops.resync):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await loops.sources.close()
        lane, self._lane = self._lane, None  # a failover from now on goes through the shared client
        if lane is not None:
            await lane.close()

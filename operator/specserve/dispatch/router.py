"""Routing only: which SpecServe a handler's event, a pool Deployment's event or a loop's decision concerns, and
what follows (a pass in its lane, the failover fast path, the loops started and stopped). What the operator holds
of each SpecServe (its body, lock, lane flags, pass, pools) is its `ObjectState` in specserve.objects; the jobs
are lanes.py, failover.py, loops.py and report.py beside this module."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from specserve import telemetry
from specserve.config import OperatorConfig
from specserve.dispatch.background import Background
from specserve.dispatch.failover import Failover, deleting
from specserve.dispatch.lanes import Lanes
from specserve.dispatch.loops import Loops
from specserve.kube.client import KubeError
from specserve.objects import Objects, ObjectState, uid_of
from specserve.pool_state import read_pool
from specserve.reconcile import Outcome
from specserve.reconcile.rendered import forget as forget_render
from specserve.reconcile.rolls import RollBudget
from specserve.status import pool_moved

log = logging.getLogger(__name__)


class Dispatcher:
    """What the kopf handlers delegate to, one method per handler (specserve.handlers)."""

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
        self.background = Background()
        self.lanes = Lanes(self.objects, self.rolls, self.background, config.installation)
        self.failover = Failover(self.lanes.kube)
        self._loops: Loops | None = None

    async def run_once(
        self, state: ObjectState, logger: kopf.Logger, urgent: bool = True, shared: Mapping[str, Any] | None = None
    ) -> Outcome | None:
        """One pass over one SpecServe in its lane (Lanes.run_once)."""
        return await self.lanes.run_once(state, logger, urgent, shared)

    async def handle(
        self, body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, urgent: bool = True
    ) -> Outcome | None:
        """A kopf change handler's reconcile of its object (see run_once), with the shared objects of the memo
        kopf handed it (each object's memo is a shallow copy of the one commands.supervisor injects)."""
        return await self.run_once(self.objects.entry(body), logger, urgent, shared=memo)

    def track(self, event: kopf.RawEvent, body: kopf.Body) -> None:
        """Every watch event of a SpecServe, status-only changes included; no API call, no kopf bookkeeping."""
        if event.get("type") == "DELETED":
            self.objects.forget(uid_of(body))  # reconciles already queued behind its lock see it gone
            return
        first = self.objects.get(uid_of(body)) is None
        state = self.objects.observe(body)
        if first and self.failover.due_at_first_sight(state):
            self.background.start(self.failover.run(state))

    async def _reconcile_for_pool(self, state: ObjectState) -> None:
        try:
            await self.run_once(state, log)
        except KubeError as exc:  # the next pool event or resync tries again
            log.warning("reconcile of %s/%s for a pool change failed: %s", *state.key, exc)

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
        # Before anything else, and holding nothing.
        await self.failover.pool_seen(state, name, not deleted and read_pool(body).serving)
        # A listing (the operator's start, a re-list after a watch gap) reports every pool: only those that moved
        # since the status recorded them need a reconcile (at start every SpecServe gets one anyway, on.resume).
        recorded = (state.body.get("status") or {}).get("pools") or []
        if event.get("type") is None and not pool_moved(recorded, body):
            return
        if not deleting(state.body):
            # In the background: kopf hands a Deployment's events to its handler one at a time, so a handler that
            # waited here for the owner's lock (a slow pass in progress) would hold the pool's next event, and the
            # failover it calls for, behind that whole pass.
            self.background.start(self._reconcile_for_pool(state))

    async def start(self, memo: kopf.Memo) -> None:
        """The switching loop and the resync loop, beside kopf; the failover's connections."""
        self.lanes.shared = memo
        kube = self.lanes.kube()
        telemetry.COLLECTOR.serve(self.cached_bodies)
        self.failover.open(kube)

        async def run_once(state: ObjectState, urgent: bool) -> Outcome | None:
            return await self.run_once(state, log, urgent)

        self._loops = Loops.start(self.objects, kube, self.config, run_once)

    async def stop(self) -> None:
        if telemetry.COLLECTOR.serving(self.cached_bodies):
            telemetry.COLLECTOR.serve(None)
        loops, self._loops = self._loops, None
        if loops is None:
            return
        loops.halt()
        await self.background.cancel()  # reconciles for pool changes and freed roll slots: the next start repairs
        await loops.join()
        await self.failover.close()

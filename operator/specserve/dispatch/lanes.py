"""The lanes: one reconcile pass per SpecServe at a time, urgent (a change, a trigger) or background (resync,
start-up, a freed roll slot), each in a reconcile slot (specserve.slots); the pass in a task of its own that a
failover may supersede; what it did reported; the SpecServes its freed roll slots let go on woken."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import kopf

from specserve import telemetry
from specserve.api.install_policy import InstallPolicy
from specserve.dispatch.background import Background
from specserve.dispatch.operator_kube import OperatorKube, kube_of
from specserve.dispatch.report import report
from specserve.kube.client import KubeError
from specserve.objects import Objects, ObjectState
from specserve.reconcile import Outcome, reconcile
from specserve.reconcile.rolls import RollBudget
from specserve.slots import slot

log = logging.getLogger(__name__)


class Lanes:
    """`run_once` for every caller: change handlers, the Deployment watch, the resync loop, the switching loop."""

    def __init__(self, objects: Objects, rolls: RollBudget, background: Background, install: InstallPolicy) -> None:
        self.objects = objects
        self.rolls = rolls
        self.background = background
        self.install = install
        self.shared: Mapping[str, Any] = {}  # kopf's memo at start: the injected shared objects (client, slots)

    def kube(self) -> OperatorKube:
        return kube_of(self.shared)

    async def _reconcile_latest(self, state: ObjectState, kube: OperatorKube) -> tuple[dict[str, Any], Outcome] | None:
        if state.gone:  # deleted (no finalizer holds it): triggers queued before must not re-create children
            return None
        # The freshest body the watch delivered (status included), not the one a handler was handed.
        plain = state.body
        with telemetry.RECONCILE_SECONDS.time():
            outcome = await reconcile(kube, plain, install=self.install, rolls=self.rolls)
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

    async def _wake(self, state: ObjectState) -> None:
        try:
            await self.run_once(state, log, urgent=False)
        except KubeError as exc:  # the next resync tries again
            log.warning("reconcile of %s/%s for a freed roll slot failed: %s", *state.key, exc)

    async def run_once(
        self, state: ObjectState, logger: kopf.Logger, urgent: bool = True, shared: Mapping[str, Any] | None = None
    ) -> Outcome | None:
        """Reconcile one SpecServe once, one pass per object at a time. `urgent` (a change, a trigger): wait for
        the object's lock, then an urgent slot; a queued urgent trigger makes a second one redundant. Background
        work (resync, freed roll slots) waits for a slot without the lock and skips an object being reconciled
        or already queued. None: skipped. `shared`: the client and the slots (default: those given at start)."""
        shared = self.shared if shared is None else shared
        kube = kube_of(shared)
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
                self.background.start(self._wake(waiting))
        await report(kube, plain, outcome, logger)
        return outcome

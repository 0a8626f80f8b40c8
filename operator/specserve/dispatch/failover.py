"""When the failover fast path (specserve.reconcile.failover) runs, and on which connections: a pool the watch
reports without a Ready replica, now, not behind the object's lock nor a reconcile slot, and the reconcile in
progress superseded (cancelled) before the route write. The urgent full pass that follows is the dispatcher's."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from specserve.dispatch.operator_kube import OperatorKube
from specserve.kube.client import KubeError
from specserve.objects import ObjectState
from specserve.reconcile.failover import fail_over, split

log = logging.getLogger(__name__)


def deleting(body: Mapping[str, Any]) -> bool:
    return bool((body.get("metadata") or {}).get("deletionTimestamp"))


def supersede(state: ObjectState) -> None:
    """Cancel the pass in progress (Lanes sets state.running): a pass that read the world before the failover must
    not write after it."""
    task = state.running
    if task is not None and not task.done():
        log.info("a failover supersedes the reconcile in progress")
        task.cancel()


class Failover:
    """The fast path's trigger: a pool's readiness as the Deployment watch reports it, and a SpecServe's first
    sight beside pools seen before it. `shared` gives the operator's client when no lane is open."""

    def __init__(self, shared: Callable[[], OperatorKube]) -> None:
        self._shared = shared
        self._lane: OperatorKube | None = None  # the failover's own connections (KubeClient.lane), while running

    def open(self, kube: OperatorKube) -> None:
        self._lane = kube.lane()

    async def close(self) -> None:
        lane, self._lane = self._lane, None  # a failover from now on goes through the shared client
        if lane is not None:
            await lane.close()

    @staticmethod
    def due_at_first_sight(state: ObjectState) -> bool:
        """Its pools were listed before it (a leader that just started): one dead beside one Ready may be a loss
        nobody has acted on yet."""
        return not deleting(state.body) and split(state.pools)

    async def pool_seen(self, state: ObjectState, name: str, serving: bool) -> None:
        """A pool Deployment of `state`, as the watch delivered it (`serving`: it has a Ready replica; False when
        deleted): recorded, and traffic taken off it at once when it lost its last Ready replica."""
        pools = state.pools
        known, was = name in pools, pools.get(name, False)
        pools[name] = serving
        lost = was and not serving
        # A leader that just started (or re-listed) has no "before": the first sight of a SpecServe's pools that
        # shows one without a Ready replica beside one with may be a loss nobody has acted on yet.
        unseen_loss = not known and split(pools)
        if (lost or unseen_loss) and not deleting(state.body) and not state.gone:
            await self.run(state)

    async def run(self, state: ObjectState) -> None:
        """Traffic first: weight off the owner's pools the watch reports without a Ready replica, onto its Ready
        pools, now, with no LIST."""
        pools = dict(state.pools)  # as the watch reports them now (later events change the state's)
        async with state.failover:
            try:
                kube = self._lane or self._shared()
                moved = await fail_over(kube, state.body, pools, lambda: supersede(state))
            except KubeError as exc:  # the full pass that follows tries again
                log.warning("failover of %s/%s failed: %s", *state.key, exc)
                return
        if moved is not None:
            log.info("failover of %s/%s: route weights now %s", *state.key, dict(moved))

"""The two loops beside kopf, started with the operator and stopped with it: the switching loop (its decisions
reconciled urgently) and the resync loop (background, skipping SpecServes left clean; a spec change the watch
never delivered caught up from a LIST)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from specserve import telemetry
from specserve.config import OperatorConfig
from specserve.dispatch.operator_kube import OperatorKube
from specserve.objects import Objects, ObjectState
from specserve.policy.switching import decide
from specserve.reconcile import Outcome
from specserve.resync import ResyncProbe, catch_up, resync_forever
from specserve.switching.loop import LoopConfig, SwitchingLoop
from specserve.switching.sources import Sources

# One reconcile of one SpecServe (Lanes.run_once): urgent or background. None: skipped.
Reconcile = Callable[[ObjectState, bool], Awaitable[Outcome | None]]


@dataclass(frozen=True)
class Loops:
    stop: asyncio.Event
    switching: asyncio.Task[None]
    resync: asyncio.Task[None]
    sources: Sources
    loop: SwitchingLoop
    lane: OperatorKube  # the switching loop's own connections (KubeClient.lane), closed at the end

    @classmethod
    def start(cls, objects: Objects, kube: OperatorKube, config: OperatorConfig, run_once: Reconcile) -> Loops:
        # Queries go only to the Prometheus URLs allowed, with the installation's credentials.
        sources = Sources(installation=config.installation, token_file=config.prometheus_token_file)

        async def trigger(state: ObjectState) -> None:
            await run_once(state, True)  # the switching loop's decision: urgent

        probe = ResyncProbe(objects, kube, config.full_resync_every)

        async def resync(state: ObjectState) -> None:
            # A SpecServe left clean by its last resync, with nothing it owns changed since, is not reconciled
            # again (at most full_resync_every - 1 rounds in a row): a round costs one LIST per kind and
            # namespace instead of seven LISTs per SpecServe.
            if probe.unchanged(state):
                return
            outcome = await run_once(state, False)
            probe.reconciled(state, outcome)

        async def before_round() -> None:
            await probe.read()
            # The watch's view checked against a LIST: a spec change it never delivered is reconciled this round.
            for state in await catch_up(objects, kube, config.namespaces):
                telemetry.WATCH_STALE.labels(*state.key).inc()

        # The round's LISTs and status writes on connections of their own, as the failover's: in the shared pool
        # (2 x max_concurrent_reconciles connections) every decision's urgent reconcile lists seven kinds at once,
        # and a round's 100-200 status writes queued behind them (the real-plane soak: rounds of 11-22 s with the
        # loop's writes 2-3 in flight of its 16, the operator at a quarter of a core; docs/chaos-soak.md).
        lane = kube.lane()
        loop = SwitchingLoop(objects, lane, sources, decide, trigger, LoopConfig(prometheus_url=config.prometheus_url))
        stop = asyncio.Event()
        switching = asyncio.create_task(loop.run(stop), name="specserve switching")
        resyncing = asyncio.create_task(
            resync_forever(objects, resync, config.resync_seconds, stop, before_round=before_round), name="resync"
        )
        return cls(stop, switching, resyncing, sources, loop, lane)

    def halt(self) -> None:
        self.stop.set()  # the switching loop finishes the evaluation it is in
        self.resync.cancel()  # a round can hold hundreds of queued reconciles: the next start repairs what it missed

    async def join(self) -> None:
        """After `halt`: both loops ended, the metrics sources' connections closed."""
        for task in (self.switching, self.resync):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.sources.close()
        await self.lane.close()

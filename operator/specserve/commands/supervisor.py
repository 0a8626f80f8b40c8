"""The operator's process supervisor: runs kopf for `specserve run` under the Lease and ends it safely.

One job: keep at most one operator acting on the objects. With leader election it waits for the Lease, fences
every write by it, hands it over the moment a stop begins and exits a deposed leader within a grace period; without,
it holds the same Lease as a presence guard and refuses to act while another operator holds it. SIGTERM and SIGINT
are the same stop as a caller's. The command line and the configuration are `specserve.commands.run`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import kopf
from aiohttp import web

from specserve import handlers, telemetry
from specserve.config import OperatorConfig, kopf_settings
from specserve.dispatch import KUBE
from specserve.kube.client import KubeClient
from specserve.kube.lease import LeaseElector, PresenceGuard
from specserve.reconcile.failover import fail_over_everywhere
from specserve.slots import MEMO_KEY, Slots

log = logging.getLogger("specserve")
EXIT_LEADERSHIP_LOST = 3
EXIT_GRACE_SECONDS = 5.0  # a deposed leader's orderly shutdown gets this long before the process exits anyway


class LeadershipLostError(RuntimeError):
    """The lease went to another replica (or could not be renewed): this process must stop acting and exit."""


def build_registry(
    config: OperatorConfig, stop: asyncio.Event | None = None, signals_to: asyncio.Event | None = None
) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    handlers.register(registry, config)
    if signals_to is not None:

        @kopf.on.startup(registry=registry)
        async def hand_over_on_signals(**_: Any) -> None:
            # SIGTERM and SIGINT stop the operator as a caller's stop does (serve's `stop_flag`): the Lease is
            # handed over first, then kopf shuts down. kopf's own handlers (installed as it started, replaced
            # here) stop it first, and its orderly shutdown waits for the handlers in progress: a SIGTERMed
            # leader would keep the Lease that long while acting no more (docs/chaos-soak.md, run 7).
            # Soon, not now: kopf installs its own once its tasks (this one among them) have had a first step.
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.call_soon(loop.add_signal_handler, sig, signals_to.set)

    if stop is not None:

        @kopf.on.cleanup(registry=registry)
        async def stopping(**_: Any) -> None:
            # Stopped by a signal, kopf leaves its waiter on our stop flag pending and waits 5 s for it at exit.
            stop.set()

    return registry


async def _operate(
    config: OperatorConfig, kube: KubeClient, stop_flag: asyncio.Event, signals_to: asyncio.Event | None
) -> None:
    await kopf.operator(
        registry=build_registry(config, stop_flag, signals_to),
        settings=kopf_settings(config),
        standalone=True,  # no kopf peering (it needs its own CRDs): the Lease keeps replicas apart
        clusterwide=config.clusterwide,
        namespaces=config.namespaces,
        liveness_endpoint=config.liveness_endpoint,
        # Every object's memo is a shallow copy of this one: they share the client and the reconcile slots.
        memo=kopf.Memo({KUBE: kube, MEMO_KEY: Slots(config.max_concurrent_reconciles)}),
        stop_flag=stop_flag,
    )


async def _alive(_: web.Request) -> web.Response:
    return web.json_response({"standby": True})


@contextlib.asynccontextmanager
async def _standby_health(endpoint: str | None) -> AsyncIterator[None]:
    """Answer the liveness probe while standing by (kopf serves it once leading): else the kubelet would keep
    restarting a healthy standby. The port is free again before kopf binds it."""
    if endpoint is None:
        yield
        return
    url = urlsplit(endpoint)
    app = web.Application()
    app.router.add_get(url.path or "/", _alive)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, url.hostname or "0.0.0.0", url.port or 80, reuse_address=True).start()
    try:
        yield
    finally:
        await runner.cleanup()


async def serve(
    config: OperatorConfig,
    kube: KubeClient,
    stop_flag: asyncio.Event | None = None,
    on_lost: Callable[[], None] | None = None,
    signals: bool = False,
) -> None:
    """Run the operator until `stop_flag` is set (or, with `signals`, SIGTERM or SIGINT: the same stop). With
    leader election, wait for the lease first, hand it over the moment a stop begins (kopf's orderly shutdown may
    take long: nothing acts meanwhile, so a standby should), and raise LeadershipLostError after stopping when it
    is lost. Closes `kube`'s connections at the end.

    While leading, `kube` is fenced by the lease (KubeClient.fence): no write leaves this process once the lease
    lapsed or went to another replica, whatever is still running. `on_lost` is called the moment the loss is
    noticed (the CLI arms a hard exit there: kopf's shutdown must not hold a deposed leader alive for long)."""
    external = stop_flag or asyncio.Event()
    # Unfenced: the Lease's own writes must go out while the fence is closed.
    lease_kube = kube.sibling() if config.leader_election or config.presence else None
    elector = LeaseElector(lease_kube, config.leader_election) if lease_kube and config.leader_election else None
    presence = (
        PresenceGuard(LeaseElector(lease_kube, config.presence), lease_kube, _conflict)
        if lease_kube is not None and config.presence is not None and elector is None
        else None
    )
    lost = asyncio.Event()
    try:
        if elector is not None:
            kube.fence(lambda: elector.leading)
            async with _standby_health(config.liveness_endpoint):
                if not await elector.acquire(external):
                    return  # stopped while standing by
        if presence is not None:  # no election: still never two operators acting on the same objects
            kube.fence(lambda: not presence.conflict)
            async with _standby_health(config.liveness_endpoint):
                if not await presence.wait_clear(external):
                    return  # stopped while another operator acted
        stop = asyncio.Event()  # what kopf watches: the caller's stop, or the lease lost
        telemetry.LEADER.set(1)
        # Tasks created before kopf starts: kopf's shutdown waits for (then cancels) the tasks spawned after it.
        stopped = asyncio.ensure_future(external.wait())
        keeping = elector.hold() if elector is not None else presence.watch() if presence is not None else None
        holding = asyncio.ensure_future(keeping if keeping is not None else asyncio.Event().wait())
        hand_over = elector.release if elector is not None else presence.release if presence is not None else None
        guard = asyncio.create_task(
            _guard(stopped, holding, lost, stop, kube, on_lost, hand_over), name="specserve stop guard"
        )
        # Traffic first: pools that died while no leader acted, before kopf has even discovered the API.
        first = asyncio.create_task(fail_over_everywhere(kube, config.namespaces or (None,)), name="first failover")
        try:
            await _operate(config, kube, stop, external if signals else None)
        except asyncio.CancelledError:
            if not stop.is_set():
                raise  # a cancellation from outside, not kopf's own way of ending after the stop flag
        finally:
            for task in (guard, stopped, holding, first):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await guard
        if lost.is_set():
            raise LeadershipLostError("the lease was lost; stopped acting")
    finally:
        telemetry.LEADER.set(0)
        if elector is not None and not lost.is_set():
            await elector.release()
        if presence is not None:
            await presence.release()
        await kube.close()
        if lease_kube is not None:
            await lease_kube.close()


def _conflict(conflict: bool, _other: str) -> None:
    """Another operator holds the Lease (or no longer does): this process does not act meanwhile."""
    telemetry.OPERATOR_CONFLICT.set(int(conflict))
    telemetry.LEADER.set(0 if conflict else 1)


async def _guard(
    stopped: asyncio.Future[Any],
    holding: asyncio.Future[Any],
    lost: asyncio.Event,
    stop: asyncio.Event,
    kube: KubeClient,
    on_lost: Callable[[], None] | None,
    hand_over: Callable[[], Awaitable[None]] | None,
) -> None:
    """Set `stop` when the caller stops us (`stopped`) or when the lease is lost (`holding` ends; `lost` too).
    On a loss, drop the client's connections at once: requests still in flight (sent before the fence closed)
    are cut instead of running to their timeout. On a stop, `hand_over` the lease first (its release closes the
    write fence at once), as controller-runtime's LeaderElectionReleaseOnCancel does."""
    try:
        await asyncio.wait([stopped, holding], return_when=asyncio.FIRST_COMPLETED)
        if holding.done() and not stopped.done():
            lost.set()
            if on_lost is not None:
                on_lost()
            await kube.close()
        elif hand_over is not None:
            holding.cancel()  # no renewal may race the release
            await hand_over()
    finally:
        stopped.cancel()
        holding.cancel()
        stop.set()


def exit_after(seconds: float) -> Callable[[], None]:
    """controller-runtime exits the moment it loses its lease; kopf's orderly shutdown waits for handlers and
    watches. Give it `seconds`, then end the process whatever it is doing (a daemon timer thread: it fires even
    if the event loop is blocked)."""

    def arm() -> None:
        log.error("the lease was lost: exiting within %.0f s", seconds)
        timer = threading.Timer(seconds, os._exit, (EXIT_LEADERSHIP_LOST,))
        timer.daemon = True
        timer.start()

    return arm

"""`specserve run`: run the operator against the cluster in KUBECONFIG or the in-cluster service account."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import kopf
from aiohttp import web
from prometheus_client import start_http_server

from specserve import handlers, telemetry
from specserve.api.install_policy import InstallPolicy
from specserve.config import LeaderElection, OperatorConfig, kopf_settings
from specserve.kube.client import ClientOptions, KubeClient
from specserve.kube.lease import LeaseElector, PresenceGuard
from specserve.reconcile.failover import fail_over_everywhere
from specserve.slots import MEMO_KEY, Slots

log = logging.getLogger("specserve")
EXIT_LEADERSHIP_LOST = 3
EXIT_GRACE_SECONDS = 5.0  # a deposed leader's orderly shutdown gets this long before the process exits anyway


class LeadershipLostError(RuntimeError):
    """The lease went to another replica (or could not be renewed): this process must stop acting and exit."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", action="append", default=[], help="watch this namespace (repeatable)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch all namespaces (the default)")
    parser.add_argument(
        "--liveness", metavar="URL", help="serve kopf's liveness probe, e.g. http://0.0.0.0:8080/healthz"
    )
    parser.add_argument("--metrics-port", type=int, help="serve the operator's Prometheus metrics on this port")
    parser.add_argument(
        "--prometheus-url",
        help="default Prometheus URL for SpecServes that name none (load-based switching reads load there)",
    )
    parser.add_argument("--resync-seconds", type=float, default=30.0, help="drift repair interval (default 30)")
    parser.add_argument(
        "--full-resync-every",
        type=int,
        default=4,
        help="a resync round skips a SpecServe that is clean and unchanged since its last one, but reconciles it "
        "every this-many rounds anyway (default 4; 1: every round)",
    )
    parser.add_argument(
        "--max-concurrent-reconciles", type=int, default=8, help="SpecServes reconciled at once (default 8)"
    )
    parser.add_argument(
        "--max-concurrent-rolls",
        type=int,
        default=None,
        help="pools rolling a changed pod template at once across the cluster, e.g. after an operator upgrade "
        "(default: no limit)",
    )
    parser.add_argument(
        "--api-timeout-seconds", type=float, default=30.0, help="timeout of one Kubernetes API request (default 30)"
    )
    parser.add_argument(
        "--read-timeout-seconds",
        type=float,
        default=10.0,
        help="a whole read (GET or LIST, retries included); a hung read of one kind costs a reconcile this long "
        "(default 10)",
    )
    parser.add_argument(
        "--leader-elect",
        action="store_true",
        help="act only while holding a coordination.k8s.io Lease (for more than one replica)",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", ""),
        help="the Lease's namespace (default $POD_NAMESPACE)",
    )
    parser.add_argument("--leader-election-name", default="specserve-operator", help="the Lease's name")
    parser.add_argument("--lease-seconds", type=float, default=15.0, help="lease duration (default 15)")
    parser.add_argument(
        "--no-presence-lease",
        action="store_true",
        help="without --leader-elect, do not hold the Lease that lets a second operator over the same objects be "
        "found (it then refuses to act); default: held, in --leader-election-namespace or specserve-system",
    )
    parser.add_argument(
        "--allow-host-path",
        action="append",
        default=[],
        metavar="PREFIX",
        help="let SpecServes mount model.cache.hostPath under this directory (repeatable; default: none)",
    )
    parser.add_argument("--allow-host-path-write", action="store_true", help="let allowed host paths mount read-write")
    parser.add_argument(
        "--allow-prometheus-url",
        action="append",
        default=[],
        metavar="URL",
        help="let SpecServes name this Prometheus (and paths under it) in switching.metrics.prometheusUrl "
        "(repeatable; default: only --prometheus-url)",
    )
    parser.add_argument(
        "--prometheus-bearer-token-file",
        metavar="PATH",
        help="send the bearer token in this file (read at every query: a mounted Secret) to the Prometheus URLs "
        "this installation allows; SpecServes never carry credentials",
    )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text, or json for log aggregation: one object a line (timestamp, severity, message, object)",
    )


PRESENCE_NAMESPACE = "specserve-system"  # the chart's namespace: where a laptop run looks without $POD_NAMESPACE


def _leader_election(args: argparse.Namespace) -> LeaderElection | None:
    if not args.leader_elect:
        return None
    if not args.leader_election_namespace:
        raise ValueError("--leader-elect needs --leader-election-namespace (or $POD_NAMESPACE)")
    return _lease(args, args.leader_election_namespace)


def _presence(args: argparse.Namespace) -> LeaderElection | None:
    """Without --leader-elect: the same Lease, held while acting, to find a second operator (PresenceGuard)."""
    if args.leader_elect or args.no_presence_lease:
        return None
    return _lease(args, args.leader_election_namespace or PRESENCE_NAMESPACE)


def _lease(args: argparse.Namespace, namespace: str) -> LeaderElection:
    lease = float(args.lease_seconds)
    return LeaderElection(
        namespace=namespace,
        identity=os.environ.get("POD_NAME") or socket.gethostname(),
        name=args.leader_election_name,
        lease_seconds=lease,
        # client-go's proportions (15 / 10 / 2): stop acting well before a standby may take over.
        renew_deadline_seconds=lease * 2 / 3,
        retry_seconds=max(0.2, lease * 2 / 15),
    )


def config_from(args: argparse.Namespace) -> OperatorConfig:
    return OperatorConfig(
        namespaces=tuple(args.namespace),
        resync_seconds=args.resync_seconds,
        full_resync_every=args.full_resync_every,
        liveness_endpoint=args.liveness,
        metrics_port=args.metrics_port,
        prometheus_url=args.prometheus_url,
        prometheus_token_file=args.prometheus_bearer_token_file,
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        max_concurrent_rolls=args.max_concurrent_rolls,
        api_timeout_seconds=args.api_timeout_seconds,
        read_timeout_seconds=args.read_timeout_seconds,
        leader_election=_leader_election(args),
        presence=_presence(args),
        install_policy=InstallPolicy(
            tuple(args.allow_host_path), args.allow_host_path_write, tuple(args.allow_prometheus_url)
        ),
    )


def client_options(config: OperatorConfig) -> ClientOptions:
    # Enough connections that every reconcile slot can have a call in flight next to kopf's own traffic.
    return ClientOptions(
        connect_timeout=config.api_connect_timeout_seconds,
        request_timeout=config.api_timeout_seconds,
        connection_limit=max(8, 2 * config.max_concurrent_reconciles),
        read_timeout=config.read_timeout_seconds,
    )


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
            # leader kept the Lease for up to 37 s under a slow API (the soak) while acting no more.
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
        memo=kopf.Memo({"kube": kube, MEMO_KEY: Slots(config.max_concurrent_reconciles)}),
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


def _exit_after(seconds: float) -> Callable[[], None]:
    """controller-runtime exits the moment it loses its lease; kopf's orderly shutdown waits for handlers and
    watches. Give it `seconds`, then end the process whatever it is doing (a daemon timer thread: it fires even
    if the event loop is blocked)."""

    def arm() -> None:
        log.error("the lease was lost: exiting within %.0f s", seconds)
        timer = threading.Timer(seconds, os._exit, (EXIT_LEADERSHIP_LOST,))
        timer.daemon = True
        timer.start()

    return arm


def configure_logging(args: argparse.Namespace) -> None:
    """Every logger (the operator's, kopf's) through kopf's handler; JSON with python-json-logger (kopf's own
    dependency), the SpecServe a message is about under "object"."""
    log_format = kopf.LogFormat.JSON if args.log_format == "json" else kopf.LogFormat.FULL
    kopf.configure(
        debug=args.log_level == "debug",
        verbose=args.log_level in ("debug", "info"),
        log_format=log_format,
        log_refkey="object",
    )
    logging.getLogger().setLevel(args.log_level.upper())


def run(args: argparse.Namespace) -> int:
    configure_logging(args)  # first: a configuration error is logged in the chosen format too
    try:
        config = config_from(args)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    if config.metrics_port:
        start_http_server(config.metrics_port, registry=telemetry.REGISTRY)
    try:
        kube = KubeClient.from_environment(client_options(config))
    except Exception as exc:  # no kubeconfig and not in a pod
        log.error("cannot load Kubernetes credentials: %s", exc)
        return 2
    try:
        asyncio.run(serve(config, kube, on_lost=_exit_after(EXIT_GRACE_SECONDS), signals=True))
    except asyncio.CancelledError:
        pass  # kopf's way of ending after a signal, as kopf.run() treats it
    except LeadershipLostError as exc:
        log.error("%s; exiting so that the pod restarts as a standby", exc)
        return EXIT_LEADERSHIP_LOST
    return 0

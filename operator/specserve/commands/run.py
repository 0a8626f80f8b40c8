"""`specserve run`: run the operator against the cluster in KUBECONFIG or the in-cluster service account: the
command line, the configuration it makes, logging; the process itself is supervised by `commands.supervisor`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket

import kopf
from prometheus_client import start_http_server

from specserve import telemetry
from specserve.api.install_policy import InstallPolicy
from specserve.commands.supervisor import (
    EXIT_GRACE_SECONDS,
    EXIT_LEADERSHIP_LOST,
    LeadershipLostError,
    exit_after,
    serve,
)
from specserve.config import LeaderElection, OperatorConfig
from specserve.kube.client import ClientOptions, KubeClient

log = logging.getLogger("specserve")


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
        asyncio.run(serve(config, kube, on_lost=exit_after(EXIT_GRACE_SECONDS), signals=True))
    except asyncio.CancelledError:
        pass  # kopf's way of ending after a signal, as kopf.run() treats it
    except LeadershipLostError as exc:
        log.error("%s; exiting so that the pod restarts as a standby", exc)
        return EXIT_LEADERSHIP_LOST
    return 0

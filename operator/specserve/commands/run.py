"""`specserve run`: run the operator against the cluster in KUBECONFIG or the in-cluster service account."""

from __future__ import annotations

import argparse
import asyncio
import logging

import kopf
from prometheus_client import start_http_server

from specserve import handlers, telemetry
from specserve.config import OperatorConfig, kopf_settings
from specserve.kube.client import KubeClient


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
        help="default Prometheus URL for SpecServes that name none (for load-based switching, not read yet)",
    )
    parser.add_argument("--resync-seconds", type=float, default=30.0, help="drift repair interval (default 30)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


def config_from(args: argparse.Namespace) -> OperatorConfig:
    return OperatorConfig(
        namespaces=tuple(args.namespace),
        resync_seconds=args.resync_seconds,
        liveness_endpoint=args.liveness,
        metrics_port=args.metrics_port,
        prometheus_url=args.prometheus_url,
    )


async def serve(config: OperatorConfig, kube: KubeClient, stop_flag: asyncio.Event | None = None) -> None:
    registry = kopf.OperatorRegistry()
    handlers.register(registry, config)
    await kopf.operator(
        registry=registry,
        settings=kopf_settings(config),
        standalone=True,  # one replica; no peering objects needed
        clusterwide=config.clusterwide,
        namespaces=config.namespaces,
        liveness_endpoint=config.liveness_endpoint,
        memo=kopf.Memo(kube=kube),
        stop_flag=stop_flag,
    )


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    kopf.configure(debug=args.log_level == "debug", verbose=args.log_level in ("debug", "info"))
    logging.getLogger().setLevel(args.log_level.upper())
    if config.metrics_port:
        start_http_server(config.metrics_port, registry=telemetry.REGISTRY)
    try:
        kube = KubeClient.from_environment()
    except Exception as exc:  # no kubeconfig and not in a pod
        logging.getLogger("specserve").error("cannot load Kubernetes credentials: %s", exc)
        return 2
    asyncio.run(serve(config, kube))
    return 0

"""`kubectl specserve what-if NAME --demand N`: what the policy would decide now at that demand, from the live
state in status (the policy's own decide(); nothing is written)."""

from __future__ import annotations

import argparse

from specserve.plugin.common import add_common, cluster, emit, namespace, shown, user_errors
from specserve.plugin.view import what_if, what_if_text


def _demand(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--demand must be a number of requests in flight, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("--demand must be >= 0 (requests in flight across the SpecServe's pods)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the SpecServe")
    parser.add_argument("--demand", type=_demand, required=True, help="requests in flight across all its pods")
    add_common(parser)


@user_errors
def run(args: argparse.Namespace) -> int:
    kube = cluster(args)
    data = what_if(shown(kube.get(namespace(args, kube), args.name)), args.demand)
    emit(args, data, what_if_text(data))
    return 0

"""`kubectl specserve status [NAME]`: one screen per SpecServe: pools and readiness, weights or mode, demand
against the crossover, conditions that are not fine, the last decisions."""

from __future__ import annotations

import argparse

from specserve.plugin.common import add_common, cluster, emit, namespace, user_errors
from specserve.plugin.view import load, status_data, status_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="one SpecServe (default: every SpecServe in the namespace)")
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    add_common(parser)


@user_errors
def run(args: argparse.Namespace) -> int:
    kube = cluster(args)
    ns = namespace(args, kube)
    bodies = [kube.get(ns, args.name)] if args.name else kube.list(None if args.all_namespaces else ns)
    items = [status_data(load(body)) for body in bodies]
    if not items:
        where = "any namespace" if args.all_namespaces else f"namespace {ns}"
        emit(args, [], f"No SpecServes found in {where}.")
        return 0
    data = items[0] if args.name else items
    emit(args, data, "\n\n".join(status_text(item) for item in items))
    return 0

"""`kubectl specserve status [NAME]`: one screen per SpecServe: pools and readiness, weights or mode, demand
against the crossover, conditions that are not fine, the last decisions. Listing, one SpecServe this plugin cannot
show is one line on stderr (and exit 1); the others are still shown."""

from __future__ import annotations

import argparse
import sys

from specserve.plugin.common import add_common, cluster, emit, namespace, shown, user_errors
from specserve.plugin.view import ViewError, status_data, status_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="one SpecServe (default: every SpecServe in the namespace)")
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    add_common(parser)


@user_errors
def run(args: argparse.Namespace) -> int:
    kube = cluster(args)
    ns = namespace(args, kube)
    if args.name:
        data = status_data(shown(kube.get(ns, args.name)))
        emit(args, data, status_text(data))
        return 0
    items, failed = [], 0
    for body in kube.list(None if args.all_namespaces else ns):
        try:
            items.append(status_data(shown(body)))
        except ViewError as exc:  # one object this plugin cannot read does not hide the others
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
    if not items and not failed:
        where = "any namespace" if args.all_namespaces else f"namespace {ns}"
        emit(args, [], f"No SpecServes found in {where}.")
        return 0
    emit(args, items, "\n\n".join(status_text(item) for item in items))
    return 1 if failed else 0

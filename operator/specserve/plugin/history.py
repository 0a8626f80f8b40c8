"""`kubectl specserve history NAME`: the decision history (status.history) as a table, oldest first."""

from __future__ import annotations

import argparse

from specserve.plugin.common import add_common, cluster, emit, namespace, shown, user_errors
from specserve.plugin.view import history_data, history_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the SpecServe")
    add_common(parser)


@user_errors
def run(args: argparse.Namespace) -> int:
    kube = cluster(args)
    rows = history_data(shown(kube.get(namespace(args, kube), args.name)))
    emit(args, rows, history_text(rows))
    return 0

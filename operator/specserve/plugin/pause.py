"""`kubectl specserve pause NAME`: stop switching (annotation specserve.io/paused=true). The operator holds the
mode and weights, except failover off a pool without a Ready replica; status shows Switching=False, Paused."""

from __future__ import annotations

import argparse

from specserve.plugin.common import ANNOTATION_PAUSED, add_common, cluster, namespace, user_errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the SpecServe")
    add_common(parser, output=False)


@user_errors
def run(args: argparse.Namespace) -> int:
    kube = cluster(args)
    ns = namespace(args, kube)
    kube.annotate(ns, args.name, ANNOTATION_PAUSED, "true")
    print(f"specserve.specserve.io/{args.name} paused (in {ns}): switching holds until `kubectl specserve resume`")
    return 0

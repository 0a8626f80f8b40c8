"""`kubectl specserve pause NAME`: stop switching (annotation specserve.io/paused=true). The operator holds the
mode and weights, except failover off a pool without a Ready replica; status shows Switching=False, Paused."""

from __future__ import annotations

import argparse

from specserve.plugin.common import ANNOTATION_PAUSED, add_common, cluster, namespace, user_errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the SpecServe")
    add_common(parser, output=False)


def set_paused(args: argparse.Namespace, paused: bool) -> str:
    """Sets (paused) or removes the pause annotation on SpecServe `args.name`; the namespace it is in."""
    kube = cluster(args)
    ns = namespace(args, kube)
    kube.annotate(ns, args.name, ANNOTATION_PAUSED, "true" if paused else None)
    return ns


@user_errors
def run(args: argparse.Namespace) -> int:
    ns = set_paused(args, True)
    print(f"specserve.specserve.io/{args.name} paused (in {ns}): switching holds until `kubectl specserve resume`")
    return 0

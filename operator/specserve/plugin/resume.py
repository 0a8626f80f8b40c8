"""`kubectl specserve resume NAME`: switch again (removes the specserve.io/paused annotation)."""

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
    kube.annotate(ns, args.name, ANNOTATION_PAUSED, None)
    print(f"specserve.specserve.io/{args.name} resumed (in {ns}): switching acts again")
    return 0

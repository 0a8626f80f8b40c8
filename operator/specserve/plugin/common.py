"""What every plugin command shares: kubectl's flags, the cluster, output as text, JSON or YAML."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import yaml

from specserve.plugin.kube import Cluster, PluginError
from specserve.plugin.view import ViewError

ANNOTATION_PAUSED = "specserve.io/paused"


def add_common(parser: argparse.ArgumentParser, *, output: bool = True) -> None:
    parser.add_argument("-n", "--namespace", help="the namespace (default: the kubeconfig context's, else default)")
    parser.add_argument("--context", help="the kubeconfig context to use")
    parser.add_argument("--kubeconfig", help="path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    if output:
        parser.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format")


def cluster(args: argparse.Namespace) -> Cluster:
    return Cluster(kubeconfig=args.kubeconfig, context=args.context)


def namespace(args: argparse.Namespace, kube: Cluster) -> str:
    return str(args.namespace or kube.default_namespace)


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.output == "json":
        print(json.dumps(data, indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(data, sort_keys=False), end="")
    else:
        print(text)


def user_errors(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command's run() whose failures worded for the user print one line and exit 1 (no traceback), under
    `kubectl specserve` and `specserve` alike."""

    @functools.wraps(run)
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (PluginError, ViewError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1

    return wrapped

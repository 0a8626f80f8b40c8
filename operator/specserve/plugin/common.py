"""What every plugin command shares: kubectl's flags, the cluster, output as text, JSON or YAML."""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections.abc import Callable
from typing import Any

import yaml

from specserve.plugin.kube import DEFAULT_TIMEOUT, JSON, Cluster, PluginError
from specserve.plugin.view import Loaded, ViewError, load, unknown_note

ANNOTATION_PAUSED = "specserve.io/paused"


def add_common(parser: argparse.ArgumentParser, *, output: bool = True) -> None:
    parser.add_argument("-n", "--namespace", help="the namespace (default: the kubeconfig context's, else default)")
    parser.add_argument("--context", help="the kubeconfig context to use")
    parser.add_argument("--kubeconfig", help="path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--as", dest="as_user", metavar="USER", help="act as this user (impersonation), as kubectl")
    parser.add_argument(
        "--as-group", dest="as_groups", action="append", default=[], metavar="GROUP",
        help="act as this group too (with --as; one group)",
    )  # fmt: skip
    parser.add_argument(
        "--request-timeout", type=request_timeout, default=DEFAULT_TIMEOUT, metavar="DURATION",
        help=f"give up on a request after this long: 30s, 1m, seconds; 0: wait for ever (default {DEFAULT_TIMEOUT:g}s)",
    )  # fmt: skip
    if output:
        parser.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format")


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def request_timeout(text: str) -> float:
    """kubectl's --request-timeout: a duration (500ms, 30s, 1m, 1h) or bare seconds; 0 for no timeout."""
    found = _DURATION.match(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(f"--request-timeout must be a duration such as 30s or 1m, not {text!r}")
    return float(found.group(1)) * _UNIT[found.group(2) or "s"]


def cluster(args: argparse.Namespace) -> Cluster:
    if args.as_groups and not args.as_user:
        raise PluginError("--as-group needs --as (the API server impersonates a user, with these groups)")
    if len(args.as_groups) > 1:  # the client library sends a header once: several groups would be one wrong value
        raise PluginError("one --as-group at a time (use kubectl --as-group for several)")
    return Cluster(
        kubeconfig=args.kubeconfig,
        context=args.context,
        impersonate=args.as_user,
        impersonate_groups=tuple(args.as_groups),
        timeout=args.request_timeout,
    )


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


def shown(body: JSON) -> Loaded:
    """The object as the views read it; fields this plugin does not know are named on stderr, not fatal."""
    item = load(body)
    note = unknown_note(item)
    if note is not None:
        print(note, file=sys.stderr)
    return item

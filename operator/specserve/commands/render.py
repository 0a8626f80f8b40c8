"""`specserve render FILE`: print the objects a SpecServe becomes (offline; for review and GitOps)."""

from __future__ import annotations

import argparse
import sys

import yaml

from specserve.api import yamlfile
from specserve.api.install_policy import InstallPolicy, check_install_policy
from specserve.api.models import Mode
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.render import render, to_yaml


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="a YAML file with one or more SpecServe documents ('-' reads stdin)")
    parser.add_argument(
        "--mode",
        choices=[m.value for m in Mode],
        help="render as if this mode were active (default: spec.switching.initialMode)",
    )
    # The operator's install policy, so that what renders here is what the operator would accept.
    parser.add_argument(
        "--allow-host-path",
        action="append",
        default=[],
        metavar="PREFIX",
        help="accept model.cache.hostPath under this directory, as `specserve run` does (repeatable; default none)",
    )
    parser.add_argument(
        "--allow-host-path-write", action="store_true", help="accept read-write host paths (readOnly: false)"
    )
    parser.add_argument(
        "--allow-prometheus-url",
        action="append",
        default=[],
        metavar="URL",
        help="accept switching.metrics.prometheusUrl under this URL, as `specserve run` does (repeatable; default "
        "none)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as fh:
                text = fh.read()
        documents = yamlfile.load_all(text)
    except OSError as exc:
        print(f"specserve render: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    except yaml.YAMLError as exc:
        print(f"specserve render: {args.file} is not valid YAML: {exc}", file=sys.stderr)
        return 2
    if not documents:
        print(f"specserve render: {args.file} holds no documents", file=sys.stderr)
        return 2
    manifests = []
    failed = False
    policy = InstallPolicy(tuple(args.allow_host_path), args.allow_host_path_write, tuple(args.allow_prometheus_url))
    for index, document in enumerate(documents):
        where = f"{args.file} document {index + 1}" if len(documents) > 1 else args.file
        try:
            obj = parse_object(document)
        except InvalidSpecServe as exc:
            errors = exc.errors
        else:
            errors = check_install_policy(obj.spec, policy)
        if errors:
            for error in errors:
                print(f"specserve render: {where}: {error}", file=sys.stderr)
            failed = True
            continue
        manifests += render(obj, Mode(args.mode) if args.mode else None)
    if failed:
        return 1
    sys.stdout.write(to_yaml(manifests))
    return 0

"""`specserve render FILE`: print the objects a SpecServe becomes (offline; for review and GitOps)."""

from __future__ import annotations

import argparse
import sys

import yaml

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


def run(args: argparse.Namespace) -> int:
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as fh:
                text = fh.read()
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
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
    for index, document in enumerate(documents):
        try:
            obj = parse_object(document)
        except InvalidSpecServe as exc:
            where = f"{args.file} document {index + 1}" if len(documents) > 1 else args.file
            for error in exc.errors:
                print(f"specserve render: {where}: {error}", file=sys.stderr)
            failed = True
            continue
        manifests += render(obj, Mode(args.mode) if args.mode else None)
    if failed:
        return 1
    sys.stdout.write(to_yaml(manifests))
    return 0

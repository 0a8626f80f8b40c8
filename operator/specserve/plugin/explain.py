"""`kubectl specserve explain NAME`: why the last decision, in words and numbers, with the curves and the
operating point (a terminal plot; --png FILE for an image)."""

from __future__ import annotations

import argparse
from pathlib import Path

from specserve.plugin.common import add_common, cluster, emit, namespace, shown, user_errors
from specserve.plugin.plot import png, terminal
from specserve.plugin.view import explain_data, explain_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the SpecServe")
    parser.add_argument("--png", type=Path, metavar="FILE", help="also write the curves and operating point here")
    parser.add_argument("--no-plot", action="store_true", help="words and numbers only")
    add_common(parser)


@user_errors
def run(args: argparse.Namespace) -> int:
    kube = cluster(args)
    data = explain_data(shown(kube.get(namespace(args, kube), args.name)))
    text = explain_text(data)
    if data["curves"] is not None and not args.no_plot and args.output == "text":
        text += "\n\n" + terminal(data)
    emit(args, data, text)
    if args.png is not None:
        if data["curves"] is None:
            print(f"kubectl specserve explain: no curves to plot; {args.png} not written")
            return 1
        png(data, args.png)
        if args.output == "text":
            print(f"wrote {args.png}")
    return 0

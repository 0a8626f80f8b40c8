"""`specserve dashboard`: write the Grafana dashboard generated from specserve.observability.dashboard."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

CHART_DASHBOARD = "charts/specserve/dashboards/specserve.json"
HINT = "pip install 'specserve[dashboard]'"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", help=f"write here instead of stdout (the chart's copy: {CHART_DASHBOARD})")


def run(args: argparse.Namespace) -> int:
    try:
        from specserve.observability.grafana import render  # noqa: PLC0415 (the SDK is an extra)

        text = render()
    except ImportError as exc:
        print(f"specserve dashboard: needs the Grafana Foundation SDK ({exc.name}); install it with: {HINT}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0

"""`kubectl specserve version`: the plugin's version (what `kubectl krew list` and bug reports need)."""

from __future__ import annotations

import argparse
import platform

from specserve import __version__
from specserve.api.models import GROUP, VERSION
from specserve.plugin.common import emit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format")


def run(args: argparse.Namespace) -> int:
    data = {"plugin": __version__, "apiVersion": f"{GROUP}/{VERSION}", "python": platform.python_version()}
    emit(args, data, f"kubectl-specserve {__version__} ({GROUP}/{VERSION}, Python {data['python']})")
    return 0

"""`python -m specserve_tools COMMAND ...`: the tools' commands where no entry point is installed (a checkout on
PYTHONPATH, as on the GPU machine of scripts/gpu/run.sh). Installed, `specserve COMMAND` is the same."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from specserve.cli import run_subcommand
from specserve_tools.commands import COMMANDS


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python -m specserve_tools {{{','.join(COMMANDS)}}} ...", file=sys.stderr)
        return 2
    return run_subcommand(argv[0], COMMANDS[argv[0]], argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())

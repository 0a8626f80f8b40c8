"""`kubectl specserve resume NAME`: switch again (removes the specserve.io/paused annotation)."""

from __future__ import annotations

import argparse

from specserve.plugin.common import user_errors
from specserve.plugin.pause import add_arguments, set_paused

__all__ = ["add_arguments", "run"]  # the plugin's command interface: the same arguments as pause


@user_errors
def run(args: argparse.Namespace) -> int:
    ns = set_paused(args, False)
    print(f"specserve.specserve.io/{args.name} resumed (in {ns}): switching acts again")
    return 0

"""`kubectl-specserve`: the kubectl plugin (kubectl finds it on PATH as `kubectl specserve`). The same commands
are `specserve status|explain|history|pause|resume|what-if`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> (module, one-line help); each module defines add_arguments(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "status": ("specserve.plugin.status", "pools, weights or mode, demand vs crossover, conditions, last decisions"),
    "explain": ("specserve.plugin.explain", "why the last decision, with the curves and the operating point"),
    "history": ("specserve.plugin.history", "the decision history as a table"),
    "pause": ("specserve.plugin.pause", "stop switching (failover off a dead pool still acts)"),
    "resume": ("specserve.plugin.resume", "switch again"),
    "what-if": ("specserve.plugin.whatif", "what the policy would do at a given demand (nothing is written)"),
}


def run_command(prog: str, module_name: str, help_text: str, argv: Sequence[str]) -> int:
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=prog, description=help_text)
    module.add_arguments(parser)
    args = parser.parse_args(list(argv))
    try:
        code: int = module.run(args)
    except ImportError as exc:  # plotext or matplotlib for explain's plots
        print(f"{prog}: needs {exc.name}: pip install 'specserve[plugin]'", file=sys.stderr)
        return 2
    return code


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="kubectl specserve", description="Operate SpecServes: status, explain, history, pause, resume, what-if."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if not argv or argv[0] not in COMMANDS:
        parser.parse_args(argv)  # usage, or the unknown-command error
        return 2
    module_name, help_text = COMMANDS[argv[0]]
    try:
        return run_command(f"kubectl specserve {argv[0]}", module_name, help_text, argv[1:])
    except BrokenPipeError:
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

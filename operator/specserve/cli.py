"""The `specserve` command: one subcommand per module in specserve.commands, imported only when used
(so `specserve render` does not pay for the operator's or the bench's imports)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from specserve import __version__

# name -> (module, one-line help). Each module defines add_arguments(parser) and run(args) -> int.
COMMANDS: dict[str, tuple[str, str]] = {
    "crd": ("specserve.commands.crd", "print the SpecServe CustomResourceDefinition"),
    "render": ("specserve.commands.render", "print the Kubernetes objects a SpecServe file becomes"),
    "run": ("specserve.commands.run", "run the operator"),
    "emulate": ("specserve.commands.emulate", "run a GPU-free SGLang emulator (tests and demos)"),
    "bench": ("specserve.commands.bench", "sweep concurrency against an OpenAI-compatible endpoint"),
    "calibrate": ("specserve.commands.calibrate", "turn two bench results into switching thresholds"),
    "simulate": ("specserve.commands.simulate", "replay a trace under the switching policy, baselines and the optimum"),
    "demo": ("specserve.commands.demo", "the operator's whole loop on one machine, live (no GPU, no cluster)"),
    "dashboard": ("specserve.commands.dashboard", "write the Grafana dashboard (charts/specserve/dashboards)"),
    # The kubectl plugin's commands (kubectl-specserve), for a cluster's SpecServes:
    "status": ("specserve.plugin.status", "a SpecServe's pools, weights or mode, demand, conditions, last decisions"),
    "explain": ("specserve.plugin.explain", "why the last decision, with the curves and the operating point"),
    "history": ("specserve.plugin.history", "a SpecServe's decision history"),
    "pause": ("specserve.plugin.pause", "stop a SpecServe's switching (failover still acts)"),
    "resume": ("specserve.plugin.resume", "resume a SpecServe's switching"),
    "what-if": ("specserve.plugin.whatif", "what the policy would do at a given demand (nothing is written)"),
}


# Top-level packages of the `bench` extra (pyproject.toml), kept out of the operator image.
BENCH_EXTRA = frozenset({"matplotlib", "rich", "ruamel"})
BENCH_HINT = "pip install 'specserve[bench]'"


def missing_extra(exc: ImportError) -> str | None:
    """The bench extra's package that failed to import, if that is what `exc` is about."""
    top = (exc.name or "").split(".")[0]
    return top if top in BENCH_EXTRA else None


def _missing_extra_message(name: str, exc: ImportError) -> str | None:
    package = missing_extra(exc)
    if package is None:
        return None
    return f"specserve {name}: needs the bench extra ({package} is not installed); install it with: {BENCH_HINT}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specserve", description="SpecServe: SGLang speculative decoding on Kubernetes, switched by load."
    )
    parser.add_argument("--version", action="version", version=f"specserve {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or argv[0] not in COMMANDS:
        parser.parse_args(argv)  # prints usage or the unknown-command error, and exits
        return 2
    name = argv[0]
    module_name, help_text = COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        message = _missing_extra_message(name, exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 2
    sub = argparse.ArgumentParser(prog=f"specserve {name}", description=help_text)
    module.add_arguments(sub)
    args = sub.parse_args(argv[1:])
    try:
        code: int = module.run(args)
    except BrokenPipeError:  # stdout closed early (e.g. piped into head)
        return 1
    except KeyboardInterrupt:
        print(f"specserve {name}: interrupted", file=sys.stderr)
        return 130
    except ImportError as exc:  # a lazily imported extra (matplotlib for plots)
        message = _missing_extra_message(name, exc)
        print(message or f"specserve {name}: cannot import {exc.name}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the last resort: one line instead of a traceback
        print(f"specserve {name}: unexpected error: {type(exc).__name__}: {exc} (please report it)", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())

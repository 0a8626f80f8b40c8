"""The `specserve` command: one subcommand per module, imported only when used (so `specserve render` does not
pay for the operator's or the bench's imports).

The operator's own commands are listed here. The tools (`specserve emulate|bench|calibrate|simulate|demo`) live in
the separate `specserve-tools` distribution, which registers its commands in the `specserve.commands` entry-point
group; one CLI either way, and the operator never imports the tools."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points

from specserve import __version__

ENTRY_POINT_GROUP = "specserve.commands"
TOOLS_HINT = "pip install specserve-tools (or ./tools)"
# The tools' commands, by name only: so that without them `specserve demo` says what to install.
TOOL_COMMANDS = ("emulate", "bench", "calibrate", "simulate", "demo")


@dataclass(frozen=True)
class Extra:
    """An optional dependency set of a command: its top-level packages and how to install them."""

    name: str
    packages: frozenset[str]
    hint: str


@dataclass(frozen=True)
class Subcommand:
    """What an entry point of the `specserve.commands` group points at. `module` defines add_arguments(parser)
    and run(args) -> int, and is imported only when the command runs; `extra` names the optional packages whose
    absence is reported as a hint instead of a traceback."""

    module: str
    help: str
    extra: Extra | None = None


COMMANDS: dict[str, Subcommand] = {
    "crd": Subcommand("specserve.commands.crd", "print the SpecServe CustomResourceDefinition"),
    "render": Subcommand("specserve.commands.render", "print the Kubernetes objects a SpecServe file becomes"),
    "run": Subcommand("specserve.commands.run", "run the operator"),
    "dashboard": Subcommand(
        "specserve.commands.dashboard", "write the Grafana dashboard (charts/specserve/dashboards)"
    ),
    # The kubectl plugin's commands (kubectl-specserve), for a cluster's SpecServes:
    "status": Subcommand(
        "specserve.plugin.status", "a SpecServe's pools, weights or mode, demand, conditions, last decisions"
    ),
    "explain": Subcommand("specserve.plugin.explain", "why the last decision, with the curves and the operating point"),
    "history": Subcommand("specserve.plugin.history", "a SpecServe's decision history"),
    "pause": Subcommand("specserve.plugin.pause", "stop a SpecServe's switching (failover still acts)"),
    "resume": Subcommand("specserve.plugin.resume", "resume a SpecServe's switching"),
    "what-if": Subcommand("specserve.plugin.whatif", "what the policy would do at a given demand (nothing is written)"),
}


class PluginError(Exception):
    """A registered command that cannot be loaded (a broken install)."""


def plugin_commands() -> dict[str, Subcommand | PluginError]:
    """The commands other distributions register (specserve-tools), by name; the operator's own names win."""
    found: dict[str, Subcommand | PluginError] = {}
    order = {name: i for i, name in enumerate(TOOL_COMMANDS)}  # the tools' commands in their usual order
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: (order.get(p.name, len(order)), p.name)):
        if point.name in COMMANDS or point.name in found:
            continue
        try:
            value = point.load()
        except Exception as exc:  # an import error inside the plugin's package: reported when the command is used
            found[point.name] = PluginError(f"cannot load {point.value}: {type(exc).__name__}: {exc}")
            continue
        if isinstance(value, Subcommand):
            found[point.name] = value
        else:
            found[point.name] = PluginError(
                f"{point.value} is a {type(value).__name__}, not a specserve.cli.Subcommand"
            )
    return found


def commands() -> dict[str, Subcommand]:
    """Every command that can run here: the operator's and the installed plugins'."""
    return COMMANDS | {name: sub for name, sub in plugin_commands().items() if isinstance(sub, Subcommand)}


def _missing_extra_message(name: str, sub: Subcommand, exc: ImportError) -> str | None:
    top = (exc.name or "").split(".")[0]
    if sub.extra is None or top not in sub.extra.packages:
        return None
    return (
        f"specserve {name}: needs the {sub.extra.name} extra ({top} is not installed); "
        f"install it with: {sub.extra.hint}"
    )


def build_parser(plugins: dict[str, Subcommand | PluginError]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specserve", description="SpecServe: SGLang speculative decoding on Kubernetes, switched by load."
    )
    parser.add_argument("--version", action="version", version=f"specserve {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub.add_parser(name, help=command.help, add_help=False)
    for name, plugin in plugins.items():
        sub.add_parser(name, help=plugin.help if isinstance(plugin, Subcommand) else f"(broken: {plugin})")
    for name in TOOL_COMMANDS:
        if name not in plugins:
            sub.add_parser(name, help=f"not installed: {TOOLS_HINT}", add_help=False)
    return parser


def _resolve(name: str) -> Subcommand | str:
    """The command, or the one-line reason it cannot run."""
    if name in COMMANDS:
        return COMMANDS[name]
    found = plugin_commands().get(name)
    if isinstance(found, Subcommand):
        return found
    if isinstance(found, PluginError):
        return f"specserve {name}: {found}"
    return f"specserve {name}: not installed: {TOOLS_HINT}"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = argv[0] if argv else ""
    if name not in COMMANDS and name not in TOOL_COMMANDS:
        plugins = plugin_commands()
        if name not in plugins:
            build_parser(plugins).parse_args(argv)  # prints usage or the unknown-command error, and exits
            return 2
    resolved = _resolve(name)
    if isinstance(resolved, str):
        print(resolved, file=sys.stderr)
        return 2
    return run_subcommand(name, resolved, argv[1:])


def run_subcommand(name: str, command: Subcommand, argv: Sequence[str]) -> int:
    """Parse `argv` with the command's flags and run it: a missing extra, an interrupt or an unexpected error is
    one line on stderr and an exit code, never a traceback."""
    try:
        module = importlib.import_module(command.module)
    except ImportError as exc:
        message = _missing_extra_message(name, command, exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 2
    sub = argparse.ArgumentParser(prog=f"specserve {name}", description=command.help)
    module.add_arguments(sub)
    args = sub.parse_args(list(argv))
    try:
        code: int = module.run(args)
    except BrokenPipeError:  # stdout closed early (e.g. piped into head)
        return 1
    except KeyboardInterrupt:
        print(f"specserve {name}: interrupted", file=sys.stderr)
        return 130
    except ImportError as exc:  # a lazily imported extra (matplotlib for plots)
        message = _missing_extra_message(name, command, exc)
        print(message or f"specserve {name}: cannot import {exc.name}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the last resort: one line instead of a traceback
        print(f"specserve {name}: unexpected error: {type(exc).__name__}: {exc} (please report it)", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    # `python -m specserve.cli`: run the importable module's main, so that the plugins' Subcommands (which import
    # specserve.cli) are instances of the same class as the one checked here, not of __main__'s copy.
    from specserve.cli import main as cli_main

    raise SystemExit(cli_main())

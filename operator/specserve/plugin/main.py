"""`kubectl-specserve`: the kubectl plugin (kubectl finds it on PATH as `kubectl specserve`). The same commands
are `specserve status|explain|history|pause|resume|what-if`. kubectl's global flags may come before the command
(`kubectl specserve -n llm status`), as with kubectl's own commands."""

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
# The plugin's own housekeeping (not `specserve` subcommands: the operator's CLI has --version and its own help).
HOUSEKEEPING: dict[str, tuple[str, str]] = {
    "version": ("specserve.plugin.version", "the plugin's version"),
    "completion": ("specserve.plugin.completion", "a shell completion script (bash or zsh)"),
}
ALL = COMMANDS | HOUSEKEEPING

# kubectl's global flags that may come before the command: those that take a value, and switches.
VALUE_FLAGS = frozenset({"-n", "--namespace", "--context", "--kubeconfig", "--as", "--as-group", "--request-timeout",
                         "-o", "--output"})  # fmt: skip
SWITCHES = frozenset({"-A", "--all-namespaces"})


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


def command_first(argv: Sequence[str]) -> list[str]:
    """`-n llm --context c status x` -> `status -n llm --context c x`: global flags before the command move after
    it, where its parser reads them. Anything else before the command is left for the usage error."""
    leading: list[str] = []
    rest = list(argv)
    while rest and rest[0].startswith("-") and rest[0] not in ("-h", "--help"):
        flag = rest[0]
        name = flag.split("=", 1)[0]
        if name in SWITCHES or (name in VALUE_FLAGS and "=" in flag) or (flag[:2] in VALUE_FLAGS and len(flag) > 2):
            leading.append(rest.pop(0))  # -A, --namespace=llm, -nllm
        elif flag in VALUE_FLAGS and len(rest) > 1:
            leading += [rest.pop(0), rest.pop(0)]
        else:
            return list(argv)
    if not rest:
        return list(argv)
    return [rest[0], *leading, *rest[1:]]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="kubectl specserve",
        description="Operate SpecServes: status, explain, history, pause, resume, what-if.",
        epilog="kubectl's flags (-n, --context, --kubeconfig, --as, --request-timeout, -o) go before or after the "
        "command. Details of one: kubectl specserve COMMAND --help.",
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_module, help_text) in ALL.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    argv = command_first(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ALL:
        parser().parse_args(argv)  # usage, or the unknown-command error
        return 2
    module_name, help_text = ALL[argv[0]]
    try:
        return run_command(f"kubectl specserve {argv[0]}", module_name, help_text, argv[1:])
    except BrokenPipeError:
        return 1
    except KeyboardInterrupt:
        return 130


def complete_main(argv: Sequence[str] | None = None) -> int:
    """`kubectl_complete-specserve`: what kubectl (1.26+) runs for `kubectl specserve <TAB>`, cobra's protocol."""
    from specserve.plugin.completion import candidates  # noqa: PLC0415 (only for completion)

    words = list(sys.argv[1:] if argv is None else argv)
    for line in candidates(words):
        print(line)
    print(":4")  # cobra's ShellCompDirectiveNoFileComp: no file names
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

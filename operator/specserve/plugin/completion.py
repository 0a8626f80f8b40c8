"""Shell completion: `kubectl specserve completion bash|zsh` prints a script for `kubectl-specserve` typed
directly, and `kubectl_complete-specserve` (a console script) answers kubectl 1.26+ for `kubectl specserve <TAB>`.
Both ask candidates() (pure: commands, then the command's flags and choices; no cluster call)."""

from __future__ import annotations

import argparse
import importlib

from specserve.plugin.main import ALL

SCRIPTS = {
    "bash": """# kubectl-specserve completion (bash): source <(kubectl-specserve completion bash)
_kubectl_specserve() {
    local IFS=$'\\n'
    COMPREPLY=($(kubectl_complete-specserve "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null | grep -v '^:'))
}
complete -F _kubectl_specserve kubectl-specserve
""",
    "zsh": """# kubectl-specserve completion (zsh): source <(kubectl-specserve completion zsh)
_kubectl_specserve() {
    local -a found
    found=("${(@f)$(kubectl_complete-specserve "${(@)words[2,CURRENT]}" 2>/dev/null | grep -v '^:')}")
    compadd -a found
}
compdef _kubectl_specserve kubectl-specserve
""",
}


def _options(command: str) -> tuple[list[str], dict[str, list[str]]]:
    """The command's flags, and the choices of those that have some."""
    module = importlib.import_module(ALL[command][0])
    parser = argparse.ArgumentParser(add_help=True)
    module.add_arguments(parser)
    flags: list[str] = []
    choices: dict[str, list[str]] = {}
    for action in parser._actions:  # argparse has no public walk of its arguments
        flags += [o for o in action.option_strings if o.startswith("--")]
        if action.choices is not None and action.option_strings:
            for option in action.option_strings:
                choices[option] = [str(c) for c in action.choices]
    return flags, choices


def candidates(words: list[str]) -> list[str]:
    """What may come next after `kubectl specserve WORDS...` (the last word is the one being typed)."""
    *done, typing = words or [""]
    commands = [w for w in done if not w.startswith("-") and w in ALL]
    if not commands:
        return [c for c in ALL if c.startswith(typing)]
    command = commands[0]
    if command == "completion":
        return [s for s in SCRIPTS if s.startswith(typing)]
    flags, choices = _options(command)
    if done and done[-1] in choices:
        return [c for c in choices[done[-1]] if c.startswith(typing)]
    if typing.startswith("-"):
        return [f for f in flags if f.startswith(typing)]
    return []


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=sorted(SCRIPTS), help="the shell")


def run(args: argparse.Namespace) -> int:
    print(SCRIPTS[args.shell], end="")
    return 0

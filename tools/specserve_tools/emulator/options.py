"""The emulator's options, in one typed place.

`specserve emulate` builds its parser from `EmulatorOptions`, and the demo's kubelet reads the same fields to turn
a rendered SGLang command line into an emulator's (which flags the emulator takes, with how many values) and to
write the flags it adds itself. The option of field `time_scale` is `--time-scale`."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from specserve_tools.emulator.engine import Mode

DEFAULT_PROFILE = "seed-kimi-k25-rtxpro6000"


def _help(text: str, **argparse_kwargs: Any) -> dict[str, Any]:
    return {"help": text, **argparse_kwargs}


@dataclass(frozen=True)
class EmulatorOptions:
    """What one emulator runs with. Flags named like SGLang's mean the same thing, so a rendered command line
    can be pointed at it: no speculation flags = baseline, --speculative-algorithm = speculative,
    --speculative-adaptive = adaptive."""

    profile: str = field(
        default=DEFAULT_PROFILE,
        metadata=_help(f"shipped profile name or a profile JSON file (default {DEFAULT_PROFILE}; see --list-profiles)"),
    )
    from_bench: tuple[str, str] | None = field(
        default=None,
        metadata=_help(
            "use your own measured curves: two `specserve bench` results, speculative then baseline",
            metavar=("SPEC.json", "BASE.json"),
        ),
    )
    list_profiles: bool = field(default=False, metadata=_help("print the shipped profiles and exit"))
    mode: str | None = field(
        default=None, metadata=_help("override the mode the flags imply", choices=[m.value for m in Mode])
    )
    speculative_algorithm: str | None = field(default=None, metadata=_help("as SGLang: turns speculative mode on"))
    speculative_adaptive: bool = field(default=False, metadata=_help("as SGLang: adaptive mode"))
    speculative_adaptive_config: str | None = field(
        default=None,
        metadata=_help(
            "as SGLang: JSON file of batch-size keys -> candidate_steps (default: SGLang's default table)",
            metavar="PATH",
        ),
    )
    host: str = field(default="127.0.0.1", metadata=_help("address to listen on"))
    port: int = field(default=30000, metadata=_help("port to listen on"))
    served_model_name: str | None = field(
        default=None, metadata=_help("model name clients use (default: the profile's)")
    )
    max_running_requests: int | None = field(default=None, metadata=_help("override the profile's cap; the rest queue"))
    time_scale: float = field(
        default=1.0,
        metadata=_help(
            "run the emulated clock this many times faster than the wall clock (tokens/s x K, latencies / K)"
        ),
    )
    startup_seconds: float | None = field(
        default=None, metadata=_help("emulated start-up delay (default: the profile's)")
    )
    duration: float | None = field(default=None, metadata=_help("exit after this many wall seconds (bounded runs)"))

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> EmulatorOptions:
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)}
        if values["from_bench"] is not None:
            values["from_bench"] = tuple(values["from_bench"])
        return cls(**values)


def flag(name: str) -> str:
    """The command-line option of field `name`."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class _Shape:
    kind: type
    values: int  # how many values follow the flag on a command line: 0 for a switch


@cache
def _shapes() -> dict[str, _Shape]:
    hints = typing.get_type_hints(EmulatorOptions)
    out: dict[str, _Shape] = {}
    for f in dataclasses.fields(EmulatorOptions):
        hint = hints[f.name]
        if isinstance(hint, types.UnionType):  # X | None: the flag is optional, its values are X
            hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        if hint is bool:
            out[f.name] = _Shape(bool, 0)
        elif typing.get_origin(hint) is tuple:
            items = typing.get_args(hint)
            out[f.name] = _Shape(items[0], len(items))
        else:
            out[f.name] = _Shape(hint, 1)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`specserve emulate`'s flags, one per field of EmulatorOptions."""
    for f in dataclasses.fields(EmulatorOptions):
        shape = _shapes()[f.name]
        kwargs: dict[str, Any] = dict(f.metadata)
        if shape.values == 0:
            kwargs["action"] = "store_true"
        else:
            if shape.kind is not str:
                kwargs["type"] = shape.kind
            if shape.values > 1:
                kwargs["nargs"] = shape.values
            if f.default is not None:
                kwargs["default"] = f.default
        parser.add_argument(flag(f.name), **kwargs)


@cache
def flag_values() -> dict[str, int]:
    """Option string -> how many values it takes (0 for a switch)."""
    return {flag(name): shape.values for name, shape in _shapes().items()}


def to_argv(**values: str | float) -> list[str]:
    """Flags for the given options, in the order given (floats as %g): to_argv(port=8000) -> ["--port", "8000"].
    Raises TypeError on a name that is not an option."""
    shapes = _shapes()
    out: list[str] = []
    for name, value in values.items():
        if name not in shapes or shapes[name].values != 1:
            raise TypeError(f"{name!r} is not an emulator option that takes one value")
        out += [flag(name), f"{value:g}" if isinstance(value, float) else str(value)]
    return out

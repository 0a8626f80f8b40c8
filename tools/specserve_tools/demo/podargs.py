"""A rendered SGLang container's args -> a `specserve emulate` command line (pure).

The emulator takes SGLang's flags where they mean the same thing; flags it does not model (--model-path,
--tp-size, ...) are dropped here, with their values. --host/--port are pointed at a loopback port, mounted
files (the adaptive config) at where the kubelet wrote them."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from specserve_tools.emulator.options import flag_values, to_argv


def emulator_argv(
    rendered: Sequence[str],
    port: int,
    profile: str,
    startup_seconds: float,
    mounts: Mapping[str, str] | None = None,
    time_scale: float = 1.0,
) -> list[str]:
    known = flag_values()
    kept: list[str] = []
    i = 0
    args = list(rendered)
    while i < len(args):
        flag, _, inline = args[i].partition("=")
        if flag in known and flag not in ("--host", "--port"):
            take = 0 if inline else known[flag]
            kept.extend(args[i : i + 1 + take])
            i += 1 + take
            continue
        i += 1  # an SGLang flag the emulator does not model: skip it and its values
        while i < len(args) and not args[i].startswith("--"):
            i += 1
    for src, dst in (mounts or {}).items():
        kept = [dst + a[len(src) :] if a.startswith(src) else a for a in kept]
    # `python -m specserve_tools emulate` is `specserve emulate` without the entry-point lookup (works from a
    # checkout on PYTHONPATH too).
    return [
        sys.executable,
        "-m",
        "specserve_tools",
        "emulate",
        *kept,
        *to_argv(host="127.0.0.1", port=port, profile=profile, startup_seconds=startup_seconds, time_scale=time_scale),
    ]

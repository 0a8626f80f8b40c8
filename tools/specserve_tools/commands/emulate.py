"""`specserve emulate`: run a GPU-free SGLang 0.5.23 stand-in on loopback (tests, demos, bench fidelity).

Takes SGLang's own flags where they mean the same thing, so a rendered command line can be pointed at it:
no speculation flags = baseline, --speculative-algorithm = speculative, --speculative-adaptive = adaptive."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path

from aiohttp import web

from specserve_tools.emulator import options
from specserve_tools.emulator.adaptive import parse_adaptive_config
from specserve_tools.emulator.engine import EngineConfig, Mode
from specserve_tools.emulator.options import EmulatorOptions
from specserve_tools.emulator.profile import (
    Profile,
    ProfileError,
    load_profile,
    profile_from_bench,
    shipped_profiles,
)
from specserve_tools.emulator.server import build_app

PROG = "specserve emulate"

# The flags are EmulatorOptions' fields (the demo's kubelet reads the same source).
add_arguments = options.add_arguments


def _mode(args: EmulatorOptions) -> Mode:
    if args.mode:
        return Mode(args.mode)
    if args.speculative_adaptive:
        return Mode.ADAPTIVE
    if args.speculative_algorithm:
        return Mode.SPECULATIVE
    return Mode.BASELINE


def build_config(namespace: argparse.Namespace) -> tuple[EngineConfig, float | None]:
    """EngineConfig from the flags; raises ValueError with a one-line message on bad input."""
    args = EmulatorOptions.from_namespace(namespace)
    profile: Profile = profile_from_bench(*args.from_bench) if args.from_bench else load_profile(args.profile)
    if args.time_scale <= 0:
        raise ValueError(f"--time-scale must be > 0, got {args.time_scale:g}")
    if args.max_running_requests is not None and args.max_running_requests < 1:
        raise ValueError(f"--max-running-requests must be >= 1, got {args.max_running_requests}")
    if args.startup_seconds is not None and args.startup_seconds < 0:
        raise ValueError(f"--startup-seconds must be >= 0, got {args.startup_seconds:g}")
    adaptive = None
    if args.speculative_adaptive_config:
        path = Path(args.speculative_adaptive_config)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"{path}: cannot read the adaptive config ({exc.strerror or exc})") from exc
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: adaptive config is not valid JSON (line {exc.lineno}: {exc.msg})") from exc
        adaptive = parse_adaptive_config(doc, str(path))
    config = EngineConfig(
        profile=profile,
        mode=_mode(args),
        time_scale=args.time_scale,
        max_running=args.max_running_requests,
        adaptive_config=adaptive,
    )
    return config, args.startup_seconds


async def serve(app: web.Application, host: str, port: int, duration: float | None, ready_in: float = 0.0) -> None:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        note = f"; ready in {ready_in:g} s wall (--startup-seconds changes it)" if ready_in > 0 else ""
        print(f"specserve emulate: serving on http://{host}:{port}{note}", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=duration)
    finally:
        await runner.cleanup()


def run(args: argparse.Namespace) -> int:
    if args.list_profiles:
        for name in shipped_profiles():
            p = load_profile(name)
            print(f"{name}: {p.model_name}, start-up {p.startup_seconds:g}s, cap {p.max_running_requests}")
        return 0
    try:
        config, startup = build_config(args)
    except (ProfileError, ValueError) as exc:
        print(f"specserve emulate: {exc}", file=sys.stderr)
        return 2
    app = build_app(config, args.served_model_name, startup)
    try:
        startup_s = config.profile.startup_seconds if startup is None else startup
        asyncio.run(serve(app, args.host, args.port, args.duration, startup_s / config.time_scale))
    except OSError as exc:
        print(
            f"specserve emulate: cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); pick another --port",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        pass
    return 0

"""Running the emulator in a background thread (its own event loop) on a free loopback port: for tests and
scripts that drive it with synchronous code, such as the `specserve bench` command."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

from specserve_tools.emulator.engine import EngineConfig
from specserve_tools.emulator.server import build_app


def free_port(host: str = "127.0.0.1") -> int:
    """A loopback port free right now (for a process that needs one on its command line)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def emulator_thread(config: EngineConfig, startup_seconds: float = 0.0, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve the emulator until the block exits; yields its base URL."""
    with app_thread(build_app(config, startup_seconds=startup_seconds), host) as url:
        yield url


@contextmanager
def app_thread(app: web.Application, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve any aiohttp application until the block exits; yields its base URL."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, object] = {}

    async def start() -> web.AppRunner:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        server = site._server  # aiohttp keeps the bound socket here; port 0 needs it to learn the port
        assert isinstance(server, asyncio.base_events.Server)
        box["port"] = server.sockets[0].getsockname()[1]
        return runner

    def main() -> None:
        asyncio.set_event_loop(loop)
        try:
            box["runner"] = loop.run_until_complete(start())
        except BaseException as exc:  # surfaced to the caller below
            box["error"] = exc
            started.set()
            return
        started.set()
        loop.run_forever()
        runner = box["runner"]
        assert isinstance(runner, web.AppRunner)
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=main, name="specserve-emulator", daemon=True)
    thread.start()
    started.wait(timeout=30)
    if "error" in box:
        raise RuntimeError(f"emulator did not start: {box['error']}")
    try:
        yield f"http://{host}:{box['port']}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)

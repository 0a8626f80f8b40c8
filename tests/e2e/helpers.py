"""Shared pieces of the demo's end-to-end tests: emulator pods started by hand, HTTP waits."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from specserve_kubefake import FakeApiServer
from specserve_tools.demo.kubelet import free_port
from specserve_tools.demo.podargs import emulator_argv
from specserve_tools.demo.procs import Child, Supervisor

needs_haproxy = pytest.mark.skipif(shutil.which("haproxy") is None, reason="haproxy not installed (apt-get install)")
needs_prometheus = pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus not installed")


async def wait_status(url: str, status: int = 200, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            try:
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    if resp.status == status:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"{url} did not answer {status} within {timeout} s")


async def start_emulator(sup: Supervisor, name: str, speculative: bool) -> tuple[Child, int]:
    port = free_port()
    rendered = ["--speculative-algorithm", "EAGLE3"] if speculative else []
    child = sup.start(name, emulator_argv(rendered, port, "illustrative-crossover-8b", 0.0))
    await wait_status(f"http://127.0.0.1:{port}/health_generate")
    return child, port


def supervisor(tmp_path: Path) -> Supervisor:
    return Supervisor(tmp_path / "logs")


@contextlib.asynccontextmanager
async def fake_cluster() -> AsyncIterator[str]:
    """The URL of the stricter fake Kubernetes API the demo runs on; Deployments are left to the kubelet."""
    async with FakeApiServer(auto_ready=False) as api:
        yield str(api.url)

"""The integration suite's cluster: specserve_kubefake's FakeApiServer (a strict in-memory API server over HTTP).

It behaves like a real API server where the operator depends on it (defaults and omitempty on stored objects,
uid/resourceVersion/generation, the status subresource, server-side apply with managedFields, validation,
finalizers and garbage collection); see specserve_kubefake/__init__.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from specserve.commands.supervisor import serve
from specserve.config import OperatorConfig
from specserve.kube.client import ClientOptions, KubeClient
from specserve_kubefake import FakeApiServer, write_kubeconfig

__all__ = [
    "FakeApiServer",
    "emulated_cluster",
    "eventually",
    "operator_cluster",
    "running_operator",
    "write_kubeconfig",
]


IN_LOOP: list[FakeApiServer] = []  # the fake API servers serving from the running test's event loop


@asynccontextmanager
async def emulated_cluster(*namespaces: str, **options: Any) -> AsyncIterator[tuple[FakeApiServer, str]]:
    """A started FakeApiServer with ``namespaces`` created, and its URL. ``options`` go to FakeApiServer
    (``auto_ready``, ``prometheus_operator``, ``validate``, ``crds``, ...)."""
    async with FakeApiServer(**options) as api:
        for namespace in namespaces:
            api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        IN_LOOP.append(api)
        try:
            yield api, api.url
        finally:
            IN_LOOP.remove(api)


@asynccontextmanager
async def operator_cluster(
    namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> AsyncIterator[FakeApiServer]:
    """`emulated_cluster` with a kubeconfig pointing at it, for the operator's own client and kopf's login."""
    async with emulated_cluster(namespace, **options) as (api, url):
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, url)
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        # kopf logs in through the client library, which read KUBECONFIG when it was imported.
        monkeypatch.setattr("kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
        yield api


async def eventually(
    check: Callable[[], Any], timeout: float = 30.0, what: str = "condition", interval: float = 0.05
) -> Any:
    """Poll `check` until it is truthy; fail naming `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@asynccontextmanager
async def running_operator(config: OperatorConfig) -> AsyncIterator[asyncio.Task[None]]:
    """The real operator (`specserve run`'s serve()), in this test's loop, until the block ends; its task, so a test
    can check it is still running (or read how it ended)."""
    stop = asyncio.Event()
    kube = KubeClient.from_environment(ClientOptions(request_timeout=5, attempts=2, backoff_base=0.05))
    task = asyncio.create_task(serve(config, kube, stop_flag=stop))
    try:
        yield task
    finally:
        await stop_operator(task, stop)


async def stop_operator(task: asyncio.Task[None], stop: asyncio.Event, timeout: float = 30.0) -> None:
    """Set `stop` and wait for the operator's task to end (a test that expects it to end by itself reads its
    outcome). kopf waits up to 5 s for every task started after it before it returns; with the fake API server in
    this loop those include the server's connection handlers (a real API server is another process), so the fake
    drops its connections while the operator stops."""
    stop.set()
    if task.done():
        return
    deadline = time.monotonic() + timeout
    while not task.done() and time.monotonic() < deadline:
        await asyncio.wait({task}, timeout=0.1)
        for api in IN_LOOP:
            api.drop_connections()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise TimeoutError(f"the operator did not stop within {timeout:.0f} s")
    with contextlib.suppress(asyncio.CancelledError):
        await task

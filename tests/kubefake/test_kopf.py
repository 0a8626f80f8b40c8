"""kopf itself against the fake: cluster-wide mode (resource scanning, namespace watching) and finalizers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import kopf

from specserve_kubefake import SPECSERVES, FakeApiServer
from tests.kubefake.conftest import NS, kimi, namespace


async def _until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_a_clusterwide_kopf_operator_handles_creation_and_deletion() -> None:
    seen: list[str] = []
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=api.url, insecure=True)

    @kopf.on.create("specserve.io", "v1alpha1", "specserves", registry=registry)
    def created(name: str, **_: Any) -> None:
        seen.append(f"create {name}")

    @kopf.on.delete("specserve.io", "v1alpha1", "specserves", registry=registry)
    def deleted(name: str, **_: Any) -> None:
        seen.append(f"delete {name}")

    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    async with FakeApiServer() as api:
        api.create(namespace())
        stop = asyncio.Event()
        task = asyncio.create_task(kopf.operator(registry=registry, settings=settings, clusterwide=True,
                                                 standalone=True, stop_flag=stop))  # fmt: skip
        try:
            api.create(kimi())
            await _until(lambda: seen == ["create kimi-k25"])
            stored = api.get(SPECSERVES, NS, "kimi-k25") or {}
            assert stored["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]
            api.delete(SPECSERVES, NS, "kimi-k25")
            assert api.get(SPECSERVES, NS, "kimi-k25") is not None  # held by kopf's finalizer
            await _until(lambda: api.get(SPECSERVES, NS, "kimi-k25") is None)
            assert seen == ["create kimi-k25", "delete kimi-k25"]
        finally:
            stop.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, timeout=10)

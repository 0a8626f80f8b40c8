"""The integration suite's cluster: specserve.kubefake's FakeApiServer (a strict in-memory API server over HTTP).

It behaves like a real API server where the operator depends on it (defaults and omitempty on stored objects,
uid/resourceVersion/generation, the status subresource, server-side apply with managedFields, validation,
finalizers and garbage collection); see specserve/kubefake/__init__.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from specserve.kubefake import FakeApiServer, write_kubeconfig

__all__ = ["FakeApiServer", "emulated_cluster", "write_kubeconfig"]


@asynccontextmanager
async def emulated_cluster(*namespaces: str, **options: Any) -> AsyncIterator[tuple[FakeApiServer, str]]:
    """A started FakeApiServer with ``namespaces`` created, and its URL. ``options`` go to FakeApiServer
    (``auto_ready``, ``prometheus_operator``, ``validate``, ``crds``, ...)."""
    async with FakeApiServer(**options) as api:
        for namespace in namespaces:
            api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        yield api, api.url

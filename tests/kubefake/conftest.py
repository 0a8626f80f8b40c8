"""Fixtures for the fake API server's own tests."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from specserve.api.models import SpecServe
from specserve.render import render
from specserve_kubefake import FakeApiServer
from tests.conftest import ROOT, load_yaml

NS = "llm"


def namespace(name: str = NS) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def kimi(name: str = "kimi-k25") -> dict[str, Any]:
    doc: dict[str, Any] = load_yaml(ROOT / "examples" / "kimi-k25-rtxpro6000.yaml")
    doc["metadata"].update({"name": name, "namespace": NS})
    return doc


def rendered(owner: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The operator's manifests for a stored SpecServe, by kind/name."""
    obj = SpecServe.model_validate(copy.deepcopy(owner))
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in render(obj)}


def deployment(name: str = "web", **spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]},
            },
        },
    }
    body["spec"].update(spec)
    return body


@pytest.fixture()
def server() -> FakeApiServer:
    """A fake that is not listening: direct store access only (no HTTP)."""
    api = FakeApiServer()
    api.create(namespace())
    return api


@pytest.fixture()
async def live() -> AsyncIterator[tuple[FakeApiServer, aiohttp.ClientSession]]:
    """A listening fake and an HTTP session."""
    async with FakeApiServer() as api, aiohttp.ClientSession(base_url=api.url) as session:
        api.create(namespace())
        yield api, session

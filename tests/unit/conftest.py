"""Fixtures shared by the unit tests that talk to the fake API server over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes import client as k8s

from specserve.kube.client import ClientOptions, KubeClient
from specserve_kubefake import FakeApiServer


@pytest.fixture()
async def kube(fake: FakeApiServer) -> AsyncIterator[KubeClient]:
    """The operator's own client against the module's `fake` API server (quick retries)."""
    configuration = k8s.Configuration()
    configuration.host = fake.url
    client = KubeClient(configuration, ClientOptions(request_timeout=5, attempts=2, backoff_base=0.01))
    yield client
    await client.close()

"""Events correlated as client-go's recorder does: a weight step every evaluation must not become one new Event
each (17 in 5 minutes for one SpecServe): repeats bump a count, a run of similar ones is combined into one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes import client as k8s

from specserve.kube.client import KubeClient
from specserve.kube.events import COMBINED, MAX_SIMILAR, WINDOW_SECONDS, Correlator
from specserve_kubefake import EVENTS, FakeApiServer

INVOLVED = {
    "apiVersion": "specserve.io/v1alpha1",
    "kind": "SpecServe",
    "metadata": {"name": "kimi", "namespace": "llm", "uid": "u1"},
}


@pytest.fixture()
async def api() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as server:
        server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm"}})
        yield server


def client(api: FakeApiServer) -> KubeClient:
    configuration = k8s.Configuration()
    configuration.host = api.url
    return KubeClient(configuration)


def events(api: FakeApiServer) -> list[dict[str, Any]]:
    return sorted(api.list(EVENTS, "llm"), key=lambda e: e["firstTimestamp"] + e["metadata"]["name"])


async def test_seventeen_weight_steps_are_not_seventeen_events(api: FakeApiServer) -> None:
    kube = client(api)
    try:
        for step in range(17):
            w = 100 - 5 * step
            message = f"Speculative -> Speculative (weights {w}/{100 - w}): demand above the crossover"
            await kube.post_event(INVOLVED, reason="SetWeights", message=message)
    finally:
        await kube.close()
    posted = events(api)
    assert len(posted) == MAX_SIMILAR  # 9 single steps, then one Event that combines the other 8
    combined = [e for e in posted if e["message"].startswith(COMBINED)]
    assert len(combined) == 1 and combined[0]["count"] == 17 - (MAX_SIMILAR - 1)
    assert combined[0]["message"].endswith("(weights 20/80): demand above the crossover")  # the latest step
    assert sum(e["count"] for e in posted) == 17  # every step still counted


async def test_a_repeated_event_bumps_its_count(api: FakeApiServer) -> None:
    kube = client(api)
    try:
        for _ in range(3):
            await kube.post_event(INVOLVED, reason="MetricsUnavailable", message="no data", type_="Warning")
        await kube.post_event(INVOLVED, reason="CurveDrift", message="no data", type_="Warning")  # another reason
    finally:
        await kube.close()
    posted = {e["reason"]: e for e in events(api)}
    assert len(posted) == 2 and posted["MetricsUnavailable"]["count"] == 3 and posted["CurveDrift"]["count"] == 1


async def test_an_expired_event_is_posted_afresh(api: FakeApiServer) -> None:
    kube = client(api)
    try:
        await kube.post_event(INVOLVED, reason="MetricsUnavailable", message="no data", type_="Warning")
        (first,) = events(api)
        api.delete(EVENTS, "llm", first["metadata"]["name"])  # the Event TTL ran out
        await kube.post_event(INVOLVED, reason="MetricsUnavailable", message="no data", type_="Warning")
    finally:
        await kube.close()
    (again,) = events(api)
    assert again["count"] == 1 and again["metadata"]["name"] != first["metadata"]["name"]


def test_the_window_starts_over() -> None:
    correlator = Correlator()
    names = iter(f"e{i}" for i in range(100))
    key = ("u1", "llm", "SpecServe", "kimi")
    first = correlator.correlate(key, "Normal", "SetWeights", "m", 0.0, lambda: next(names))
    correlator.posted(key, "Normal", "SetWeights", first)
    again = correlator.correlate(key, "Normal", "SetWeights", "m", 60.0, lambda: next(names))
    assert (again.name, again.count) == (first.name, 2)
    correlator.posted(key, "Normal", "SetWeights", again)
    later = correlator.correlate(key, "Normal", "SetWeights", "m", 60.0 + WINDOW_SECONDS + 1, lambda: next(names))
    assert later.new and later.name != first.name

"""One SpecServe under load-based switching, as the switching integration tests set it up: its name, its document,
the real operator that switches it (compressed: evaluation every second), what its status and route say, and the
Direct-source world (`specserve emulate` processes at the pods' IPs, the kubelet's word that the pods run there).

The fixtures built on these (the fake API server, emulators, Prometheus, the load) are in conftest.py."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from specserve.config import OperatorConfig
from specserve_kubefake import EVENTS, HTTPROUTES, PODS, SPECSERVES, FakeApiServer
from specserve_tools.emulator.testing import free_port
from tests.integration.kube_emulator import eventually as wait_for
from tests.integration.kube_emulator import running_operator
from tests.integration.switching_env import Load, emulator_processes

NS = "llm"
NAME = "kimi-k25"
# Where the Direct world's pods run: distinct loopback addresses, as pods have distinct IPs.
DIRECT_HOSTS = {"speculative": "127.0.0.2", "baseline": "127.0.0.3"}


async def eventually(check: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    return await wait_for(check, timeout, what, interval=0.1)


def operator(
    prometheus_url: str | None, max_concurrent_rolls: int | None = None
) -> contextlib.AbstractAsyncContextManager[asyncio.Task[None]]:
    config = OperatorConfig(namespaces=(NS,), resync_seconds=5.0, prometheus_url=prometheus_url, post_events=True,
                            max_concurrent_rolls=max_concurrent_rolls)  # fmt: skip
    return running_operator(config)


def monitored_doc(doc: dict[str, Any], name: str = NAME) -> dict[str, Any]:
    """A copy of `doc` named `name` in NS, its pods scraped every second."""
    body = copy.deepcopy(doc)
    body["metadata"] = {"name": name, "namespace": NS}
    body["spec"]["monitoring"] = {"podMonitor": True, "intervalSeconds": 1}
    return body


def switching_doc(doc: dict[str, Any], name: str = NAME) -> dict[str, Any]:
    """Switching on a static crossover of 6, Baseline first, every delay but the move back's 2 s off."""
    body = monitored_doc(doc, name)
    body["spec"]["switching"] = {
        "initialMode": "Baseline",
        "crossoverConcurrency": 6,
        "hysteresis": 0.2,
        "evaluationIntervalSeconds": 1,
        "upStabilizationSeconds": 0,
        "downStabilizationSeconds": 2,
        "minDwellSeconds": 0,
    }
    return body


def route_weights(api: FakeApiServer) -> dict[str, int] | None:
    route = api.get(HTTPROUTES, NS, NAME)
    if route is None:
        return None
    return {b["name"]: b["weight"] for b in route["spec"]["rules"][0]["backendRefs"]}


def spec_weight(api: FakeApiServer) -> int | None:
    weights = route_weights(api)
    return None if weights is None else weights[f"{NAME}-spec"]


def status(api: FakeApiServer) -> dict[str, Any]:
    obj = api.get(SPECSERVES, NS, NAME) or {}
    return dict(obj.get("status") or {})


def condition(api: FakeApiServer, type_: str) -> dict[str, Any]:
    return next((c for c in status(api).get("conditions", []) if c["type"] == type_), {})


def events(api: FakeApiServer) -> list[tuple[str, str]]:
    """(type, reason) of each occurrence: an Event the operator bumped (a repeat, kube.events) counts its count."""
    return [
        (e["type"], e["reason"])
        for e in api.list(EVENTS, NS)
        if e["involvedObject"]["name"] == NAME
        for _ in range(e.get("count") or 1)
    ]


async def route_accepted(api: FakeApiServer) -> None:
    """Once the operator created the HTTPRoute, the gateway's word that it accepted it."""
    await eventually(lambda: api.get(HTTPROUTES, NS, NAME), what="the HTTPRoute")
    api.set_route_accepted(NS, NAME)


async def all_on_speculative(api: FakeApiServer) -> None:
    """The route accepted, and at low load all its weight on the speculative pool (from initialMode Baseline)."""
    await route_accepted(api)
    await eventually(lambda: spec_weight(api) == 100, what="speculative weight 100 at low load")


@dataclass(frozen=True)
class DirectWorld:
    load: Load  # holds requests on the speculative pool's engine
    operator: asyncio.Task[None]


@contextlib.asynccontextmanager
async def direct_world(
    api: FakeApiServer, doc: dict[str, Any], switching: dict[str, Any] | None = None
) -> AsyncIterator[DirectWorld]:
    """`specserve emulate` processes at DIRECT_HOSTS (speculative, baseline) on one port, one request held on the
    speculative one, the operator without Prometheus, and `doc` (as switching_doc, `switching` merged into its
    spec.switching) created reading the Direct source from that port. The pods are the test's to create
    (`kubelet_pod`)."""
    port = free_port()
    with emulator_processes(list(DIRECT_HOSTS.values()), port) as urls:
        load = Load(urls[0])
        try:
            await load.set(1)
            async with operator(None) as running:
                body = switching_doc(doc)
                body["spec"]["switching"].update(switching or {})
                body["spec"]["switching"]["metrics"] = {"source": "Direct"}
                body["spec"]["engine"]["port"] = port
                api.create(body)
                yield DirectWorld(load, running)
        finally:
            await load.close()


def kubelet_pod(api: FakeApiServer, pool: str, index: int, ip: str, ready: bool = True) -> None:
    """The kubelet's word: pod `index` of `pool` runs at `ip`, Ready or not (still loading its model)."""
    pod_name = f"{NAME}-{pool}-{index}"
    labels = {"app.kubernetes.io/managed-by": "specserve", "specserve.io/instance": NAME, "specserve.io/pool": pool}
    api.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name, "namespace": NS, "labels": labels},
        "spec": {"containers": [{"name": "sglang", "image": "sglang"}]},
    })  # fmt: skip
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    api.patch_status(PODS, NS, pod_name, {"phase": "Running", "podIP": ip, "conditions": conditions})

"""One SpecServe's hostile metrics hurt only that SpecServe (issue 31, 3), against the real operator and the fake
API server with the Direct source: the pods' /metrics are tiny HTTP servers on loopback addresses, one pool
publishing `sglang:num_running_reqs` near 1e200 (varying: the closed loop's noise estimate raised OverflowError on
it and ended every switching round, for every SpecServe). The SpecServe after it in the round still has its
weights moved; the hostile one holds, and its status names why."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from specserve_kubefake import HTTPROUTES, PODS, SPECSERVES, FakeApiServer
from specserve_tools.emulator.testing import free_port
from tests.integration.switching_world import NS, eventually, operator, switching_doc

JSON = dict[str, Any]
Value = Callable[[], float]
# Loopback addresses, as pods have distinct IPs (127.0.0.2-.4 are the other Direct tests').
HOSTS = {("bad", "spec"): "127.0.0.11", ("bad", "base"): "127.0.0.12",
         ("good", "spec"): "127.0.0.13", ("good", "base"): "127.0.0.14"}  # fmt: skip


def exposition(running: float) -> str:
    return (
        "# TYPE sglang:num_running_reqs gauge\n"
        f"sglang:num_running_reqs {running!r}\n"
        "# TYPE sglang:num_queue_reqs gauge\n"
        "sglang:num_queue_reqs 0.0\n"
    )


@contextlib.asynccontextmanager
async def pod_metrics(values: dict[str, Value], port: int) -> AsyncIterator[None]:
    """One /metrics server per address, each answering the value its callable gives at each scrape."""
    runners = []
    try:
        for host, value in values.items():

            async def metrics(_: web.Request, value: Value = value) -> web.Response:
                return web.Response(text=exposition(value()), content_type="text/plain")

            app = web.Application()
            app.router.add_get("/metrics", metrics)
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, host, port).start()
            runners.append(runner)
        yield
    finally:
        for runner in runners:
            await runner.cleanup()


def pod(api: FakeApiServer, name: str, pool: str, ip: str) -> None:
    """The kubelet's word: the pool's one pod runs at `ip`, Ready."""
    role = {"spec": "speculative", "base": "baseline"}[pool]
    labels = {"app.kubernetes.io/managed-by": "specserve", "specserve.io/instance": name, "specserve.io/pool": role}
    pod_name = f"{name}-{pool}-0"
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name, "namespace": NS, "labels": labels},
                "spec": {"containers": [{"name": "sglang", "image": "sglang"}]}})  # fmt: skip
    api.patch_status(PODS, NS, pod_name, {"phase": "Running", "podIP": ip,
                                          "conditions": [{"type": "Ready", "status": "True"}]})  # fmt: skip


def status(api: FakeApiServer, name: str) -> JSON:
    return dict((api.get(SPECSERVES, NS, name) or {}).get("status") or {})


def condition(api: FakeApiServer, name: str, type_: str) -> JSON:
    return next((c for c in status(api, name).get("conditions", []) if c["type"] == type_), {})


def spec_weight(api: FakeApiServer, name: str) -> int | None:
    route = api.get(HTTPROUTES, NS, name)
    if route is None:
        return None
    return next(int(b["weight"]) for b in route["spec"]["rules"][0]["backendRefs"] if b["name"] == f"{name}-spec")


async def serving(api: FakeApiServer, doc: JSON, name: str, port: int) -> None:
    body = switching_doc(doc, name)
    body["spec"]["switching"]["metrics"] = {"source": "Direct"}
    body["spec"]["engine"]["port"] = port
    api.create(body)
    await eventually(lambda: api.get(HTTPROUTES, NS, name), what=f"{name}'s HTTPRoute")
    api.set_route_accepted(NS, name)
    for pool in ("spec", "base"):
        pod(api, name, pool, HOSTS[(name, pool)])


async def test_a_pool_publishing_1e200_holds_its_own_specserve_and_no_other(
    fake: FakeApiServer, kimi_doc: JSON
) -> None:
    port = free_port()
    hostile = random.Random(31)
    values: dict[str, Value] = {
        HOSTS[("bad", "spec")]: lambda: 1e200 * hostile.uniform(1, 3),  # a gauge no deployment produces
        HOSTS[("bad", "base")]: lambda: 1.0,
        HOSTS[("good", "spec")]: lambda: 0.0,
        HOSTS[("good", "base")]: lambda: 1.0,  # low load: all weight goes to the speculative pool
    }
    async with pod_metrics(values, port), operator(None) as running:
        await serving(fake, kimi_doc, "bad", port)  # first in the loop's round
        # The hostile SpecServe is evaluated (before the fix: its evaluation raised every round from the third).
        await eventually(lambda: "switching" in status(fake, "bad"), what="bad evaluated")
        await asyncio.sleep(4)
        await serving(fake, kimi_doc, "good", port)  # evaluated after it, in the same rounds
        await eventually(lambda: spec_weight(fake, "good") == 100, what="good's weights moved to speculative")
        cond = await eventually(lambda: (c := condition(fake, "bad", "MetricsAvailable"))["status"] == "False" and c,
                                what="bad's load unknown")  # fmt: skip
        assert cond["reason"] == "ImplausibleReading" and "hostile exporter" in cond["message"]
        assert "lastDecision" not in status(fake, "bad") and spec_weight(fake, "bad") == 0  # initialMode held
        assert [d["action"] for d in status(fake, "good")["history"]] != []
        assert not running.done(), "the operator stopped"

"""The demo's gateway: real HAProxy, weights over the admin socket move traffic at once and drop nothing."""

from __future__ import annotations

import asyncio
import collections
from pathlib import Path

import aiohttp

from specserve.api.validation import parse_object
from specserve.kube.kinds import HTTPROUTE
from specserve.render import render
from specserve_tools.demo.gateway import (
    Endpoint,
    accepted,
    route_weights,
    server_weights,
    start_gateway,
    weight_steps,
)
from specserve_tools.demo.kubeapi import DemoApi
from specserve_tools.demo.kubelet import free_port
from specserve_tools.demo.load import Record, stream
from specserve_tools.demo.procs import group_alive
from specserve_tools.demo.scenario import NAME, NAMESPACE, Scenario
from specserve_tools.demo.wiring import NAMESPACES, Demo, Options
from specserve_tools.emulator.profile import load_profile
from tests.e2e.helpers import fake_cluster, needs_haproxy, start_emulator, supervisor

BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 8,
    "stream": True,
    "stream_options": {"include_usage": True},
}


def test_server_weights_split_the_pool_weight_over_its_ready_pods() -> None:
    eps = [Endpoint("s-1", "spec", 1), Endpoint("s-2", "spec", 2), Endpoint("b-1", "base", 3)]
    assert server_weights({"spec": 60, "base": 40}, eps) == {"s-1": 60, "s-2": 60, "b-1": 80}
    assert server_weights({"spec": 0, "base": 100}, eps) == {"s-1": 0, "s-2": 0, "b-1": 200}
    assert server_weights({}, eps) == {"s-1": 0, "s-2": 0, "b-1": 0}  # a pool the route does not name: no traffic


def test_weight_steps_never_leave_every_server_at_zero() -> None:
    # Each `set weight` applies on its own: a flip must raise the idle pool before it cuts the serving one.
    for current, wanted in (
        ({"b-1": 200, "s-1": 0}, {"b-1": 0, "s-1": 200}),
        ({"s-1": 200, "b-1": 0}, {"s-1": 0, "b-1": 200}),
        ({"s-1": 100, "s-2": 100, "b-1": 0}, {"s-1": 0, "s-2": 0, "b-1": 200}),
        ({"s-1": 60, "b-1": 140}, {"s-1": 140, "b-1": 60}),
    ):
        steps = weight_steps(current, wanted)
        state = dict(current)
        for pod, weight in steps:
            state[pod] = weight
            assert sum(state.values()) > 0, (current, wanted, steps)
        assert state == wanted
    assert weight_steps({"s-1": 200}, {"s-1": 200}) == []  # nothing to change: no command


def test_route_weights_read_the_backend_refs() -> None:
    route = {"spec": {"rules": [{"backendRefs": [{"name": "a", "weight": 30}, {"name": "b"}]}]}}
    assert route_weights(route) == {"a": 30, "b": 1}
    assert route_weights(None) == {}


async def _count(url: str, n: int) -> collections.Counter[str]:
    async with aiohttp.ClientSession() as session:
        recs = [Record(start=0.0) for _ in range(n)]
        await asyncio.gather(*(stream(session, url + "/v1/chat/completions", BODY, r) for r in recs))
    assert [r.error for r in recs if r.error] == []
    return collections.Counter(r.server for r in recs)


@needs_haproxy
async def test_weights_move_traffic_without_reload_and_without_failures(tmp_path: Path) -> None:
    sup = supervisor(tmp_path)
    try:
        _, spec_port = await start_emulator(sup, "spec-1", speculative=True)
        _, base_port = await start_emulator(sup, "base-1", speculative=False)
        gw = await start_gateway(sup, tmp_path, free_port(), free_port())
        eps = [Endpoint("spec-1", "spec", spec_port), Endpoint("base-1", "base", base_port)]

        await gw.sync({"spec": 100, "base": 0}, eps)
        assert set(await _count(gw.url, 20)) == {"spec-1"}
        await gw.sync({"spec": 0, "base": 100}, eps)
        assert set(await _count(gw.url, 20)) == {"base-1"}
        await gw.sync({"spec": 50, "base": 50}, eps)
        split = await _count(gw.url, 40)
        assert 10 <= split["spec-1"] <= 30 and 10 <= split["base-1"] <= 30
        assert await gw.socket.servers() == {"spec-1": (100, True), "base-1": (100, True)}
        haproxy_pid = gw.child.pid

        # Long streams in flight while the weights flip back and forth: none may fail.
        long_body = {**BODY, "max_tokens": 200}
        async with aiohttp.ClientSession() as session:
            recs = [Record(start=0.0) for _ in range(30)]
            flows = [stream(session, gw.url + "/v1/chat/completions", long_body, r) for r in recs]

            async def flip() -> None:
                for i in range(10):
                    await gw.sync({"spec": 100 * (i % 2), "base": 100 * (1 - i % 2)}, eps)
                    await asyncio.sleep(0.1)

            await asyncio.gather(flip(), *flows)
        assert [r.error for r in recs if r.error] == []
        assert all(r.tokens == 200 for r in recs)
        assert gw.child.pid == haproxy_pid and gw.child.alive()  # no reload happened
    finally:
        pids = [c.pid for c in sup.children]
        await sup.stop_all()
    assert not any(group_alive(p) for p in pids)


@needs_haproxy
async def test_a_pod_leaving_is_drained_then_deleted(tmp_path: Path) -> None:
    sup = supervisor(tmp_path)
    try:
        _, port_a = await start_emulator(sup, "a", speculative=False)
        child_b, port_b = await start_emulator(sup, "b", speculative=False)
        gw = await start_gateway(sup, tmp_path, free_port(), free_port())
        both = [Endpoint("a", "base", port_a), Endpoint("b", "base", port_b)]
        await gw.sync({"base": 100}, both)
        async with aiohttp.ClientSession() as session:
            recs = [Record(start=0.0) for _ in range(20)]
            flows = asyncio.gather(
                *(stream(session, gw.url + "/v1/chat/completions", {**BODY, "max_tokens": 150}, r) for r in recs)
            )
            await asyncio.sleep(0.3)
            await gw.sync({"base": 100}, both[:1])  # b leaves the endpoints: disabled, its streams go on
            assert (await gw.socket.servers())["b"][1] is False
            later = await _count(gw.url, 10)
            await flows
        assert set(later) == {"a"}
        assert [r.error for r in recs if r.error] == []
        await sup.stop(child_b)
        await gw.forget("b")
        assert set(await gw.socket.servers()) == {"a"}
    finally:
        await sup.stop_all()


@needs_haproxy
async def test_the_gateway_controller_follows_the_httproute_and_reports_it_accepted(tmp_path: Path) -> None:
    scenario = Scenario("TrafficSplit", load_profile("illustrative-crossover-8b"), 60, 20, "http://127.0.0.1:1")
    route = next(m for m in render(parse_object(scenario.specserve())) if m["kind"] == "HTTPRoute")
    route["metadata"].pop("ownerReferences", None)
    sup = supervisor(tmp_path)
    stop = asyncio.Event()
    async with fake_cluster() as url, aiohttp.ClientSession() as session:
        api = DemoApi(url, session)
        await api.create(NAMESPACES, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        await api.create(HTTPROUTE, NAMESPACE, route)
        demo = Demo(Options(), sup, tmp_path, session, api=api)
        task: asyncio.Task[None] | None = None
        try:
            demo.gateway = await start_gateway(sup, tmp_path, free_port(), free_port())
            _, spec_port = await start_emulator(sup, "spec-1", speculative=True)
            _, base_port = await start_emulator(sup, "base-1", speculative=False)
            await demo.on_endpoints(
                [Endpoint("spec-1", f"{NAME}-spec", spec_port), Endpoint("base-1", f"{NAME}-base", base_port)]
            )
            task = asyncio.create_task(demo.watch_route(stop))

            async def programmed(expected: dict[str, tuple[int, bool]]) -> None:
                for _ in range(40):
                    if demo.gateway is not None and await demo.gateway.socket.servers() == expected:
                        return
                    await asyncio.sleep(0.1)
                raise AssertionError(f"HAProxy never got {expected}")

            await programmed({"spec-1": (200, True), "base-1": (0, True)})  # the rendered initial split: 100/0
            live = await api.get(HTTPROUTE, NAMESPACE, NAME)
            assert live is not None and accepted(live)  # what the operator's RouteReady reads
            refs = live["spec"]["rules"][0]["backendRefs"]
            for ref in refs:
                ref["weight"] = 30 if ref["name"].endswith("-spec") else 70
            await api.patch(HTTPROUTE, NAMESPACE, NAME, {"spec": {"rules": live["spec"]["rules"]}})
            await programmed({"spec-1": (60, True), "base-1": (140, True)})
            split = await _count(demo.gateway.url, 40)
            assert split["base-1"] > split["spec-1"] > 0
        finally:
            stop.set()
            if task is not None:
                await task
            await sup.stop_all()

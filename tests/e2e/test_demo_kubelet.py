"""The demo's kubelet: rendered Deployments become emulator processes, rolled and drained like Kubernetes does,
with Deployment status and Ready endpoints reported back."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp

from specserve.api.validation import parse_object
from specserve.kube.kinds import DEPLOYMENT, SERVICE, Kind
from specserve.render import render
from specserve_kubefake import FakeApiServer
from specserve_tools.demo.gateway import Endpoint
from specserve_tools.demo.kubeapi import DemoApi
from specserve_tools.demo.kubelet import Kubelet
from specserve_tools.demo.load import Record, stream
from specserve_tools.demo.procs import Supervisor, group_alive
from specserve_tools.demo.rollout import Phase, Pod, plan_rollout, rollout_limits
from specserve_tools.demo.scenario import NAMESPACE, Scenario
from specserve_tools.emulator.profile import load_profile
from tests.e2e.helpers import fake_cluster

NAMESPACES = Kind("v1", "Namespace", "namespaces")


def _pod(name: str, h: str, phase: Phase) -> Pod:
    return Pod(name, "d", h, {}, 0, child=None, phase=phase)  # type: ignore[arg-type]


def test_rollout_without_surge_stops_one_old_pod_before_starting_its_successor() -> None:
    pods = [_pod("a", "old", Phase.READY), _pod("b", "old", Phase.READY)]
    assert plan_rollout(2, 0, 1, "new", pods).start == 0
    assert plan_rollout(2, 0, 1, "new", pods).stop == ("a",)  # one at a time: b keeps serving
    pods[0].phase = Phase.TERMINATING
    assert plan_rollout(2, 0, 1, "new", pods).start == 0  # a still holds its GPU
    pods.pop(0)
    assert plan_rollout(2, 0, 1, "new", pods).start == 1
    pods.append(_pod("c", "new", Phase.STARTING))
    assert plan_rollout(2, 0, 1, "new", pods).stop == ()  # b waits until c is Ready


def test_rollout_with_surge_keeps_every_old_pod_until_its_successor_is_ready() -> None:
    pods = [_pod("a", "old", Phase.READY)]
    plan = plan_rollout(1, 1, 0, "new", pods)
    assert (plan.start, plan.stop) == (1, ())
    pods.append(_pod("b", "new", Phase.STARTING))
    assert plan_rollout(1, 1, 0, "new", pods).stop == ()
    pods[1].phase = Phase.READY
    assert plan_rollout(1, 1, 0, "new", pods).stop == ("a",)


def test_scale_down_stops_unready_pods_first_and_rollout_limits_read_percentages() -> None:
    pods = [_pod("a", "h", Phase.READY), _pod("b", "h", Phase.STARTING)]
    assert plan_rollout(1, 0, 1, "h", pods).stop == ("b",)
    assert rollout_limits({"spec": {"replicas": 4, "strategy": {"rollingUpdate": {"maxSurge": "25%"}}}}) == (1, 1)
    assert rollout_limits({"spec": {"replicas": 1}}) == (1, 0)


async def _eventually(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.asynccontextmanager
async def _running_kubelet(tmp_path: Path, seen: list[list[Endpoint]]) -> AsyncIterator[tuple[Kubelet, DemoApi]]:
    scenario = Scenario("TrafficSplit", load_profile("illustrative-crossover-8b"), 60, 20, "http://127.0.0.1:1")
    manifests = render(parse_object(scenario.specserve()))
    async with fake_cluster() as url, aiohttp.ClientSession() as session:
        api = DemoApi(url, session)
        with contextlib.suppress(Exception):
            await api.create(NAMESPACES, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for m in manifests:
            if m["kind"] in ("Deployment", "Service"):
                m["metadata"].pop("ownerReferences", None)  # no SpecServe here: nothing to garbage-collect by
                await api.create(DEPLOYMENT if m["kind"] == "Deployment" else SERVICE, NAMESPACE, m)

        async def record(endpoints: list[Endpoint]) -> None:
            seen.append(endpoints)

        sup = Supervisor(tmp_path / "logs")
        kubelet = Kubelet(
            api, sup, NAMESPACE, "illustrative-crossover-8b", tmp_path, startup_seconds=1.0, on_endpoints=record
        )
        stop = asyncio.Event()
        task = asyncio.create_task(kubelet.run(stop))
        try:
            yield kubelet, api
        finally:
            pids = [c.pid for c in sup.children]
            stop.set()
            await task
            assert not any(group_alive(p) for p in pids), "a pod process was left behind"


async def _status(api: DemoApi, name: str) -> dict[str, Any]:
    dep = await api.get(DEPLOYMENT, NAMESPACE, name)
    return (dep or {}).get("status") or {}


async def test_pods_start_become_ready_and_report_status_and_endpoints(tmp_path: Path) -> None:
    seen: list[list[Endpoint]] = []
    async with _running_kubelet(tmp_path, seen) as (kubelet, api):
        spec, base = "demo-8b-spec", "demo-8b-base"
        assert await _eventually(lambda: any(p.phase == Phase.STARTING for p in kubelet.pods.values()), what="start")
        for name in (spec, base):
            status = await _eventually(functools.partial(_ready, api, name), what=f"{name} ready")
            assert status["replicas"] == status["updatedReplicas"] == status["availableReplicas"] == 1
        assert {(e.pool, e.port > 0) for e in seen[-1]} == {(spec, True), (base, True)}
        pod = next(p for p in kubelet.pods.values() if p.deployment == spec)
        assert pod.ready_at is not None and pod.ready_at - pod.started >= 0.9  # the start-up delay was honoured
        # The pod really runs the rendered flags: speculative, with the engine's cap.
        async with aiohttp.ClientSession() as session, session.get(pod.url + "/server_info") as resp:
            info = await resp.json()
        assert info["specserve_emulator"]["mode"] == "speculative"
        assert info["max_running_requests"] == 256


async def _ready(api: DemoApi, name: str, replicas: int = 1) -> dict[str, Any] | None:
    status = await _status(api, name)
    return status if status.get("readyReplicas") == replicas else None


async def test_template_change_rolls_the_pod_after_draining_its_requests(tmp_path: Path) -> None:
    seen: list[list[Endpoint]] = []
    async with _running_kubelet(tmp_path, seen) as (kubelet, api):
        name = "demo-8b-base"
        await _eventually(lambda: _ready(api, name), what="ready")
        old = next(p for p in kubelet.pods.values() if p.deployment == name)
        async with aiohttp.ClientSession() as session:
            rec = Record(start=0.0)
            body = {
                "model": "demo",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 300,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            request = asyncio.create_task(stream(session, old.url + "/v1/chat/completions", body, rec))
            await asyncio.sleep(0.5)
            patch = {"spec": {"template": {"metadata": {"annotations": {"specserve.io/engine-config-hash": "x"}}}}}
            await api.patch(DEPLOYMENT, NAMESPACE, name, patch)
            await _eventually(lambda: old.phase == Phase.TERMINATING, what="old pod terminating")
            assert all(e.pod != old.name for e in seen[-1])  # out of the endpoints before its drain
            await request
        assert rec.error is None and rec.tokens == 300  # the drain waited for the request
        new = await _eventually(
            lambda: next((p for p in kubelet.pods.values() if p.deployment == name and p.phase == Phase.READY), None),
            what="new pod ready",
        )
        assert new.name != old.name and not old.child.alive()
        status = await _status(api, name)
        dep = await api.get(DEPLOYMENT, NAMESPACE, name)
        assert dep is not None
        await _eventually(lambda: _ready(api, name), what="status after the roll")
        assert status.get("observedGeneration") in (None, dep["metadata"].get("generation"))


async def test_scaling_adds_and_removes_pods(tmp_path: Path) -> None:
    seen: list[list[Endpoint]] = []
    async with _running_kubelet(tmp_path, seen) as (kubelet, api):
        name = "demo-8b-spec"
        await _eventually(lambda: _ready(api, name), what="ready")
        await api.patch(DEPLOYMENT, NAMESPACE, name, {"spec": {"replicas": 2}})
        await _eventually(lambda: _ready(api, name, 2), what="two ready")
        assert sum(e.pool == name for e in seen[-1]) == 2
        await api.patch(DEPLOYMENT, NAMESPACE, name, {"spec": {"replicas": 0}})
        await _eventually(lambda: kubelet.ready_pods(name) == 0 and not kubelet._pods_of(name), what="scaled to 0")
        assert all(e.pool != name for e in seen[-1])


async def test_the_kubelet_rides_out_api_errors_and_keeps_the_pods(tmp_path: Path) -> None:
    async with FakeApiServer(auto_ready=False) as server, aiohttp.ClientSession() as session:
        api = DemoApi(str(server.url), session)
        await api.create(NAMESPACES, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        scenario = Scenario("TrafficSplit", load_profile("illustrative-crossover-8b"), 60, 20, "http://127.0.0.1:1")
        dep = next(m for m in render(parse_object(scenario.specserve())) if m["kind"] == "Deployment")
        dep["metadata"].pop("ownerReferences", None)
        await api.create(DEPLOYMENT, NAMESPACE, dep)
        sup = Supervisor(tmp_path / "logs")
        kubelet = Kubelet(api, sup, NAMESPACE, "illustrative-crossover-8b", tmp_path, startup_seconds=0.0)
        stop = asyncio.Event()
        task = asyncio.create_task(kubelet.run(stop))
        try:
            name = dep["metadata"]["name"]
            await _eventually(lambda: _ready(api, name), what="ready")
            pod = next(iter(kubelet.pods.values()))
            server.faults.add(method="GET", path=r"/deployments", status=500, times=5)
            await asyncio.sleep(2.0)  # 5 failed ticks
            assert not task.done() and pod.child.alive() and list(kubelet.pods) == [pod.name]
        finally:
            stop.set()
            await task
        assert not pod.child.alive()

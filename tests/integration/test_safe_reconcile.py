"""The real operator (kopf + reconcile + KubeClient) against the fake API server (real-server normalisation,
generation, SSA field removal, validation): it converges exactly and never takes serving capacity down.

A stand-in kubelet plays the Deployment controller: a pool whose spec changed loses its Ready pods at once and
gets them back only after a model load (or never, while the test holds it). A sampler reads the HTTPRoute and the
Deployments every few milliseconds and records how long the route had no Ready pool behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from specserve.config import OperatorConfig
from specserve_kubefake import DEPLOYMENTS, HTTPROUTES, SERVICES, SPECSERVES, FakeApiServer
from tests.integration.kube_emulator import eventually, operator_cluster, running_operator

NS = "llm"
NAME = "kimi-k25"
RESYNC = 0.5
JSON = dict[str, Any]


@dataclass
class Kubelet:
    """Deployment controller + kubelet stand-in: a changed pod template means no Ready pod until it has loaded.
    Also the Gateway controller: it accepts each new generation of a route it has accepted before."""

    api: FakeApiServer
    load_seconds: float = 0.3
    hold: set[str] = field(default_factory=set)  # pools that stay loading until released
    gateway_paused: bool = False  # the Gateway stops accepting new generations of the route
    _templates: dict[str, str] = field(default_factory=dict)  # the pod template the running pods have
    _loading: dict[str, float] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            now = time.monotonic()
            for d in self.api.list(DEPLOYMENTS, NS):
                name, status = d["metadata"]["name"], d.get("status") or {}
                template = json.dumps(d["spec"]["template"], sort_keys=True)
                if status.get("observedGeneration") != d["metadata"]["generation"]:
                    if self._templates.get(name) != template:  # new pods: the old pod stops first (no surge)
                        self._templates[name] = template
                        self._loading[name] = now
                        self.api.set_deployment_ready(NS, name, 0)
                    else:  # a change that rolls no pod
                        self.api.set_deployment_ready(NS, name, 0 if name in self._loading else None)
                elif name in self._loading and name not in self.hold and now - self._loading[name] >= self.load_seconds:
                    self.api.set_deployment_ready(NS, name)
                    del self._loading[name]
            self._gateway()
            await asyncio.sleep(0.01)

    def _gateway(self) -> None:
        """The Gateway controller too: a route it accepted once is accepted again at each new generation."""
        route = self.api.get(HTTPROUTES, NS, NAME)
        parents = ((route or {}).get("status") or {}).get("parents") or []
        seen = [
            c.get("observedGeneration") for p in parents for c in p.get("conditions") or [] if c["type"] == "Accepted"
        ]
        if route is not None and seen and min(seen) != route["metadata"]["generation"] and not self.gateway_paused:
            self.api.set_route_accepted(NS, NAME)


@dataclass
class Sampler:
    """Records, every few ms, whether each backend with weight on the route has a Ready replica."""

    api: FakeApiServer
    longest_gap: float = 0.0
    bad_samples: list[str] = field(default_factory=list)
    max_rolling: int = 0
    samples: int = 0

    async def run(self) -> None:
        gap_start: float | None = None
        while True:
            now = time.monotonic()
            route = self.api.get(HTTPROUTES, NS, NAME)
            pools = {d["metadata"]["name"]: d for d in self.api.list(DEPLOYMENTS, NS)}
            backends = [b for r in (route or {}).get("spec", {}).get("rules", []) for b in r.get("backendRefs", [])]
            weighted = [b["name"] for b in backends if b.get("weight", 1) > 0]
            unready = [n for n in weighted if not _ready(pools.get(n))]
            if unready:
                self.bad_samples.append(f"weight on {unready} at {now:.3f}")
            ok = any(_ready(pools.get(n)) for n in weighted)
            if not ok and gap_start is None:
                gap_start = now
            if ok and gap_start is not None:
                self.longest_gap = max(self.longest_gap, now - gap_start)
                gap_start = None
            self.max_rolling = max(self.max_rolling, sum(1 for d in pools.values() if not _ready(d)))
            self.samples += 1
            await asyncio.sleep(0.005)


def _ready(deployment: JSON | None) -> bool:
    """A Ready replica of the current spec (a Deployment the controller has not caught up with counts as down)."""
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    current = status.get("observedGeneration") == deployment["metadata"]["generation"]
    return current and int(status.get("readyReplicas", 0)) >= 1


@contextlib.asynccontextmanager
async def background(*coros: Any) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(c) for c in coros]
    try:
        yield
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t


@pytest.fixture()
async def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeApiServer]:
    async with operator_cluster(NS, tmp_path, monkeypatch, auto_ready=False) as api:
        yield api


@contextlib.asynccontextmanager
async def running(resync: float = RESYNC, events: bool = False) -> AsyncIterator[None]:
    """The real operator, in this test's loop, until the block ends."""
    async with running_operator(OperatorConfig(namespaces=(NS,), resync_seconds=resync, post_events=events)):
        yield


def condition(api: FakeApiServer, type_: str) -> JSON | None:
    obj = api.get(SPECSERVES, NS, NAME) or {}
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def status_of(api: FakeApiServer, type_: str) -> str | None:
    return (condition(api, type_) or {}).get("status")


def weights(api: FakeApiServer) -> dict[str, int]:
    route = api.get(HTTPROUTES, NS, NAME) or {}
    return {b["name"]: b["weight"] for r in route.get("spec", {}).get("rules", []) for b in r.get("backendRefs", [])}


def edit(api: FakeApiServer, spec: JSON) -> None:
    api.patch(SPECSERVES, NS, NAME, {"spec": spec})


async def serving(api: FakeApiServer, doc: JSON) -> None:
    """Create the SpecServe, let its pools load and the Gateway accept the route; wait for Ready and quiet."""
    body = copy.deepcopy(doc)
    body["metadata"]["namespace"] = NS
    api.create(body)
    await eventually(lambda: api.get(HTTPROUTES, NS, NAME), what="the HTTPRoute")
    api.set_route_accepted(NS, NAME)
    await eventually(lambda: status_of(api, "Ready") == "True", what="Ready=True")
    await eventually(lambda: status_of(api, "Progressing") == "False", what="settled")
    # And the Gateway has taken the route's last generation: a test that pauses the Gateway next must not catch
    # a write of the settling pass still unaccepted (the operator rolls nothing until the Gateway takes it).
    await eventually(lambda: route_accepted(api), what="the Gateway accepted the route's generation")


def route_accepted(api: FakeApiServer) -> bool:
    route = api.get(HTTPROUTES, NS, NAME) or {}
    generation = (route.get("metadata") or {}).get("generation")
    seen = [
        c.get("observedGeneration")
        for parent in (route.get("status") or {}).get("parents") or []
        for c in parent.get("conditions") or []
        if c.get("type") == "Accepted"
    ]
    return bool(seen) and all(g == generation for g in seen)


async def quiet(api: FakeApiServer, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    writes: list[str] = []
    while time.monotonic() < deadline:
        start = len(api.requests)
        await asyncio.sleep(RESYNC * 2.5)
        writes = [f"{w.method} {w.path} {w.body}"[:300] for w in api.writes_since(start)]
        if not writes:
            return
    raise AssertionError(f"writes never stopped: {writes}")


async def test_steady_state_makes_no_writes(fake: FakeApiServer, kimi_doc: JSON) -> None:
    async with running(), background(Kubelet(fake).run()):
        await serving(fake, kimi_doc)
        # The switching loop's one transition (no Prometheus here: MetricsAvailable turns False after a few
        # evaluations without load, with its event) is not steady-state churn: let it happen first.
        await eventually(lambda: status_of(fake, "MetricsAvailable") == "False", timeout=90, what="the loop settled")
        await quiet(fake)
        start, began = len(fake.requests), time.monotonic()
        # Several resync periods; SPECSERVE_STEADY_SECONDS=60 measures a longer window for the writes-per-minute figure.
        await asyncio.sleep(float(os.environ.get("SPECSERVE_STEADY_SECONDS", RESYNC * 8)))
        elapsed = time.monotonic() - began
        assert len(fake.requests) > start, "the resync timer did not run: the window proves nothing"
        writes = fake.writes_since(start)
        print(f"\nsteady state: {len(writes)} writes in {elapsed:.1f} s = {len(writes) * 60 / elapsed:.1f}/min")
        for w in writes:
            print(f"  {w.method} {w.path} {w.headers.get('User-Agent', '')} {w.body}")
        assert [f"{w.method} {w.path} {w.body}"[:400] for w in writes] == []


async def test_an_operator_restart_writes_nothing(fake: FakeApiServer, kimi_doc: JSON) -> None:
    async with background(Kubelet(fake).run()):
        async with running():
            await serving(fake, kimi_doc)
            await quiet(fake)
        start = len(fake.requests)
        async with running():  # a new process: no memory of its last status write
            await asyncio.sleep(RESYNC * 6)
        assert len(fake.requests) > start
        writes = [f"{w.method} {w.path}" for w in fake.writes_since(start)]
        assert writes == []


async def test_weights_leave_a_pool_that_lost_its_last_ready_replica_at_once(
    fake: FakeApiServer, kimi_doc: JSON
) -> None:
    async with background(Kubelet(fake).run()), running(resync=60):  # no resync: only the Deployment watch acts
        await serving(fake, kimi_doc)
        assert weights(fake) == {f"{NAME}-spec": 0, f"{NAME}-base": 100}  # initialMode Baseline
        began = time.monotonic()
        fake.set_deployment_ready(NS, f"{NAME}-base", 0)
        await eventually(lambda: weights(fake) == {f"{NAME}-spec": 100, f"{NAME}-base": 0}, timeout=10, what="moved")
        moved = time.monotonic() - began
        print(f"\ntraffic moved off the failed pool in {moved:.2f} s")
        fake.set_deployment_ready(NS, f"{NAME}-base")
        await eventually(lambda: weights(fake) == {f"{NAME}-spec": 0, f"{NAME}-base": 100}, timeout=10, what="back")


async def test_a_removed_field_converges(fake: FakeApiServer, kimi_doc: JSON) -> None:
    async with running():
        assert kimi_doc["spec"]["placement"]["priorityClassName"]
        async with background(Kubelet(fake).run()):
            await serving(fake, kimi_doc)
            edit(fake, {"placement": {"priorityClassName": None}})

            def gone() -> bool:
                pods = [d["spec"]["template"]["spec"] for d in fake.list(DEPLOYMENTS, NS)]
                return len(pods) == 2 and all("priorityClassName" not in p for p in pods)

            await eventually(gone, what="priorityClassName removed from both pools")
            await eventually(lambda: status_of(fake, "Progressing") == "False", what="settled")
            spec = fake.get(SPECSERVES, NS, NAME)
            assert spec is not None and spec["status"]["observedGeneration"] == spec["metadata"]["generation"]


async def test_a_strategy_change_keeps_a_ready_pool_behind_the_route(fake: FakeApiServer, kimi_doc: JSON) -> None:
    async with running():
        kubelet = Kubelet(fake, load_seconds=0.5)
        sampler = Sampler(fake)
        async with background(kubelet.run()):
            await serving(fake, kimi_doc)
            async with background(sampler.run()):
                kubelet.hold.add(f"{NAME}-engine")
                edit(fake, {"strategy": "Restart"})
                await eventually(lambda: fake.get(DEPLOYMENTS, NS, f"{NAME}-engine"), what="the new pool")
                await asyncio.sleep(RESYNC * 4)  # the new pool is loading: the old ones must keep serving
                assert fake.get(DEPLOYMENTS, NS, f"{NAME}-base") is not None
                assert weights(fake)[f"{NAME}-engine"] == 0
                assert status_of(fake, "Progressing") == "True"
                kubelet.hold.clear()
                await eventually(lambda: weights(fake) == {f"{NAME}-engine": 100}, what="the route on the new pool")
                old = [(r, f"{NAME}-{p}") for r in (DEPLOYMENTS, SERVICES) for p in ("spec", "base")]
                await eventually(lambda: all(fake.get(r, NS, n) is None for r, n in old), what="old pools pruned")
        print(f"\nstrategy change: longest time with no Ready pool behind the route {sampler.longest_gap:.3f} s "
              f"({sampler.samples} samples)")  # fmt: skip
        assert sampler.samples > 20
        assert sampler.bad_samples == []
        assert sampler.longest_gap == 0.0


async def test_a_pre_existing_object_is_not_taken_over(fake: FakeApiServer, kimi_doc: JSON) -> None:
    async with running():
        theirs = fake.create(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"{NAME}-spec", "namespace": NS},
             "spec": {"ports": [{"port": 80}], "selector": {"app": "theirs"}}}
        )  # fmt: skip
        async with background(Kubelet(fake).run()):
            body = copy.deepcopy(kimi_doc)
            body["metadata"]["namespace"] = NS
            fake.create(body)
            degraded = await eventually(
                lambda: (c := condition(fake, "Degraded")) and c["reason"] == "Conflict" and c, what="Conflict"
            )
        assert f"Service/{NAME}-spec" in degraded["message"]
        now = fake.get(SERVICES, NS, f"{NAME}-spec")
        assert now is not None and now["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]
        assert fake.get(DEPLOYMENTS, NS, f"{NAME}-base") is not None  # the rest is applied


async def test_a_422_is_reported_and_changes_nothing_else(fake: FakeApiServer, kimi_doc: JSON) -> None:
    async with running(), background(Kubelet(fake).run()):
        await serving(fake, kimi_doc)
        versions = {(r, o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                    for r in (DEPLOYMENTS, SERVICES) for o in fake.list(r, NS)}  # fmt: skip
        route_before = weights(fake)
        fake.faults.add("PATCH", rf"/httproutes/{NAME}$", 422, times=None, message="spec.rules[0]: invalid")
        edit(fake, {"routing": {"pathPrefix": "/v1"}})  # changes the route only
        degraded = await eventually(
            lambda: (c := condition(fake, "Degraded")) and c["status"] == "True" and c, what="Degraded"
        )
        assert degraded["reason"] == "ReconcileFailed" and "spec.rules[0]: invalid" in degraded["message"]
        await asyncio.sleep(RESYNC * 3)
        assert weights(fake) == route_before
        now = {(r, o["metadata"]["name"]): o["metadata"]["resourceVersion"]
               for r in (DEPLOYMENTS, SERVICES) for o in fake.list(r, NS)}  # fmt: skip
        assert now == versions
        spec = fake.get(SPECSERVES, NS, NAME)
        assert spec is not None
        assert spec["status"]["observedGeneration"] == 1, (spec["metadata"]["generation"], spec["status"])
        fake.faults.clear()
        await eventually(lambda: status_of(fake, "Degraded") == "False", what="recovered")
        route = fake.get(HTTPROUTES, NS, NAME)
        assert route is not None and route["spec"]["rules"][0]["matches"][0]["path"]["value"] == "/v1"


async def test_a_single_replica_pool_warns_before_its_unavoidable_restart(fake: FakeApiServer, kimi_doc: JSON) -> None:
    restart = copy.deepcopy(kimi_doc)
    restart["spec"]["strategy"] = "Restart"
    async with background(Kubelet(fake).run()), running(resync=2.0, events=True):
        await serving(fake, restart)
        start = len(fake.requests)
        edit(fake, {"engine": {"memFractionStatic": 0.8}})
        await eventually(lambda: status_of(fake, "Progressing") == "True", what="the announcement")
        assert (condition(fake, "Progressing") or {})["reason"] == "DowntimeAhead"

        def rolled() -> bool:
            d = fake.get(DEPLOYMENTS, NS, f"{NAME}-engine") or {}
            args = d.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [{}])[0].get("args", [])
            return "--mem-fraction-static" in args and args[args.index("--mem-fraction-static") + 1] == "0.8"

        await eventually(rolled, timeout=30, what="the restart after the announcement")
    requests = fake.requests[start:]
    warned = [i for i, r in enumerate(requests) if r.method == "POST" and r.plural == "events"
              and (r.body or {}).get("reason") == "DowntimeAhead"]  # fmt: skip
    acted = [
        i for i, r in enumerate(requests) if r.method == "PATCH" and r.path.endswith(f"/deployments/{NAME}-engine")
    ]
    assert warned and acted, (warned, acted)
    assert warned[0] < acted[0]  # the Warning event is posted before the pod is restarted
    assert "off the air" in requests[warned[0]].body["message"]

    # The restart itself is named (Progressing PlannedRestart): the alerts tell it from an outage.
    def reasons(r: Any) -> set[str]:
        return {c.get("reason") for c in ((r.body or {}).get("status") or {}).get("conditions") or []}

    planned = [
        i for i, r in enumerate(requests)
        if r.method == "PATCH" and r.plural == "specserves" and "PlannedRestart" in reasons(r)
    ]  # fmt: skip
    assert planned and planned[0] > warned[0], (planned, warned)


async def test_an_operator_restart_mid_roll_resumes_from_the_live_objects(fake: FakeApiServer, kimi_doc: JSON) -> None:
    kubelet = Kubelet(fake, load_seconds=0.3)
    sampler = Sampler(fake)

    def args(pool: str) -> list[str]:
        d = fake.get(DEPLOYMENTS, NS, f"{NAME}-{pool}") or {}
        return list(d["spec"]["template"]["spec"]["containers"][0]["args"])

    async with background(kubelet.run()):
        async with running():
            await serving(fake, kimi_doc)
        async with background(sampler.run()):
            kubelet.hold.add(f"{NAME}-spec")  # the first pool to roll (no traffic) stays loading
            async with running():
                edit(fake, {"engine": {"memFractionStatic": 0.8}})
                await eventually(lambda: "0.8" in args("spec"), what="the first pool rolled")
            # A new operator process: nothing but the live objects says where the rollout is.
            async with running():
                await asyncio.sleep(RESYNC * 4)
                assert "0.8" not in args("base")  # still waiting for the first pool
                assert weights(fake) == {f"{NAME}-spec": 0, f"{NAME}-base": 100}
                kubelet.hold.clear()
                await eventually(lambda: "0.8" in args("base"), what="the second pool rolled")
                await eventually(lambda: status_of(fake, "Progressing") == "False", what="settled")
    assert sampler.max_rolling == 1 and sampler.bad_samples == [] and sampler.longest_gap == 0.0


async def test_without_the_podmonitor_api_only_its_own_condition_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kimi_doc: JSON
) -> None:
    assert kimi_doc["spec"]["monitoring"]["podMonitor"]
    # No Prometheus Operator CRDs: 404 on PodMonitors.
    async with (
        operator_cluster(NS, tmp_path, monkeypatch, prometheus_operator=False) as api,
        background(Kubelet(api).run()),
        running(),
    ):
        await serving(api, kimi_doc)
        pod_monitor = condition(api, "PodMonitorReady") or {}
        assert (pod_monitor.get("status"), pod_monitor.get("reason")) == ("False", "NotInstalled")
        assert status_of(api, "Degraded") == "False"
        await quiet(api)  # and it is not tried again every resync


async def test_a_transient_read_error_does_not_flip_the_pool_conditions(fake: FakeApiServer, kimi_doc: JSON) -> None:
    async with running(), background(Kubelet(fake).run()):
        await serving(fake, kimi_doc)
        before = {t: condition(fake, t) for t in ("Ready", "SpeculativePoolReady", "BaselinePoolReady")}
        fake.faults.add("GET", r"/deployments", 500, times=None, message="etcdserver: request timed out")
        degraded = await eventually(
            lambda: (c := condition(fake, "Degraded")) and c["reason"] == "ReadFailed" and c, what="ReadFailed"
        )
        assert "request timed out" in degraded["message"]
        assert {t: condition(fake, t) for t in before} == before
        fake.faults.clear()
        await eventually(lambda: status_of(fake, "Degraded") == "False", what="recovered")

"""The demo's running pieces and the wiring between them: the kubelet's hooks feed the gateway and Prometheus,
and the gateway controller's loop follows the operator's HTTPRoute."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from specserve.kube.kinds import HTTPROUTE, Kind
from specserve_tools.demo.gateway import Endpoint, Gateway, accepted, route_status, route_weights
from specserve_tools.demo.kubeapi import ApiError, DemoApi
from specserve_tools.demo.kubelet import Kubelet
from specserve_tools.demo.procs import Supervisor
from specserve_tools.demo.prometheus import Prometheus, target_labels, write_targets
from specserve_tools.demo.realplane import RealPlane
from specserve_tools.demo.rollout import Pod
from specserve_tools.demo.scenario import NAME, NAMESPACE
from specserve_tools.demo.timeline import Timeline, role_of

NAMESPACES = Kind("v1", "Namespace", "namespaces")
MAX_API_ERRORS = 20  # consecutive failed reads of the route before the gateway controller gives up


@dataclass(frozen=True)
class Options:
    strategy: str = "TrafficSplit"
    profile: str = "illustrative-crossover-8b"
    duration: float = 150.0
    compression: float = 20.0
    out: Path = Path("out/demo")
    plain: bool = False
    keep_workdir: bool = False
    cluster: bool = False  # a real control plane (realplane.py) instead of the fake API


@dataclass
class Demo:
    """The running pieces (filled in step by step) and the wiring between them."""

    opts: Options
    sup: Supervisor
    workdir: Path
    session: aiohttp.ClientSession
    api: DemoApi | None = None
    gateway: Gateway | None = None
    prometheus: Prometheus | None = None
    kubelet: Kubelet | None = None
    timeline: Timeline = field(default_factory=Timeline)
    endpoints: list[Endpoint] = field(default_factory=list)
    route: dict[str, int] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)  # pool (Deployment/Service) name -> role
    pod_monitor: dict[str, Any] | None = None
    background: list[asyncio.Task[None]] = field(default_factory=list)
    # Weights the gateway serves instead of the HTTPRoute's (a static policy to compare the operator against).
    pinned: dict[str, int] | None = None
    real: RealPlane | None = None  # --cluster: the control plane, stopped at the end
    api_session: aiohttp.ClientSession | None = None  # --cluster: the admin's TLS client

    async def on_endpoints(self, endpoints: list[Endpoint]) -> None:
        self.endpoints = endpoints
        if self.gateway is not None:
            await self.gateway.sync(self.route, endpoints)

    async def on_pod_gone(self, pod: str) -> None:
        if self.gateway is not None:
            await self.gateway.forget(pod)

    async def on_pods(self, pods: list[Pod]) -> None:
        for pod in pods:
            self.timeline.pod_pool[pod.name] = role_of(pod.labels)
        if self.prometheus is None:
            return
        monitor = self.pod_monitor or {}
        targets = [(p.port, target_labels(monitor, p.name, NAMESPACE, p.labels)) for p in pods]
        write_targets(self.prometheus.workdir, targets)

    async def watch_route(self, stop: asyncio.Event) -> None:
        """The gateway controller's loop: re-program HAProxy whenever the HTTPRoute's weights change."""
        assert self.api is not None and self.gateway is not None
        errors = 0
        while not stop.is_set():
            try:
                live = await self.api.get(HTTPROUTE, NAMESPACE, NAME)
                if live is not None and not accepted(live):
                    await self.api.patch_status(HTTPROUTE, NAMESPACE, NAME, route_status(live))
                errors = 0
            except (ApiError, aiohttp.ClientError, TimeoutError):
                errors += 1  # HAProxy keeps its last program meanwhile, as a real gateway does
                if errors >= MAX_API_ERRORS:
                    raise
                await asyncio.sleep(0.25)
                continue
            route = route_weights(live) if self.pinned is None else self.pinned
            if route != self.route:
                self.route = route
                await self.gateway.sync(route, self.endpoints)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.25)

    def check(self) -> None:
        """Raise when a piece that must run for the whole demo stopped (pods may come and go)."""
        for child in self.sup.children:
            if not child.name.startswith("pod-") and not child.alive():
                raise RuntimeError(f"{child.name} exited: {child.tail()}")
        if self.kubelet is not None and self.kubelet.failures:
            raise RuntimeError(self.kubelet.failures[0])
        for task in self.background:  # the kubelet and the gateway controller run until the demo ends
            if task.done():
                error = None if task.cancelled() else task.exception()
                raise RuntimeError(f"{task.get_name()} stopped: {error or 'without an error'}")


async def gateway_answers(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url + "/health_generate", timeout=aiohttp.ClientTimeout(total=5)) as resp:
            return resp.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False

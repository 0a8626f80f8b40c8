"""A local kubelet and Deployment controller in one: each replica of a Deployment the operator renders becomes a
`specserve emulate` process on a loopback port, started with the rendered SGLang flags.

It honours what the operator relies on: the start-up delay (compressed), readiness on /health_generate, the
rollout strategy (maxSurge/maxUnavailable; a terminating pod still holds its GPU, so it counts against the
surge), the preStop drain (out of the endpoints first, then wait until the engine has no running or queued
requests, bounded by the grace period), and it reports Deployment status and each pool's Ready endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from specserve.kube.kinds import CONFIGMAP, DEPLOYMENT, SERVICE
from specserve_tools.demo.gateway import Endpoint
from specserve_tools.demo.kubeapi import JSON, ApiError, DemoApi
from specserve_tools.demo.podargs import emulator_argv
from specserve_tools.demo.procs import Supervisor
from specserve_tools.demo.rollout import Phase, Pod, plan_rollout, rollout_limits, template_hash

log = logging.getLogger(__name__)
MAX_TICK_ERRORS = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True)
class Launch:
    """How a launcher runs one pod: its command line, extra environment and address."""

    argv: list[str]
    host: str
    port: int
    env: dict[str, str] = field(default_factory=dict)


# A launcher turns a pod (its name and the rendered container, with ConfigMap mount path -> local directory) into
# a process to start: the default runs the emulator; scripts/gpu/loop.py runs real SGLang.
Launcher = Callable[[str, JSON, dict[str, str]], Awaitable[Launch]]
EndpointsHook = Callable[[list[Endpoint]], Awaitable[None]]
PodHook = Callable[[str], Awaitable[None]]
PodsHook = Callable[[list["Pod"]], Awaitable[None]]


async def _noop(_: Any) -> None:
    return None


@dataclass
class Kubelet:
    api: DemoApi
    sup: Supervisor
    namespace: str
    profile: str
    workdir: Path
    compression: float = 1.0
    startup_seconds: float = 3.0  # wall seconds from process start to Ready (already compressed)
    period: float = 0.25
    on_endpoints: EndpointsHook = _noop  # the gateway: called (and awaited) whenever Ready endpoints change
    on_pod_gone: PodHook = _noop  # the gateway: a drained pod's process has stopped
    on_pods: PodsHook = _noop  # Prometheus: the set of pods changed
    launcher: Launcher | None = None  # None: the emulator with the rendered args (podargs.emulator_argv)
    pods: dict[str, Pod] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    _counter: int = 0
    _endpoints: list[Endpoint] = field(default_factory=list)
    _status: dict[str, JSON] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _session: aiohttp.ClientSession | None = None

    async def run(self, stop: asyncio.Event) -> None:
        self._session = aiohttp.ClientSession()
        try:
            errors = 0
            while not stop.is_set():
                try:
                    await self.tick()
                    errors = 0
                except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                    errors += 1  # a blip of the API is retried next tick, as a kubelet does
                    log.warning("kubelet: %s", exc)
                    if errors >= MAX_TICK_ERRORS:
                        raise RuntimeError(f"the API failed {errors} kubelet ticks in a row: {exc}") from exc
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.period)
        finally:
            await self.shutdown()

    async def tick(self) -> None:
        deployments = await self.api.list(DEPLOYMENT, self.namespace)
        services = await self.api.list(SERVICE, self.namespace)
        wanted = {d["metadata"]["name"]: d for d in deployments}
        for name in {p.deployment for p in self.pods.values()} - set(wanted):
            for pod in self._pods_of(name):
                self._terminate(pod, services)
        for dep in wanted.values():
            await self._reconcile_deployment(dep, services)
        await self._probe_starting()
        await self._publish(services)
        await self._report(wanted)

    def _pods_of(self, deployment: str) -> list[Pod]:
        return [p for p in self.pods.values() if p.deployment == deployment]

    async def _reconcile_deployment(self, dep: JSON, services: list[JSON]) -> None:
        name = dep["metadata"]["name"]
        replicas = int(dep.get("spec", {}).get("replicas", 1))
        surge, unavailable = rollout_limits(dep)
        current = template_hash(dep)
        changes = plan_rollout(replicas, surge, unavailable, current, self._pods_of(name))
        for pod_name in changes.stop:
            self._terminate(self.pods[pod_name], services)
        for _ in range(changes.start):
            await self._start_pod(dep, current)

    async def _start_pod(self, dep: JSON, current: str) -> None:
        self._counter += 1
        name = f"{dep['metadata']['name']}-{current[:5]}-{self._counter}"
        template = dep["spec"]["template"]
        container = template["spec"]["containers"][0]
        mounts = await self._materialize_configmaps(name, template["spec"], container)
        if self.launcher is None:
            port = free_port()
            argv = emulator_argv(container.get("args") or [], port, self.profile, self.startup_seconds, mounts)
            launch = Launch(argv, "127.0.0.1", port)
        else:
            launch = await self.launcher(name, container, mounts)
        child = self.sup.start(f"pod-{name}", launch.argv, env=launch.env)
        labels = dict(template.get("metadata", {}).get("labels") or {})
        pod = Pod(name, dep["metadata"]["name"], current, labels, launch.port, child, host=launch.host)
        self.pods[name] = pod
        log.info("pod %s: started on %s", name, pod.url)
        await self.on_pods(list(self.pods.values()))

    async def _materialize_configmaps(self, pod: str, spec: JSON, container: JSON) -> dict[str, str]:
        """Write each mounted ConfigMap into the pod's directory; mount path -> that directory."""
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        mounts: dict[str, str] = {}
        for mount in container.get("volumeMounts") or []:
            source = (volumes.get(mount["name"]) or {}).get("configMap")
            if not source:
                continue
            cm = await self.api.get(CONFIGMAP, self.namespace, source["name"])
            target = self.workdir / "pods" / pod / mount["name"]
            target.mkdir(parents=True, exist_ok=True)
            for key, value in ((cm or {}).get("data") or {}).items():
                (target / key).write_text(value, encoding="utf-8")
            mounts[mount["mountPath"]] = str(target)
        return mounts

    async def _probe_starting(self) -> None:
        for pod in list(self.pods.values()):
            if pod.phase == Phase.TERMINATING:
                continue
            if not pod.child.alive():
                self.failures.append(f"pod {pod.name} exited: {pod.child.tail(3)}")
                log.warning("pod %s exited unexpectedly", pod.name)
                self.pods.pop(pod.name, None)
                await self.on_pod_gone(pod.name)
                await self.on_pods(list(self.pods.values()))
                continue
            if pod.phase == Phase.STARTING and await self._healthy(pod):
                pod.phase, pod.ready_at = Phase.READY, time.monotonic()
                log.info("pod %s: ready after %.1f s", pod.name, pod.ready_at - pod.started)

    async def _healthy(self, pod: Pod) -> bool:
        assert self._session is not None
        try:
            timeout = aiohttp.ClientTimeout(total=2)
            async with self._session.get(pod.url + "/health_generate", timeout=timeout) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False

    def _terminate(self, pod: Pod, services: list[JSON]) -> None:
        if pod.phase == Phase.TERMINATING:
            return
        pod.phase = Phase.TERMINATING
        task = asyncio.create_task(self._drain_and_stop(pod, services))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain_and_stop(self, pod: Pod, services: list[JSON]) -> None:
        """As Kubernetes does: the endpoint goes first, then preStop (drain), then SIGTERM."""
        was_ready = pod.ready_at is not None
        await self._publish(services)  # out of the gateway before the drain starts
        grace = 120.0 / self.compression
        deadline = time.monotonic() + grace
        if was_ready:
            await asyncio.sleep(0.5)  # requests already on their way in (the rendered preStop sleeps 5 s)
        while was_ready and time.monotonic() < deadline and pod.child.alive():
            busy = await self._busy(pod)
            if busy == 0:
                break
            await asyncio.sleep(0.2)
        await self.sup.stop(pod.child, grace=3.0)
        self.pods.pop(pod.name, None)
        await self.on_pod_gone(pod.name)
        await self.on_pods(list(self.pods.values()))
        log.info("pod %s: stopped after drain", pod.name)

    async def _busy(self, pod: Pod) -> float | None:
        """Running + queued requests from the engine's /metrics (what the rendered preStop hook reads)."""
        assert self._session is not None
        try:
            async with self._session.get(pod.url + "/metrics", timeout=aiohttp.ClientTimeout(total=2)) as resp:
                text = await resp.text()
        except (aiohttp.ClientError, TimeoutError):
            return None
        total = 0.0
        for line in text.splitlines():
            if line.startswith(("sglang:num_running_reqs", "sglang:num_queue_reqs")):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def endpoints(self, services: list[JSON]) -> list[Endpoint]:
        out = []
        for svc in services:
            selector = (svc.get("spec") or {}).get("selector") or {}
            if not selector:
                continue
            for pod in self.pods.values():
                if pod.phase == Phase.READY and selector.items() <= pod.labels.items():
                    out.append(Endpoint(pod.name, svc["metadata"]["name"], pod.port, pod.host))
        return sorted(out, key=lambda e: e.pod)

    async def _publish(self, services: list[JSON]) -> None:
        endpoints = self.endpoints(services)
        if endpoints != self._endpoints:
            self._endpoints = endpoints
            await self.on_endpoints(endpoints)

    async def _report(self, deployments: dict[str, JSON]) -> None:
        for name, dep in deployments.items():
            pods = [p for p in self._pods_of(name) if p.phase != Phase.TERMINATING]
            current = template_hash(dep)
            ready = sum(p.phase == Phase.READY for p in pods)
            replicas = int(dep.get("spec", {}).get("replicas", 1))
            status: JSON = {
                "observedGeneration": dep["metadata"].get("generation"),
                "replicas": len(pods),
                "updatedReplicas": sum(p.template_hash == current for p in pods),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "unavailableReplicas": max(0, replicas - ready),
            }
            status = {k: v for k, v in status.items() if v is not None}
            # Compared with what we last sent, not with the live object: the API server drops zero values.
            key = f"{name}/{dep['metadata'].get('uid')}"  # a Deployment recreated under the same name starts over
            if self._status.get(key) != status:
                await self.api.patch_status(DEPLOYMENT, self.namespace, name, status)
                self._status[key] = status

    def ready_pods(self, deployment: str) -> int:
        return sum(p.phase == Phase.READY for p in self._pods_of(deployment))

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(self.sup.stop(p.child, grace=2.0) for p in self.pods.values()))
        self.pods.clear()
        if self._session is not None:
            await self._session.close()

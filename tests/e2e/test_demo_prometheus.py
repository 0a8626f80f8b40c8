"""The demo's Prometheus: Debian's server scrapes emulator pods with exactly the labels the operator's PodMonitor
would give them, and HAProxy's exporter."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp

from specserve.api.validation import parse_object
from specserve.render import render
from specserve_tools.demo.gateway import start_gateway
from specserve_tools.demo.kubelet import free_port
from specserve_tools.demo.prometheus import Prometheus, start_prometheus, target_labels, write_targets
from specserve_tools.demo.scenario import NAME, NAMESPACE, Scenario
from specserve_tools.emulator.profile import load_profile
from tests.e2e.helpers import needs_haproxy, needs_prometheus, start_emulator, supervisor


def _rendered(kind: str) -> list[dict[str, Any]]:
    scenario = Scenario("TrafficSplit", load_profile("illustrative-crossover-8b"), 60, 20, "http://127.0.0.1:1")
    return [m for m in render(parse_object(scenario.specserve())) if m["kind"] == kind]


def test_target_labels_follow_the_pod_monitor_relabelings() -> None:
    (pod_monitor,) = _rendered("PodMonitor")
    spec_deployment = next(d for d in _rendered("Deployment") if d["metadata"]["name"].endswith("-spec"))
    pod_labels = spec_deployment["spec"]["template"]["metadata"]["labels"]
    labels = target_labels(pod_monitor, "p-1", NAMESPACE, pod_labels)
    assert labels == {
        "namespace": NAMESPACE,
        "pod": "p-1",
        "container": "sglang",
        "endpoint": "http",
        "job": f"{NAMESPACE}/{pod_monitor['metadata']['name']}",
        "specserve_instance": NAME,
        "specserve_pool": pod_labels["specserve.io/pool"],
        "specserve_mode": pod_labels["specserve.io/mode"],
    }


async def _eventually(prom: Prometheus, promql: str, count: int = 1, timeout: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            result = await prom.query(session, promql)
            if len(result) >= count:
                return result
            await asyncio.sleep(0.3)
    raise AssertionError(f"no series for {promql} within {timeout} s")


@needs_prometheus
@needs_haproxy
async def test_prometheus_scrapes_pods_with_the_pod_monitor_labels(tmp_path: Path) -> None:
    (pod_monitor,) = _rendered("PodMonitor")
    deployments = {d["metadata"]["name"]: d for d in _rendered("Deployment")}
    sup = supervisor(tmp_path)
    try:
        gw = await start_gateway(sup, tmp_path, free_port(), free_port())
        prom = await start_prometheus(sup, tmp_path / "prom", free_port(), gw.exporter_port, interval=1.0)
        targets = []
        for name, dep in deployments.items():
            _, port = await start_emulator(sup, name, speculative=name.endswith("-spec"))
            labels = dep["spec"]["template"]["metadata"]["labels"]
            targets.append((port, target_labels(pod_monitor, f"{name}-0", NAMESPACE, labels)))
        write_targets(prom.workdir, targets)  # as the kubelet does when pods come and go

        series = await _eventually(
            prom,
            f'sum by (specserve_pool, specserve_mode) (sglang:num_running_reqs{{specserve_instance="{NAME}"}})',
            count=2,
        )
        assert {(s["metric"]["specserve_pool"], s["metric"]["specserve_mode"]) for s in series} == {
            ("speculative", "speculative"),
            ("baseline", "baseline"),
        }
        assert await _eventually(prom, 'up{job="haproxy"} == 1')
        assert await _eventually(prom, "haproxy_process_nbthread")

        write_targets(prom.workdir, targets[:1])  # a pod went away: its target goes too
        deadline = time.monotonic() + 15
        async with aiohttp.ClientSession() as session:
            while len(await prom.query(session, f'up{{specserve_instance="{NAME}"}}')) != 1:
                assert time.monotonic() < deadline, "the removed target stayed"
                await asyncio.sleep(0.3)
    finally:
        await sup.stop_all()

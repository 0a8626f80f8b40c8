"""What the demo reads once a second (the SpecServe's status, the Deployments, Prometheus) into a Sample, and
HAProxy's own response counts at the end."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from specserve.kube.kinds import DEPLOYMENT, SPECSERVE
from specserve_tools.demo.load import LoadGenerator
from specserve_tools.demo.scenario import NAME, NAMESPACE
from specserve_tools.demo.timeline import Sample, role_of, weights_by_role
from specserve_tools.demo.wiring import Demo

DEMAND_QUERY = (
    f'sum(sglang:num_running_reqs{{specserve_instance="{NAME}"}})'
    f' + sum(sglang:num_queue_reqs{{specserve_instance="{NAME}"}})'
)


# Adaptive's in-engine switch: the active draft steps (0 when drafting is off at large batches).
STEPS_QUERY = f'avg(sglang:spec_num_steps{{specserve_instance="{NAME}", specserve_mode!="baseline"}})'


async def prometheus_value(demo: Demo, promql: str) -> float | None:
    """One number from Prometheus (what the operator's signal is built on); None when it has none yet."""
    assert demo.prometheus is not None
    try:
        result = await demo.prometheus.query(demo.session, promql)
    except (aiohttp.ClientError, TimeoutError, RuntimeError):
        return None
    return float(result[0]["value"][1]) if result else None


async def sample(demo: Demo, load: LoadGenerator, now: float) -> tuple[Sample, list[dict[str, Any]]]:
    assert demo.api is not None and demo.kubelet is not None
    obj = await demo.api.get(SPECSERVE, NAMESPACE, NAME) or {}
    status = obj.get("status") or {}
    deployments = await demo.api.list(DEPLOYMENT, NAMESPACE)
    ready: dict[str, str] = {}
    for dep in deployments:
        name = dep["metadata"]["name"]
        role = role_of(dep["metadata"].get("labels") or {})
        demo.roles[name] = role
        ready[role] = f"{demo.kubelet.ready_pods(name)}/{dep['spec'].get('replicas', 1)}"
    records = load.records
    sample = Sample(
        prometheus_demand=await prometheus_value(demo, DEMAND_QUERY),
        draft_steps=await prometheus_value(demo, STEPS_QUERY),
        t=round(now - load.t0, 2),
        demand=load.demand(now - load.t0),
        in_flight=load.in_flight,
        weights=weights_by_role(demo.route, demo.roles),
        mode=status.get("activeMode"),
        ready=ready,
        tok_s=load.tokens_per_second(now),
        failed=sum(r.error is not None for r in records),
        operator_demand=(status.get("load") or {}).get("concurrency"),
    )
    demo.timeline.samples.append(sample)
    return sample, demo.timeline.add_decisions(status.get("history") or [])


async def gateway_responses(demo: Demo, scrape_seconds: float) -> dict[str, float]:
    """HAProxy's responses by class from its exporter, after one more scrape."""
    assert demo.prometheus is not None
    await asyncio.sleep(2 * scrape_seconds)
    promql = 'sum by (code) (haproxy_backend_http_responses_total{proxy="route"})'
    try:
        result = await demo.prometheus.query(demo.session, promql)
    except (aiohttp.ClientError, TimeoutError, RuntimeError):
        return {}
    return {str(r["metric"].get("code")): float(r["value"][1]) for r in result}

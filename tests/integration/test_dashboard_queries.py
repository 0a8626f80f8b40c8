"""Every query of the generated Grafana dashboard returns series from a live Prometheus (Debian's) scraping SGLang
emulators labelled as SpecServe's PodMonitor labels pods and the real operator's metrics endpoint, while the
operator switches a SpecServe across the crossover. A query with a typo (a metric or label that does not exist)
returns nothing and fails here, instead of drawing an empty panel."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import requests
from prometheus_client import start_http_server

from specserve import telemetry
from specserve.config import OperatorConfig
from specserve.observability.dashboard import VARIABLES, Substitution, all_queries, substitute
from specserve_kubefake import HTTPROUTES, SPECSERVES, FakeApiServer
from specserve_tools.emulator.testing import free_port
from tests.integration.kube_emulator import eventually, running_operator
from tests.integration.switching_env import Load, Prometheus, pool_targets, running_prometheus
from tests.integration.switching_world import NAME, NS, spec_weight, switching_doc

UNSCRAPED = "no-metrics"  # a second SpecServe whose pods Prometheus does not scrape: its load is unknown


@pytest.fixture()
def operator_metrics() -> Iterator[int]:
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=telemetry.REGISTRY)
    yield port
    server.shutdown()
    thread.join(timeout=10)


@pytest.fixture()
def prometheus(tmp_path: Path, engines: list[str], operator_metrics: int) -> Iterator[Prometheus]:
    # The operator as the chart's ServiceMonitor scrapes it: job = the metrics Service, its own labels kept.
    operator_job = (
        "- job_name: specserve-metrics\n  honor_labels: true\n  static_configs:\n"
        f"  - targets: ['127.0.0.1:{operator_metrics}']\n"
    )
    with running_prometheus(tmp_path, pool_targets(engines, NS, NAME), more_jobs=operator_job) as server:
        yield server


def specserve(kimi_doc: dict[str, Any], name: str) -> dict[str, Any]:
    body = switching_doc(kimi_doc, name)
    body["spec"]["switching"]["calibratedAcceptLength"] = 3.0  # for the accept-length panel
    return body


def query(url: str, expr: str) -> list[dict[str, Any]]:
    response = requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10)
    body = response.json()
    assert response.status_code == 200 and body["status"] == "success", f"{expr}: {body}"
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


async def finishing_requests(urls: list[str], stop: asyncio.Event) -> None:
    """Short requests that finish, to every engine: SGLang's tokenizer metrics (tokens, TTFT, TPOT) are recorded
    when a request finishes, and the held load's long requests never do within the test."""
    body = {"model": "default", "prompt": "Say hi.", "max_tokens": 8, "stream": False}
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            for url in urls:
                async with session.post(f"{url}/v1/completions", json=body) as response:
                    assert response.status == 200, await response.text()
            await asyncio.sleep(0.2)


def metrics_unavailable(api: FakeApiServer, name: str) -> bool:
    conditions = ((api.get(SPECSERVES, NS, name) or {}).get("status") or {}).get("conditions", [])
    return any(c["type"] == "MetricsAvailable" and c["status"] == "False" for c in conditions)


async def test_every_dashboard_query_returns_series(
    fake: FakeApiServer, prometheus: Prometheus, engines: list[str], kimi_doc: dict[str, Any]
) -> None:
    config = OperatorConfig(namespaces=(NS,), resync_seconds=5.0, prometheus_url=prometheus.url, post_events=True)
    load = Load(engines[0])  # demand is the sum over the SpecServe's pods, whatever the split
    stop = asyncio.Event()
    finishing = asyncio.create_task(finishing_requests(engines, stop))
    try:
        await load.set(2)
        async with running_operator(config) as operator:
            fake.create(specserve(kimi_doc, NAME))
            fake.create(specserve(kimi_doc, UNSCRAPED))
            await eventually(lambda: fake.get(HTTPROUTES, NS, NAME), 30, "the HTTPRoute")
            fake.set_route_accepted(NS, NAME)
            low = "most weight on the speculative pool at low load"
            await eventually(lambda: (w := spec_weight(fake)) is not None and w >= 70, 60, low)
            await load.set(24)  # across the crossover: the weight steps towards baseline, decision after decision
            await eventually(lambda: (w := spec_weight(fake)) is not None and w <= 50, 60, "weight towards baseline")
            await eventually(lambda: metrics_unavailable(fake, UNSCRAPED), 30, "the unscraped SpecServe's load unknown")
            await asyncio.sleep(5)  # a few more scrapes of the operator after the moves

            values = Substitution(namespace=NS, name=".+", rate_interval="30s")
            empty = []
            for row, panel, target in all_queries():
                expr = substitute(target.expr, values)
                result = await asyncio.to_thread(query, prometheus.url, expr)
                if not result:
                    empty.append(f"{row} / {panel.title if panel else 'annotation'}: {expr}")
            for variable, spec in VARIABLES.items():
                # query_result(EXPR) is Grafana's instant query: its series must exist and carry the label the
                # variable's regex takes
                inner = spec.query.removeprefix("query_result(").removesuffix(")")
                result = await asyncio.to_thread(query, prometheus.url, substitute(inner, values))
                if not any(spec.label in r["metric"] for r in result):
                    empty.append(f"variable {variable}: {spec.query}")
            assert empty == [], "dashboard queries without series:\n" + "\n".join(empty)
            assert not operator.done(), "the operator stopped during the test"
    finally:
        stop.set()
        await finishing
        await load.close()


async def test_a_typo_returns_nothing_and_would_fail(prometheus: Prometheus) -> None:
    """The check above can fail: the same Prometheus returns nothing for a misspelt metric or label."""
    right = 'sglang:num_running_reqs{specserve_pool="speculative"}'
    await eventually(lambda: query(prometheus.url, right), 30, "the first scrape")
    assert query(prometheus.url, 'sglang:num_runing_reqs{specserve_pool="speculative"}') == []
    assert query(prometheus.url, 'sglang:num_running_reqs{specserve_pol="speculative"}') == []

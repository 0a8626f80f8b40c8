"""The operator's metrics endpoint follows the SpecServes that exist: a deleted SpecServe's series (Ready,
weights, demand, conditions) leave the scrape, as kube-state-metrics' do, instead of lingering at their last
value for an alert to fire on."""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest

from specserve import telemetry
from specserve_kubefake import SPECSERVES
from tests.integration.kube_emulator import eventually
from tests.integration.test_operator import NS, Cluster, cluster, create_and_wait, operating

__all__ = ["cluster"]  # the fixture, used by name


def scrape() -> str:
    return generate_latest(telemetry.REGISTRY).decode()


async def test_a_deleted_specserves_series_leave_the_scrape(cluster: Cluster, kimi_doc: dict[str, Any]) -> None:
    async with operating():
        await create_and_wait(cluster, kimi_doc)
        series = f'specserve_ready{{name="kimi-k25",namespace="{NS}"}}'
        await eventually(lambda: series in scrape(), what="the Ready series")
        assert 'specserve_condition{name="kimi-k25"' in scrape()
        cluster.api.delete(SPECSERVES, NS, "kimi-k25")
        await eventually(lambda: cluster.obj(SPECSERVES, "kimi-k25") is None, what="the SpecServe gone")
        await eventually(lambda: 'name="kimi-k25"' not in scrape(), what="every kimi-k25 series gone")

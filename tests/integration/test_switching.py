"""Load-based switching end to end: Debian's Prometheus on loopback scraping SGLang emulators that carry the
SpecServe's labels, the real operator against the fake API server, and a load generator stepping demand across
the crossover and back. Compressed: evaluation every second, scrapes every second."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from specserve.render.engine import ADAPTIVE_CONFIG_KEY
from specserve_kubefake import CONFIGMAPS, DEPLOYMENTS, SPECSERVES, FakeApiServer
from tests.integration.switching_env import Load, Prometheus
from tests.integration.switching_world import (
    DIRECT_HOSTS,
    NAME,
    NS,
    all_on_speculative,
    condition,
    direct_world,
    events,
    eventually,
    kubelet_pod,
    operator,
    spec_weight,
    status,
    switching_doc,
)


async def watch_route(api: FakeApiServer, seconds: float) -> set[int | None]:
    """Every speculative weight the route showed during `seconds`."""
    seen: set[int | None] = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.add(spec_weight(api))
        await asyncio.sleep(0.1)
    return seen


async def steady(api: FakeApiServer, quiet: float = 3.0, timeout: float = 30.0) -> None:
    """Until no decision was recorded for `quiet` seconds (a move steps on until its target)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = len(status(api).get("history", []))
        await asyncio.sleep(quiet)
        if len(status(api).get("history", [])) == before:
            return
    raise AssertionError("decisions did not stop")


async def test_weights_follow_demand_across_the_crossover_and_hold_without_metrics(
    fake: FakeApiServer, prometheus: Prometheus, load: Load, kimi_doc: dict[str, Any]
) -> None:
    await load.set(1)
    async with operator(prometheus.url) as running:
        fake.create(switching_doc(kimi_doc))

        # Low load: all traffic to the speculative pool (initialMode was Baseline).
        await all_on_speculative(fake)
        assert condition(fake, "MetricsAvailable")["status"] == "True"
        assert status(fake)["switching"]["weights"] == {"speculative": 100, "baseline": 0}
        assert ("Normal", "SetWeights") in events(fake)

        # Step above the crossover: weight moves towards baseline, some stays on the speculative pool's GPUs.
        await load.set(24)
        high = await eventually(lambda: (w := spec_weight(fake)) is not None and w < 60 and w, what="weight down")
        await eventually(lambda: condition(fake, "Switching").get("status") == "False", what="the move settled")
        # The crossover model learns once the pools' readings have given it units (docs/learning.md): from then on
        # the example's TPOT goal applies, and status.learning is written every 20 evaluations.
        await eventually(lambda: "modelScale" in status(fake).get("learning", {}), what="the model given units")
        await steady(fake)
        settled = spec_weight(fake)
        # Steady load, nothing new decided: the loop evaluates every second and writes nothing but that.
        start, decided = len(fake.requests), len(status(fake)["history"])
        await asyncio.sleep(4)
        writes = [r.path for r in fake.writes_since(start) if r.plural == "specserves"]
        assert len(writes) <= 1 and all(w.endswith("/status") for w in writes)
        assert len(status(fake)["history"]) == decided and spec_weight(fake) == settled
        assert len(fake.requests) > start, "nothing was read either: the window proves nothing"
        assert settled is not None and 0 < settled <= high
        last = status(fake)["lastDecision"]
        assert last["action"] == "SetWeights" and last["applied"] is True and last["concurrency"] > 12
        assert "over the next 6 turnovers" in last["reason"]  # the closed loop: both pools' loads were read
        assert status(fake)["load"]["concurrency"] > 12
        pools = {p["pool"]: p for p in status(fake)["load"]["pools"]}
        assert pools["speculative"]["ready"] == 1 and pools["baseline"]["ready"] == 1
        assert pools["speculative"]["acceptLength"] > 1 and "acceptLength" not in pools["baseline"]
        assert len(status(fake)["history"]) >= 2

        # Oscillation the closed loop reads as noise (and the open loop's dead band would hold): no switch at all.
        decisions = len(status(fake)["history"])
        for level in (22, 26, 22, 26, 22, 26):
            await load.set(level)
            assert await watch_route(fake, 1.5) == {settled}
        assert len(status(fake)["history"]) == decisions

        # Prometheus stops: MetricsAvailable goes False, one Warning, and nothing switches although load drops.
        # (A loaded engine may miss a scrape on a busy machine: that is an outage of its own, with its own Warning.)
        warnings = events(fake).count(("Warning", "MetricsUnavailable"))
        prometheus.stop()
        await load.set(1)
        unavailable = await eventually(
            lambda: (c := condition(fake, "MetricsAvailable")).get("status") == "False" and c, what="metrics lost"
        )
        assert unavailable["reason"] == "QueryFailed" and "query:" in unavailable["message"]
        assert await watch_route(fake, 4.0) == {settled}
        assert events(fake).count(("Warning", "MetricsUnavailable")) == warnings + 1
        assert len(status(fake)["history"]) == decisions

        # Back: the load is read again and the weight returns to the speculative pool.
        await asyncio.to_thread(prometheus.start)
        await eventually(lambda: condition(fake, "MetricsAvailable").get("status") == "True", what="recovery")
        await eventually(lambda: spec_weight(fake) == 100, what="speculative weight 100 again")
        assert not running.done(), "the operator stopped"


async def test_the_direct_source_scrapes_the_pods_itself(fake: FakeApiServer, kimi_doc: dict[str, Any]) -> None:
    async with direct_world(fake, kimi_doc) as world:
        for pool, ip in DIRECT_HOSTS.items():
            kubelet_pod(fake, pool, 0, ip)
        await all_on_speculative(fake)
        cond = condition(fake, "MetricsAvailable")
        assert cond["status"] == "True" and "Direct" in cond["message"]
        await world.load.set(24)
        await eventually(lambda: (w := spec_weight(fake)) is not None and w < 60, what="weight down")
        assert status(fake)["load"]["concurrency"] > 12
        assert not world.operator.done(), "the operator stopped"


async def test_crossover_alone_with_an_slo_in_seconds_still_splits_a_loaded_pool(
    fake: FakeApiServer, kimi_doc: dict[str, Any]
) -> None:
    """Issue 29: crossoverConcurrency alone (curves modelled in relative units) and the example's TPOT SLO: 77
    requests on the speculative pool, crossover 24 per replica, the baseline pool idle. The weights stayed 100/0:
    no forecast met the SLO in seconds on unitless curves, so every weight served no goodput."""
    settings = {"crossoverConcurrency": 24, "tpotSloSeconds": 0.1, "downStabilizationSeconds": 0}
    async with direct_world(fake, kimi_doc, settings) as world:
        for pool, ip in DIRECT_HOSTS.items():
            kubelet_pod(fake, pool, 0, ip)
        await all_on_speculative(fake)
        await world.load.set(77)
        await eventually(lambda: (w := spec_weight(fake)) is not None and w <= 80, timeout=90, what="weight down")
        reason = status(fake)["lastDecision"]["reason"]
        assert "over the next 6 turnovers" in reason and "tpotSloSeconds is not applied" in reason
        assert not world.operator.done(), "the operator stopped"


def engine_template(api: FakeApiServer) -> tuple[str, bool] | None:
    """The engine Deployment's template hash, and whether it runs speculation."""
    deployment = api.get(DEPLOYMENTS, NS, f"{NAME}-engine")
    if deployment is None:
        return None
    template = deployment["spec"]["template"]
    args = template["spec"]["containers"][0]["args"]
    return template["metadata"]["annotations"]["specserve.io/engine-config-hash"], "--speculative-algorithm" in args


# Per replica tokens/s on which baseline serves more at every concurrency, as on the seed profile.
BASELINE_ALWAYS = {
    "speculative": [{"concurrency": 1, "tokensPerSecond": 40}, {"concurrency": 64, "tokensPerSecond": 800}],
    "baseline": [{"concurrency": 1, "tokensPerSecond": 48}, {"concurrency": 64, "tokensPerSecond": 1800}],
}


@contextlib.asynccontextmanager
async def templates_seen(api: FakeApiServer) -> AsyncIterator[list[tuple[str, bool]]]:
    """Every distinct engine pod template the Deployment carried while the block ran."""
    seen: list[tuple[str, bool]] = []
    stop = asyncio.Event()

    async def record() -> None:
        while not stop.is_set():
            now = engine_template(api)
            if now is not None and (not seen or seen[-1] != now):
                seen.append(now)
            await asyncio.sleep(0.05)

    recorder = asyncio.create_task(record())
    try:
        yield seen
    finally:
        stop.set()
        await recorder


def restart_doc(doc: dict[str, Any]) -> dict[str, Any]:
    body = switching_doc(doc)
    body["spec"]["strategy"] = "Restart"
    body["spec"]["switching"]["initialMode"] = "Speculative"
    body["spec"]["switching"].pop("crossoverConcurrency")
    body["spec"]["switching"]["curves"] = BASELINE_ALWAYS
    return body


def adaptive_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """Adaptive on one pool, its config rendered from crossover 16 (a re-measure within 20 % keeps it)."""
    body = switching_doc(doc)
    body["spec"]["strategy"] = "Adaptive"
    body["spec"]["switching"].update({"crossoverConcurrency": 16, "hysteresis": 0.2})
    return body


def speculative_template(api: FakeApiServer) -> bool | None:
    now = engine_template(api)
    return None if now is None else now[1]


async def test_restart_flips_the_pod_template_exactly_once_across_an_operator_restart(
    manual_fake: FakeApiServer, engine_prometheus: Prometheus, load: Load, kimi_doc: dict[str, Any]
) -> None:
    """Curves on which baseline always serves more (the seed profile): a Restart pool serving speculatively
    restarts into baseline once, and never back, even with the operator killed mid-switch."""
    api, url = manual_fake, engine_prometheus.url
    await load.set(4)
    async with templates_seen(api) as seen:
        async with operator(url):
            api.create(restart_doc(kimi_doc))
            await eventually(lambda: engine_template(api), what="the engine Deployment")
            assert speculative_template(api) is True  # initialMode
            api.set_deployment_ready(NS, f"{NAME}-engine")
            decided = await eventually(
                lambda: (d := status(api).get("lastDecision")) and d.get("action") == "Restart" and d,
                what="the Restart decision",
            )
            assert decided["toMode"] == "Baseline" and decided["applied"] is True
            await eventually(lambda: speculative_template(api) is False, what="the template flip")
        # Killed mid-switch (the new pods are not Ready yet): a new operator resumes, it does not restart again.
        assert status(api)["switching"]["mode"] == "Baseline"
        async with operator(url) as running:
            await asyncio.sleep(3)
            api.set_deployment_ready(NS, f"{NAME}-engine")
            await eventually(lambda: status(api).get("activeMode") == "Baseline", what="serving baseline")
            await asyncio.sleep(3)
            assert not running.done()
    assert [d for d in status(api)["history"] if d.get("action") == "Restart"] == [decided]
    assert len(status(api)["switching"]["restarts"]) == 1  # the budget spent once
    assert [speculative for _, speculative in seen] == [True, False]  # flipped once, never back


async def test_a_series_selector_prometheus_refuses_is_reported_with_its_message(
    fake: FakeApiServer, prometheus: Prometheus, kimi_doc: dict[str, Any]
) -> None:
    async with operator(prometheus.url) as running:
        body = switching_doc(kimi_doc)
        body["spec"]["switching"]["metrics"] = {
            "seriesSelector": 'namespace="$namespace",specserve_instance=~"($name"'
        }  # a bad regexp
        fake.create(body)
        cond = await eventually(
            lambda: (c := condition(fake, "MetricsAvailable")).get("status") == "False" and c, what="the refusal"
        )
        assert cond["reason"] == "QueryRefused"
        assert "answered HTTP 400: the query was refused (bad_data)" in cond["message"]  # never the body
        assert "fix spec.switching.metrics.seriesSelector" in cond["message"]
        assert "lastDecision" not in status(fake)  # nothing switched
        # Posted right after the status write that set the condition.
        await eventually(lambda: ("Warning", "MetricsUnavailable") in events(fake), what="the Warning event")
        assert not running.done()


def adaptive_config(api: FakeApiServer) -> str:
    """The config the engine pool's pod template mounts (a ConfigMap named for its content)."""
    pod = ((api.get(DEPLOYMENTS, NS, f"{NAME}-engine") or {}).get("spec") or {}).get("template", {}).get("spec", {})
    name = next((v["configMap"]["name"] for v in pod.get("volumes") or [] if "configMap" in v), None)
    config = (api.get(CONFIGMAPS, NS, name) if name else None) or {}
    return str((config.get("data") or {}).get(ADAPTIVE_CONFIG_KEY, ""))


def adaptive_configmaps(api: FakeApiServer) -> list[str]:
    return [c["metadata"]["name"] for c in api.list(CONFIGMAPS, NS) if c["metadata"]["name"].startswith(NAME)]


async def test_adaptive_re_renders_its_config_only_when_the_crossover_moves_past_the_band(
    fake: FakeApiServer, engine_prometheus: Prometheus, load: Load, kimi_doc: dict[str, Any]
) -> None:
    await load.set(2)
    doc = adaptive_doc(kimi_doc)
    async with operator(engine_prometheus.url) as running:
        fake.create(doc)
        await eventually(lambda: '"16"' in adaptive_config(fake), what="the config rendered from crossover 16")
        await eventually(
            lambda: (status(fake).get("switching") or {}).get("adaptiveCrossover") == 16, what="the loop's state"
        )
        # (A freshly started Prometheus has no series for its first scrapes: wait until the load is read.)
        await eventually(lambda: condition(fake, "MetricsAvailable").get("status") == "True", what="load read")
        engine_hash = (fake.get(DEPLOYMENTS, NS, f"{NAME}-engine") or {})["spec"]["template"]["metadata"]
        decisions = len(status(fake).get("history", []))

        # Re-measured within the band (+12 %): the config stays, no pod rolls, nothing is decided.
        fake.patch(SPECSERVES, NS, NAME, {"spec": {"switching": {"crossoverConcurrency": 18}}})
        await asyncio.sleep(4)
        assert '"16"' in adaptive_config(fake)
        assert (fake.get(DEPLOYMENTS, NS, f"{NAME}-engine") or {})["spec"]["template"]["metadata"] == engine_hash
        assert len(status(fake).get("history", [])) == decisions

        # Past the band: one Reconfigure decision, and the reconcile renders the config from the new crossover.
        (old_config,) = adaptive_configmaps(fake)
        fake.patch(SPECSERVES, NS, NAME, {"spec": {"switching": {"crossoverConcurrency": 40}}})
        # One replica, no surge: the operator warns of the unavoidable gap (an event even though the switching
        # loop, not a kopf handler, triggered this reconcile) while the pod keeps its config; it rolls the pool
        # onto the new ConfigMap on its next pass, and drops the old one once the roll settled.
        await eventually(lambda: ("Warning", "DowntimeAhead") in events(fake), what="the downtime warning")
        await eventually(lambda: '"40"' in adaptive_config(fake), what="the config re-rendered from crossover 40")
        last = status(fake)["lastDecision"]
        assert last["action"] == "Reconfigure" and "40.0" in last["reason"]
        assert ("Normal", "Reconfigure") in events(fake)
        assert (fake.get(DEPLOYMENTS, NS, f"{NAME}-engine") or {})["spec"]["template"]["metadata"] != engine_hash
        await eventually(
            lambda: old_config not in adaptive_configmaps(fake) and len(adaptive_configmaps(fake)) == 1,
            what="the old config pruned after the roll",
        )
        assert not running.done(), "the operator stopped"

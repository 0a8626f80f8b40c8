"""The switching loop under failure, end to end: the real operator against the fake API server, Debian's
Prometheus scraping SGLang emulators (or the Direct source scraping them), with the failures injected in the
fake's store: a Restart whose pods never get Ready past the progress deadline, a pool stuck mid-roll, Prometheus
returning series for only some pods, a pod still loading its model."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specserve_kubefake import DEPLOYMENTS, PODS, SPECSERVES, FakeApiServer
from tests.integration.switching_env import Load, Prometheus, pool_targets, running_prometheus
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
    route_accepted,
    route_weights,
    spec_weight,
    status,
    switching_doc,
)
from tests.integration.test_switching import adaptive_config, adaptive_doc, restart_doc, speculative_template

STALLED = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
           "message": 'ReplicaSet "kimi-k25-engine-2" has timed out progressing.'}  # fmt: skip


def stall(api: FakeApiServer, name: str, ready: int, updated: int, replicas: int) -> None:
    """The Deployment controller's report of a roll that ran past progressDeadlineSeconds."""
    deployment = api.get(DEPLOYMENTS, NS, name)
    assert deployment is not None
    api.patch_status(DEPLOYMENTS, NS, name, {
        "observedGeneration": deployment["metadata"]["generation"], "replicas": replicas,
        "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": updated, "conditions": [STALLED],
    })  # fmt: skip


@pytest.mark.parametrize("max_concurrent_rolls", [None, 1])
async def test_a_restart_whose_pods_never_get_ready_is_rolled_back_and_the_mode_barred(
    manual_fake: FakeApiServer,
    engine_prometheus: Prometheus,
    load: Load,
    kimi_doc: dict[str, Any],
    max_concurrent_rolls: int | None,
) -> None:
    """With a roll budget of 1 too (issue 31, 2): the failed restart holds the only slot, and the rollback's
    template replaces it there; it waited for a second slot for ever, the model off the air."""
    api, engine = manual_fake, f"{NAME}-engine"
    await load.set(4)
    async with operator(engine_prometheus.url, max_concurrent_rolls) as running:
        api.create(restart_doc(kimi_doc))  # baseline serves more everywhere: a Restart into it comes at once
        await eventually(lambda: speculative_template(api) is True, what="the engine Deployment")
        api.set_deployment_ready(NS, engine)
        await eventually(lambda: speculative_template(api) is False, what="the restart into Baseline")
        assert status(api)["activeMode"] == "Speculative"
        # The new pod never gets Ready (a wrong draft path, an OOM while capturing CUDA graphs): the deadline passes.
        stall(api, engine, ready=0, updated=1, replicas=1)
        back = await eventually(
            lambda: (d := status(api).get("lastDecision")) and d["action"] == "Rollback" and d, what="the rollback"
        )
        assert (back["fromMode"], back["toMode"]) == ("Baseline", "Speculative")
        assert "ProgressDeadlineExceeded" in back["reason"] and "barred for 600 s" in back["reason"]
        switching = status(api)["switching"]
        assert switching["mode"] == "Speculative"
        (bar,) = switching["barred"]
        assert (bar["mode"], bar["failures"]) == ("Baseline", 1) and "timed out progressing" in bar["reason"]
        assert status(api)["history"][-1] == back
        # The loop posts its event after the status write that the wait above saw.
        await eventually(lambda: ("Warning", "Rollback") in events(api), what="the Rollback warning event")
        await eventually(lambda: speculative_template(api) is True, what="the template rolled back")
        api.set_deployment_ready(NS, engine)
        await eventually(lambda: status(api).get("activeMode") == "Speculative", what="serving speculative again")
        # The policy resumes: it is evaluating (the Switching condition settles) but does not restart into the
        # barred mode, though Baseline still serves more.
        await eventually(lambda: condition(api, "Switching").get("status") == "False", what="switching settled")
        await asyncio.sleep(4)
        assert speculative_template(api) is True
        assert status(api)["lastDecision"] == back and status(api)["switching"]["barred"] == [bar]
        assert [d["action"] for d in status(api)["history"]] == ["Restart", "Rollback"]
        assert not running.done(), "the operator stopped"


async def test_an_adaptive_rerender_that_does_not_roll_out_is_reverted_and_rerendering_barred(
    manual_fake: FakeApiServer, engine_prometheus: Prometheus, load: Load, kimi_doc: dict[str, Any]
) -> None:
    api, engine = manual_fake, f"{NAME}-engine"
    await load.set(2)
    doc = adaptive_doc(kimi_doc)
    async with operator(engine_prometheus.url) as running:
        api.create(doc)
        await eventually(lambda: '"16"' in adaptive_config(api), what="the config rendered from crossover 16")
        api.set_deployment_ready(NS, engine)
        await eventually(lambda: condition(api, "MetricsAvailable").get("status") == "True", what="load read")
        # Re-measured past the band: the loop re-renders from 40, the pool rolls onto the new config...
        api.patch(SPECSERVES, NS, NAME, {"spec": {"switching": {"crossoverConcurrency": 40}}})
        await eventually(lambda: '"40"' in adaptive_config(api), what="the config re-rendered from crossover 40")
        assert status(api)["switching"]["servedCrossover"] == 16
        # ... and its pods never get Ready (the new config crashes the engine): the deadline passes.
        stall(api, engine, ready=0, updated=1, replicas=1)
        back = await eventually(
            lambda: (d := status(api).get("lastDecision")) and d["action"] == "Rollback" and d, what="the rollback"
        )
        assert "back to crossover 16" in back["reason"]
        switching = status(api)["switching"]
        assert switching["adaptiveCrossover"] == 16 and "servedCrossover" not in switching
        assert [b["mode"] for b in switching["barred"]] == [switching["mode"]]  # Adaptive bars its one mode
        # The loop posts its event after the status write that the wait above saw.
        await eventually(lambda: ("Warning", "Rollback") in events(api), what="the Rollback warning event")
        await eventually(lambda: '"16"' in adaptive_config(api), what="the config of crossover 16 back")
        api.set_deployment_ready(NS, engine)
        # The spec still says 40, but re-rendering is barred: nothing is decided while the bar lasts.
        await asyncio.sleep(5)
        assert status(api)["lastDecision"] == back and '"16"' in adaptive_config(api)
        assert not running.done(), "the operator stopped"


async def test_weights_between_ready_pools_follow_demand_while_a_pool_is_stuck_mid_roll(
    fake: FakeApiServer, prometheus: Prometheus, load: Load, kimi_doc: dict[str, Any]
) -> None:
    await load.set(1)
    async with operator(prometheus.url) as running:
        fake.create(switching_doc(kimi_doc))
        await all_on_speculative(fake)
        # The speculative pool's roll is stuck (its surge pod found no free GPU), its old pod still serves.
        stall(fake, f"{NAME}-spec", ready=1, updated=0, replicas=2)
        await asyncio.sleep(2)
        decided = len(status(fake).get("history", []))
        await load.set(24)
        # The loop's target follows the step (the route realises it as far as the reconcile lets the stuck pool
        # be: it may hold it drained while it rolls).
        await eventually(lambda: status(fake)["switching"]["weights"]["speculative"] < 60, what="target down")
        moves = status(fake)["history"][decided:]
        assert moves and all(d["action"] == "SetWeights" and d["applied"] for d in moves)
        assert all(d["weights"]["speculative"] < 100 for d in moves)
        assert not running.done(), "the operator stopped"


@pytest.fixture()
def partial_prometheus(tmp_path: Path, engines: list[str]) -> Iterator[Prometheus]:
    """Scrapes one pod of each pool while the baseline pool runs two Ready pods."""
    with running_prometheus(tmp_path, pool_targets(engines, NS, NAME)) as server:
        yield server


async def test_series_for_only_some_ready_pods_make_the_load_unknown_and_nothing_switches(
    fake: FakeApiServer, partial_prometheus: Prometheus, load: Load, kimi_doc: dict[str, Any]
) -> None:
    await load.set(1)  # low: read as known, it would move all weight to the speculative pool
    doc = switching_doc(kimi_doc)
    doc["spec"]["pools"]["baseline"]["replicas"] = 2
    async with operator(partial_prometheus.url) as running:
        fake.create(doc)
        await route_accepted(fake)
        # (A freshly started Prometheus has no series at all for its first scrapes: NoData first.)
        unavailable = await eventually(
            lambda: (c := condition(fake, "MetricsAvailable")).get("reason") == "PartialSeries" and c,
            what="load unknown: partial series",
        )
        assert unavailable["status"] == "False"
        assert "only 1 of the 2 Ready pods of pool baseline" in unavailable["message"]
        await asyncio.sleep(3)
        assert spec_weight(fake) == 0  # initialMode Baseline held
        assert "lastDecision" not in status(fake)
        assert ("Warning", "MetricsUnavailable") in events(fake)
        assert not running.done(), "the operator stopped"


async def test_direct_reads_the_demand_of_the_ready_pods_while_another_pod_loads(
    fake: FakeApiServer, kimi_doc: dict[str, Any]
) -> None:
    async with direct_world(fake, kimi_doc) as world:
        kubelet_pod(fake, "speculative", 0, DIRECT_HOSTS["speculative"])
        kubelet_pod(fake, "baseline", 0, DIRECT_HOSTS["baseline"])
        kubelet_pod(fake, "baseline", 1, "127.0.0.4", ready=False)  # answers nothing: it loads its model
        await all_on_speculative(fake)
        cond = condition(fake, "MetricsAvailable")
        assert cond["status"] == "True" and "Direct" in cond["message"]
        assert not world.operator.done(), "the operator stopped"


async def test_shared_gpus_put_no_weight_on_a_pool_still_loading_and_move_once_it_is_ready(
    manual_fake: FakeApiServer, kimi_doc: dict[str, Any]
) -> None:
    """Pools on one GPU, curves given, Baseline first, the speculative pool still loading its model. At low load
    both extremes serve nothing on the curves while one pool has no Ready replica, and the tie went to
    speculation: on the H200 the weights flipped onto the loading NGRAM pod and the failover took them off, 16
    times in a minute (docs/real-engine.md, fifth session). Now the loop holds until the pool is Ready, then
    moves all of the weight there in one step (low load: speculation serves more)."""
    api = manual_fake
    curves = {
        "speculative": [{"concurrency": 1, "tokensPerSecond": 550}, {"concurrency": 64, "tokensPerSecond": 9900}],
        "baseline": [{"concurrency": 1, "tokensPerSecond": 220}, {"concurrency": 64, "tokensPerSecond": 10200}],
    }
    doc = copy.deepcopy(kimi_doc)
    doc["spec"]["placement"]["gpuSharing"] = "Shared"
    async with direct_world(api, doc, {"curves": curves}) as world:
        # The curves' own crossover, not switching_doc's static one (a merge patch's null removes it).
        api.patch(SPECSERVES, NS, NAME, {"spec": {"switching": {"crossoverConcurrency": None}}})
        await eventually(lambda: api.get(DEPLOYMENTS, NS, f"{NAME}-base"), what="the baseline Deployment")
        api.set_deployment_ready(NS, f"{NAME}-base")
        kubelet_pod(api, "baseline", 0, DIRECT_HOSTS["baseline"])
        kubelet_pod(api, "speculative", 0, DIRECT_HOSTS["speculative"], ready=False)  # loading its model
        await route_accepted(api)
        await eventually(lambda: condition(api, "MetricsAvailable").get("status") == "True", what="load read")
        for _ in range(8):  # eight evaluations at 1 s: never a decision, never weight on the loading pool
            await asyncio.sleep(1)
            assert spec_weight(api) in (0, None), route_weights(api)
            assert "lastDecision" not in status(api), status(api)["lastDecision"]
        api.set_deployment_ready(NS, f"{NAME}-spec")
        ready = {"conditions": [{"type": "Ready", "status": "True"}]}
        api.patch_status(PODS, NS, f"{NAME}-speculative-0", ready)  # the model loaded
        await eventually(lambda: spec_weight(api) == 100, what="all weight on speculation once it is Ready")
        moves = [h for h in status(api).get("history") or [] if h.get("action") == "SetWeights"]
        assert len(moves) == 1, moves  # one step, and no flip before it
        assert not world.operator.done(), "the operator stopped"

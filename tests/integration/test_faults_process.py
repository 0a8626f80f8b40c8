"""The operator process under faults (issue 14, "the operator itself"): the real operator against kubefake."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specserve.commands.supervisor import LeadershipLostError, serve
from specserve.config import OperatorConfig
from specserve.kube.client import ClientOptions, KubeClient
from specserve.kube.kinds import OWNED_KINDS
from specserve.layout import LABEL_INSTANCE
from specserve_kubefake import DEPLOYMENTS, HTTPROUTES, LEASES, SERVICES, SPECSERVES
from tests.integration.kube_emulator import eventually, running_operator
from tests.integration.test_ha import NS, RESYNC, ThreadedFake, config, converged, lease_config, seeded, threaded_fake

LEASE_NS = "specserve-system"


@pytest.fixture()
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadedFake]:
    with threaded_fake(tmp_path, monkeypatch) as api:
        yield api


def pools_of(fake: ThreadedFake, name: str) -> list[str]:
    items = fake.call(fake.api.list, DEPLOYMENTS, NS)
    return [d["metadata"]["name"] for d in items if d["metadata"]["name"].startswith(name)]


async def test_a_lapsed_lease_fences_every_write_before_a_standby_may_take_over(
    fake: ThreadedFake, kimi_doc: dict[str, Any]
) -> None:
    election = lease_config("pod-a").leader_election
    assert election is not None
    fake.create(seeded(kimi_doc, "kimi"))
    async with running_operator(lease_config("pod-a")) as task:
        await eventually(lambda: converged(fake, "kimi"), what="reconciled as leader")
        pool = pools_of(fake, "kimi")[0]

        async def drift() -> None:  # another writer keeps changing the pool: the leader keeps repairing it
            replicas = 2
            while True:
                fake.patch(DEPLOYMENTS, NS, pool, {"spec": {"replicas": replicas}})
                replicas = 5 - replicas
                await asyncio.sleep(0.05)

        drifting = asyncio.create_task(drift())
        try:
            await asyncio.sleep(0.5)
            fake.add_fault(method="PUT", path=r"/leases/", status=500, times=None)  # renewals fail from now on
            await eventually(task.done, timeout=15, what="the operator to stop")
        finally:
            drifting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await drifting
        assert isinstance(task.exception(), LeadershipLostError)

    stamped = fake.stamped()
    renewals = [t for t, r in stamped if r.resource == LEASES and r.method == "PUT" and r.status == 200]
    # The last renewal the server accepted; the operator counts its lease from before it sent that PUT, so its
    # fence closed no later than this + the renew deadline (and a standby may take over only after a whole lease).
    fence = renewals[-1] + election.renew_deadline_seconds
    writes = [(t, r) for t, r in stamped if r.is_write and r.resource != LEASES]
    repairs_before = [r for t, r in writes if renewals[-1] < t < fence]
    after = [str(r) for t, r in writes if t >= fence]
    assert repairs_before  # the leader was writing until its lease lapsed
    assert after == []  # and not once afterwards


def route_weights(fake: ThreadedFake, namespace: str, name: str) -> dict[str, int]:
    route = fake.get(HTTPROUTES, namespace, name) or {}
    return {
        b["name"]: int(b.get("weight", 1))
        for rule in (route.get("spec") or {}).get("rules") or []
        for b in rule.get("backendRefs") or []
    }


async def test_a_deleted_pool_deployment_is_recreated_at_once_not_at_the_next_resync(
    fake: ThreadedFake, kimi_doc: dict[str, Any]
) -> None:
    async with running_operator(config(resync_seconds=3600)) as task:  # no resync round within the test
        fake.create(seeded(kimi_doc, "kimi"))
        await eventually(lambda: converged(fake, "kimi") and len(pools_of(fake, "kimi")) == 2, what="two pools")
        pool = pools_of(fake, "kimi")[0]
        uid = (fake.get(DEPLOYMENTS, NS, pool) or {})["metadata"]["uid"]
        fake.delete(DEPLOYMENTS, NS, pool)
        await eventually(
            lambda: (fake.get(DEPLOYMENTS, NS, pool) or {"metadata": {"uid": uid}})["metadata"]["uid"] != uid,
            what="the pool re-created by the watch",
        )
        assert not task.done()


BULK = "bulk"


async def test_a_failover_does_not_queue_behind_a_resync_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kimi_doc: dict[str, Any]
) -> None:
    with threaded_fake(tmp_path, monkeypatch) as fake:
        fake.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": BULK}})
        names = [f"bulk-{i}" for i in range(6)]
        for name in names:
            fake.create({**seeded(kimi_doc, name), "metadata": {"name": name, "namespace": BULK}})
        # Reads in the bulk namespace are slow: a resync round there outlasts its interval, so the background
        # lane always has a queue (1 slot of 2: the other is reserved for urgent reconciles).
        # (Not the kinds kopf watches: only the reconcile's reads.)
        slow = "configmaps|services|networkpolicies|poddisruptionbudgets|httproutes|podmonitors"
        fake.add_fault(method="GET", path=rf"/namespaces/{BULK}/({slow})", delay=0.1, times=None)
        settings = OperatorConfig(  # every round reconciles every SpecServe: the round is the load here
            namespaces=(NS, BULK), resync_seconds=1.0, post_events=False, max_concurrent_reconciles=2,
            full_resync_every=1,
        )  # fmt: skip
        async with running_operator(settings) as task:
            fake.create(seeded(kimi_doc, "kimi"))  # created while running: an urgent reconcile
            await eventually(lambda: converged(fake, "kimi"), timeout=60, what="kimi reconciled")
            await eventually(
                lambda: all(converged_in(fake, BULK, n) for n in names), timeout=90, what="the bulk SpecServes"
            )
            serving = {n: w for n, w in route_weights(fake, NS, "kimi").items() if w > 0}
            assert len(serving) == 1, serving  # the example starts with all traffic on one pool
            (pool,) = serving
            # The start-up's urgent work (every new pool's events) drains; then only resync rounds run there.
            await eventually(lambda: one_at_a_time(fake, BULK, 2.0), timeout=60, what="only the resync lane busy")
            start = len(fake.requests)
            fake.call(fake.api.set_deployment_ready, NS, pool, 0)  # the serving pool lost its Ready pod
            await eventually(lambda: route_weights(fake, NS, "kimi").get(pool) == 0, timeout=60, what="failover")
            moved = len(fake.requests)
            assert not task.done()
            # Which bulk SpecServes were read between the trigger and the failover's route write: at most the one
            # reconcile already running in the background slot, not the round queued behind it.
            read = {r.query.get("labelSelector", "") for r in fake.requests[start:moved] if r.namespace == BULK}
            assert len({s for s in read if s}) <= 2, read
            await eventually(
                lambda: any(r.namespace == BULK for r in fake.requests[moved:]), what="the round to go on after it"
            )


def converged_in(fake: ThreadedFake, namespace: str, name: str) -> bool:
    obj = fake.get(SPECSERVES, namespace, name)
    return bool(obj and (obj.get("status") or {}).get("observedGeneration") == obj["metadata"]["generation"])


def one_at_a_time(fake: ThreadedFake, namespace: str, seconds: float) -> bool:
    """Over the last `seconds` (and some reads at all), the reconciles in `namespace` ran one after the other: each
    SpecServe's label-selected reads (its pass's LISTs, sent together) form one unbroken run; two passes at once
    would break each other's runs. The runs the window cuts (its first and last) may be shorter; a SpecServe may
    come round again (a fast round)."""
    stamped = fake.stamped()
    if not stamped or stamped[-1][0] - stamped[0][0] < seconds:
        return False
    since = stamped[-1][0] - seconds
    runs = [r.query.get("labelSelector", "") for t, r in stamped if t >= since and r.namespace == namespace]
    runs = [s for s in runs if s]
    lengths: list[int] = []
    for i, s in enumerate(runs):
        if i == 0 or runs[i - 1] != s:
            lengths.append(0)
        lengths[-1] += 1
    return len(lengths) >= 3 and all(n >= len(OWNED_KINDS) for n in lengths[1:-1])


def condition(fake: ThreadedFake, name: str, type_: str) -> tuple[str, str] | None:
    obj = fake.get(SPECSERVES, NS, name) or {}
    cond = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)
    return (cond["status"], cond["reason"]) if cond else None


async def test_without_the_gateway_api_only_the_route_is_missing_and_stale_pools_are_pruned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kimi_doc: dict[str, Any]
) -> None:
    with threaded_fake(tmp_path, monkeypatch, gateway_api=False) as fake:
        async with running_operator(config()) as task:
            fake.create(seeded(kimi_doc, "kimi"))
            await eventually(lambda: len(pools_of(fake, "kimi")) == 2, what="both pools")
            await eventually(
                lambda: condition(fake, "kimi", "RouteReady") == ("False", "NotInstalled"), what="RouteReady"
            )
            fake.patch(SPECSERVES, NS, "kimi", {"spec": {"strategy": "Restart"}})
            await eventually(lambda: pools_of(fake, "kimi") == ["kimi-engine"], what="the old pools pruned")
            await eventually(lambda: converged(fake, "kimi"), what="the new generation observed")
            assert condition(fake, "kimi", "RouteReady") == ("False", "NotInstalled")
            assert condition(fake, "kimi", "Degraded") == ("False", "AsExpected")  # no apply failure reported
            assert not task.done()


async def test_a_hung_list_of_one_kind_costs_its_timeout_and_the_rest_is_reconciled(
    fake: ThreadedFake, kimi_doc: dict[str, Any]
) -> None:
    fake.add_fault(method="GET", path=r"/poddisruptionbudgets", hang=True, times=None)
    stop = asyncio.Event()
    kube = KubeClient.from_environment(ClientOptions(request_timeout=5, read_timeout=0.5, backoff_base=0.05))
    task = asyncio.create_task(serve(config(), kube, stop_flag=stop))
    try:
        fake.create(seeded(kimi_doc, "kimi"))
        await eventually(lambda: len(pools_of(fake, "kimi")) == 2, what="the pools applied")
        await eventually(lambda: route_weights(fake, NS, "kimi"), what="the route applied")
        await eventually(
            lambda: condition(fake, "kimi", "BaselinePoolReady") == ("True", "PodsReady"), what="a pool reported"
        )
        obj = fake.get(SPECSERVES, NS, "kimi") or {}
        degraded = next(c for c in obj["status"]["conditions"] if c["type"] == "Degraded")
        assert degraded["status"] == "True" and "poddisruptionbudgets" in degraded["message"]  # named in status
        fake.patch(SPECSERVES, NS, "kimi", {"spec": {"pools": {"baseline": {"replicas": 2}}}})
        await eventually(
            lambda: (fake.get(DEPLOYMENTS, NS, "kimi-base") or {})["spec"]["replicas"] == 2,
            what="a spec change applied",
        )
        assert not task.done()  # nothing escaped to kill the operator
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=30)


def rolled(fake: ThreadedFake, namespace: str, priority: str) -> dict[str, bool]:
    """Deployments running the new template -> whether the controller finished rolling them."""
    out = {}
    for d in fake.call(fake.api.list, DEPLOYMENTS, namespace):
        if d["spec"]["template"]["spec"].get("priorityClassName") == priority:
            done = (d.get("status") or {}).get("observedGeneration") == d["metadata"]["generation"]
            out[d["metadata"]["name"]] = done
    return out


async def test_max_concurrent_rolls_is_honoured_across_specserves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kimi_doc: dict[str, Any]
) -> None:
    names = ["a", "b", "c"]
    with threaded_fake(tmp_path, monkeypatch, auto_ready=False) as fake:
        async with running_operator(config(max_concurrent_rolls=2)) as task:
            for name in names:
                fake.create(seeded(kimi_doc, name))
            await eventually(lambda: len(fake.call(fake.api.list, DEPLOYMENTS, NS)) == 6, what="six pools")
            for d in fake.call(fake.api.list, DEPLOYMENTS, NS):
                fake.call(fake.api.set_deployment_ready, NS, d["metadata"]["name"])
            await eventually(lambda: all(converged(fake, n) for n in names), what="all Ready")
            # A change of every SpecServe's pod template at once (as a new operator release renders).
            for name in names:
                fake.patch(SPECSERVES, NS, name, {"spec": {"placement": {"priorityClassName": "llm-batch"}}})
            seen_waiting = False
            for _ in range(200):
                now = rolled(fake, NS, "llm-batch")
                rolling = [n for n, done in now.items() if not done]
                assert len(rolling) <= 2, rolling  # never more than the budget at once
                if len(now) == 6 and not rolling:
                    break
                seen_waiting = seen_waiting or any(
                    (condition(fake, n, "Progressing") or ("", ""))[1] == "WaitingForRollSlot" for n in names
                )
                await asyncio.sleep(0.3)
                for name in rolling:  # the Deployment controller finishes what was let through
                    fake.call(fake.api.set_deployment_ready, NS, name)
                for name in names:  # and the Gateway accepts each route generation (no settle delay)
                    fake.call(fake.api.set_route_accepted, NS, name)
            progress = {  # why, should it ever not finish
                n: [c for c in ((fake.get(SPECSERVES, NS, n) or {}).get("status") or {}).get("conditions") or []
                    if c["type"] in ("Progressing", "Degraded")]
                for n in names
            }  # fmt: skip
            assert len(rolled(fake, NS, "llm-batch")) == 6, progress  # every pool rolled in the end
            assert seen_waiting  # and the held ones said why
            assert not task.done()


async def test_a_resync_round_skips_clean_unchanged_specserves_and_still_repairs_drift(
    fake: ThreadedFake, kimi_doc: dict[str, Any]
) -> None:
    names = [f"s{i}" for i in range(4)]
    async with running_operator(config(full_resync_every=3)) as task:
        for name in names:
            fake.create(seeded(kimi_doc, name))
        await eventually(lambda: all(converged(fake, n) for n in names), what="all reconciled")
        await asyncio.sleep(RESYNC * 4)  # the start-up's writes settle; the skipping starts
        start = len(fake.requests)
        await asyncio.sleep(RESYNC * 6)
        window = fake.requests[start:]
        own = [r for r in window if r.query.get("labelSelector", "").startswith(f"{LABEL_INSTANCE}=")]
        shared = [r for r in window if r.query.get("labelSelector") == LABEL_INSTANCE]
        # Without skipping: 7 LISTs per SpecServe per round; with it, a full pass every third round at most.
        assert len(own) <= 7 * len(names) * 6 / 2, len(own)
        assert shared  # the round's one LIST per kind
        fake.delete(SERVICES, NS, "s1-base")
        await eventually(lambda: fake.get(SERVICES, NS, "s1-base") is not None, what="the Service re-created")
        assert not task.done()

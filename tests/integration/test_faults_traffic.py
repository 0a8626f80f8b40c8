"""The real operator against the fake API server with faults injected: traffic moves off a pool that cannot serve
whatever else is refused, a conflicting new pool never zeroes the route, an autoscaler takes the replicas over
without the count dropping, and the reconcile's status fields live beside another manager's."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from specserve_kubefake import DEPLOYMENTS, SPECSERVES, FakeApiServer
from tests.integration.kube_emulator import eventually, operator_cluster
from tests.integration.test_safe_reconcile import (
    NAME,
    NS,
    RESYNC,
    Kubelet,
    background,
    condition,
    edit,
    running,
    serving,
    status_of,
    weights,
)

JSON = dict[str, Any]
SPEC, BASE = f"{NAME}-spec", f"{NAME}-base"
REFUSAL = 'admission webhook "images.policy.example" denied the request: image not allowed'


@pytest.fixture()
async def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeApiServer]:
    async with operator_cluster(NS, tmp_path, monkeypatch, auto_ready=False) as api:
        yield api


def degraded_message(api: FakeApiServer) -> str:
    cond = condition(api, "Degraded") or {}
    return str(cond.get("message", "")) if cond.get("status") == "True" else ""


async def test_a_refused_engine_change_does_not_hold_the_failover(fake: FakeApiServer, kimi_doc: JSON) -> None:
    async with background(Kubelet(fake).run()), running(resync=60):  # no resync: the Deployment watch acts
        await serving(fake, kimi_doc)
        assert weights(fake) == {SPEC: 0, BASE: 100}  # initialMode Baseline
        fake.faults.add("PATCH", rf"/deployments/{NAME}-(spec|base)$", 422, times=None, message=REFUSAL)
        edit(fake, {"engine": {"memFractionStatic": 0.8}})
        await eventually(lambda: f"Deployment/{SPEC}" in degraded_message(fake), what="the refusal in status")
        assert "image not allowed" in degraded_message(fake)
        began = time.monotonic()
        fake.set_deployment_ready(NS, BASE, 0)  # the pool holding 100 % loses its Ready pod
        await eventually(lambda: weights(fake) == {SPEC: 100, BASE: 0}, timeout=10, what="the failover")
        print(f"\nfailover with a refused Deployment: {time.monotonic() - began:.2f} s")
        assert "image not allowed" in degraded_message(fake)  # still named


async def test_a_refused_engine_change_does_not_hold_the_switching_loops_move(
    fake: FakeApiServer, kimi_doc: JSON
) -> None:
    async with background(Kubelet(fake).run()), running(resync=60):
        await serving(fake, kimi_doc)
        fake.faults.add("PATCH", rf"/deployments/{NAME}-(spec|base)$", 422, times=None, message=REFUSAL)
        edit(fake, {"engine": {"memFractionStatic": 0.8}})
        await eventually(lambda: degraded_message(fake), what="the refusal in status")
        # The switching loop's decision, as it writes it (its own field manager): all traffic to speculation.
        rt = fake.registry.get(SPECSERVES)
        assert rt is not None
        decision = {
            "apiVersion": rt.api_version,
            "kind": rt.kind,
            "metadata": {"name": NAME, "namespace": NS},
            "status": {
                "switching": {
                    "mode": "Speculative",
                    "modeSince": "2026-12-01T00:00:00Z",
                    "weights": {"speculative": 100, "baseline": 0},
                }
            },
        }
        fake.store.patch(rt, NS, NAME, "apply", decision, subresource="status", manager="specserve-switching",
                         force=True)  # fmt: skip
        fake.set_deployment_ready(NS, BASE, 0)  # and the baseline pool fails
        await eventually(lambda: weights(fake) == {SPEC: 100, BASE: 0}, timeout=10, what="the loop's move")


async def test_a_conflict_on_the_new_side_never_zeroes_the_route(fake: FakeApiServer, kimi_doc: JSON) -> None:
    theirs = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"{NAME}-engine", "namespace": NS},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "theirs"}},
                       "template": {"metadata": {"labels": {"app": "theirs"}},
                                    "spec": {"containers": [{"name": "c", "image": "theirs:1"}]}}}}  # fmt: skip
    async with background(Kubelet(fake).run()), running():
        await serving(fake, kimi_doc)
        created = fake.create(theirs)
        fake.set_deployment_ready(NS, f"{NAME}-engine")
        edit(fake, {"strategy": "Restart"})
        await eventually(lambda: (condition(fake, "Ready") or {}).get("reason") == "Conflict", what="Conflict")
        for _ in range(int(6 / RESYNC)):
            live = weights(fake)
            assert sum(live.values()) == 100 and live.get(f"{NAME}-engine", 0) == 0, live
            assert fake.get(DEPLOYMENTS, NS, SPEC) is not None and fake.get(DEPLOYMENTS, NS, BASE) is not None
            await asyncio.sleep(RESYNC / 2)
        now = fake.get(DEPLOYMENTS, NS, f"{NAME}-engine")
        assert now is not None and now["metadata"]["uid"] == created["metadata"]["uid"]
        assert not now["metadata"].get("ownerReferences")  # never taken over


async def test_an_autoscaler_takes_the_replicas_over_without_a_drop(fake: FakeApiServer, kimi_doc: JSON) -> None:
    rt = fake.registry.get(DEPLOYMENTS)
    assert rt is not None
    seen: list[int] = []

    async def sample() -> None:
        while True:
            live = fake.get(DEPLOYMENTS, NS, BASE)
            if live is not None:
                seen.append(int(live["spec"].get("replicas", 1)))
            await asyncio.sleep(0.005)

    def hpa_scales(count: int) -> None:  # an HPA writes the count with its own manager (an Update)
        fake.store.patch(rt, NS, BASE, "merge", {"spec": {"replicas": count}}, manager="horizontal-pod-autoscaler")

    async with background(Kubelet(fake).run()), running():
        await serving(fake, kimi_doc)
        edit(fake, {"pools": {"baseline": {"replicas": 6}}})
        await eventually(lambda: (fake.get(DEPLOYMENTS, NS, BASE) or {})["spec"]["replicas"] == 6, what="6 replicas")
        async with background(sample()):
            hpa_scales(6)  # the HPA, created first, agrees with the count: it owns nothing yet
            edit(fake, {"pools": {"baseline": {"autoscaling": "External"}}})
            await eventually(lambda: status_of(fake, "Progressing") == "False", what="settled")
            await asyncio.sleep(RESYNC * 4)
            assert seen and min(seen[len(seen) // 4 :]) == 6, sorted(set(seen))
            hpa_scales(7)
            await asyncio.sleep(RESYNC * 4)
            assert (fake.get(DEPLOYMENTS, NS, BASE) or {})["spec"]["replicas"] == 7  # never fought
            seen.clear()
            edit(fake, {"pools": {"baseline": {"autoscaling": "Operator", "replicas": 3}}})  # and back
            await eventually(lambda: (fake.get(DEPLOYMENTS, NS, BASE) or {})["spec"]["replicas"] == 3, what="3")
        assert min(seen) >= 3, sorted(set(seen))


async def test_a_restarted_operator_keeps_another_managers_status_fields(fake: FakeApiServer, kimi_doc: JSON) -> None:
    rt = fake.registry.get(SPECSERVES)
    assert rt is not None
    theirs = {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {"name": NAME, "namespace": NS},
              "status": {"lastDecision": {"time": "2026-12-01T00:00:00Z", "toMode": "Baseline", "reason": "kept",
                                          "applied": False}}}  # fmt: skip
    async with background(Kubelet(fake).run()):
        async with running():
            await serving(fake, kimi_doc)
            fake.store.patch(rt, NS, NAME, "apply", copy.deepcopy(theirs), subresource="status",
                             manager="specserve-other", force=True)  # fmt: skip
            edit(fake, {"routing": {"pathPrefix": "/v1"}})  # the reconcile writes its fields again
            await eventually(lambda: status_of(fake, "Progressing") == "False", what="settled")
            obj = fake.get(SPECSERVES, NS, NAME) or {}
            await eventually(
                lambda: (
                    (fake.get(SPECSERVES, NS, NAME) or {})["status"].get("observedGeneration")
                    == obj["metadata"]["generation"]
                ),
                what="observedGeneration",
            )
        status = (fake.get(SPECSERVES, NS, NAME) or {})["status"]
        assert status["lastDecision"]["reason"] == "kept" and status_of(fake, "Ready") == "True"
        start = len(fake.requests)
        async with running():  # a new process: nothing of its own differs, so nothing is written
            await asyncio.sleep(RESYNC * 6)
        assert len(fake.requests) > start
        assert [f"{w.method} {w.path}" for w in fake.writes_since(start)] == []


def mem_fraction(api: FakeApiServer, pool: str) -> str:
    args = (api.get(DEPLOYMENTS, NS, pool) or {})["spec"]["template"]["spec"]["containers"][0]["args"]
    return str(args[args.index("--mem-fraction-static") + 1])


async def test_a_roll_after_a_weight_change_waits_for_the_gateway(fake: FakeApiServer, kimi_doc: JSON) -> None:
    kubelet = Kubelet(fake)
    async with background(kubelet.run()), running():
        await serving(fake, kimi_doc)
        kubelet.gateway_paused = True  # the Gateway stops taking new generations of the route
        edit(fake, {"engine": {"memFractionStatic": 0.8}})
        await eventually(lambda: weights(fake) == {SPEC: 100, BASE: 0}, what="the baseline pool drained")
        await asyncio.sleep(RESYNC * 6)
        assert mem_fraction(fake, BASE) != "0.8"  # not rolled: the Gateway may still send it requests
        assert "accept generation" in str((condition(fake, "Progressing") or {}).get("message"))
        kubelet.gateway_paused = False
        await eventually(lambda: mem_fraction(fake, BASE) == "0.8", what="the roll once accepted")
        await eventually(lambda: status_of(fake, "Progressing") == "False", what="settled")


async def test_without_gateway_status_a_roll_waits_the_settle_delay(fake: FakeApiServer, kimi_doc: JSON) -> None:
    doc = copy.deepcopy(kimi_doc)
    doc["metadata"]["namespace"] = NS
    doc["spec"]["routing"]["settleSeconds"] = 3
    async with background(Kubelet(fake).run()), running():
        fake.create(doc)  # no Gateway ever reports on the route
        await eventually(lambda: status_of(fake, "Progressing") == "False", what="settled")
        edit(fake, {"engine": {"memFractionStatic": 0.8}})
        await eventually(lambda: weights(fake) == {SPEC: 100, BASE: 0}, what="the baseline pool drained")
        moved = time.monotonic()
        await eventually(lambda: mem_fraction(fake, BASE) == "0.8", timeout=20, what="the roll after the delay")
        waited = time.monotonic() - moved
        print(f"\nroll after the weight change, no Gateway status: {waited:.2f} s (settleSeconds 3)")
        assert waited >= 1.5  # whole seconds in status: at least settleSeconds - 1 after the move was seen

"""The real operator against a slow API server (every call answered seconds late): a failover never waits behind
a reconcile of the same SpecServe that is in progress, and that reconcile never puts the weight back.

Measured in round trips, not wall-clock: the API calls the operator made one after another between the pool's
readiness change and the start of the route write that moves its weight (the fake records when each request came
in and when it was answered; calls in flight together count once). A failover queued behind a full pass waited
for many of them, then made its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from specserve_kubefake import FakeApiServer
from specserve_kubefake.recording import RecordedRequest
from tests.integration.kube_emulator import eventually, operator_cluster
from tests.integration.test_safe_reconcile import NAME, NS, Kubelet, background, edit, running, serving, weights

JSON = dict[str, Any]
SPEC, BASE = f"{NAME}-spec", f"{NAME}-base"
SLOW = 1.8  # seconds added to every call (the soak's `latency` fault answered 1.9 s late)
ROUND_TRIPS = 2  # the most the failover may wait for: it reads the route, then writes it


@pytest.fixture()
async def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeApiServer]:
    async with operator_cluster(NS, tmp_path, monkeypatch, auto_ready=False) as api:
        yield api


def route_weights(request: RecordedRequest) -> dict[str, int]:
    body = request.body if isinstance(request.body, dict) else {}
    rules = (body.get("spec") or {}).get("rules") or []
    return {b["name"]: int(b.get("weight", 1)) for r in rules for b in r.get("backendRefs") or []}


def route_writes(api: FakeApiServer, since: float) -> list[RecordedRequest]:
    return [
        r
        for r in list(api.requests)
        if r.started >= since and r.plural == "httproutes" and r.is_write and not r.subresource and r.status < 300
    ]


def round_trips(api: FakeApiServer, since: float, until: float) -> list[str]:
    """The API calls the operator made one after another between `since` and `until`: the most of them that do not
    overlap (earliest finish first). Calls in flight together are one round trip of waiting, not several: a pass
    that lists seven kinds at once waits for one of them."""
    calls = sorted(
        (r for r in list(api.requests) if r.verb != "watch" and r.started >= since and r.finished is not None
         and r.finished <= until),
        key=lambda r: r.finished or 0.0,
    )  # fmt: skip
    chain: list[str] = []
    free = since
    for r in calls:
        if r.started >= free:
            chain.append(f"{r.method} {r.path}")
            free = r.finished or free
    return chain


def snapshot_read(request: RecordedRequest) -> bool:
    """A LIST of the pass's snapshot (by our instance label; kopf's watch lists select the label's presence)."""
    return request.verb == "list" and request.query.get("labelSelector", "").endswith(f"={NAME}")


def idle(api: FakeApiServer) -> bool:
    calls = [r for r in list(api.requests) if r.verb != "watch"]
    return all(r.finished is not None for r in calls) and time.monotonic() - max(r.started for r in calls) > 1.0


def path_prefix(api: FakeApiServer) -> bool:
    route = api.get("gateway.networking.k8s.io/v1/httproutes", NS, NAME) or {}
    return "/v1" in json.dumps((route.get("spec") or {}).get("rules") or [])


@pytest.mark.parametrize("in_flight", ["spec edit", "refused write"])
async def test_a_failover_does_not_wait_behind_a_slow_reconcile(
    fake: FakeApiServer, kimi_doc: JSON, in_flight: str
) -> None:
    async with background(Kubelet(fake).run()), running(resync=60):  # no resync: the Deployment watch acts
        await serving(fake, kimi_doc)
        assert weights(fake) == {SPEC: 0, BASE: 100}  # initialMode Baseline: the baseline pool holds it all
        slow = fake.faults.slow(None, SLOW)  # every kind, every verb
        change: JSON = {"routing": {"pathPrefix": "/v1"}}  # a reconcile of this SpecServe: many slow round trips
        if in_flight == "refused write":  # and an engine change an admission policy refuses, pool by pool
            fake.faults.refuse("Deployment", status=422)
            change["engine"] = {"memFractionStatic": 0.8}
        began = time.monotonic()
        edit(fake, change)
        # In progress, reading the pools (its snapshot's lists go out together): its world has the baseline pool
        # Ready, its writes are to come. (Once a pass's route write is on the wire the failover waits for that one
        # write and re-reads: a write cannot be recalled, so that is a different case.)
        await eventually(
            lambda: any(
                r.started >= began and r.plural == "deployments" and snapshot_read(r) for r in list(fake.requests)
            ),
            what="the reconcile of the edit in progress",
        )
        lost = time.monotonic()
        fake.set_deployment_ready(NS, BASE, 0)  # the pool holding 100 % loses its Ready pod
        await eventually(lambda: weights(fake) == {SPEC: 100, BASE: 0}, timeout=90, what="the failover")
        write = next(w for w in route_writes(fake, lost) if route_weights(w).get(BASE, 0) == 0)
        waited = round_trips(fake, lost, write.started)
        print(f"\nfailover behind a slow reconcile ({in_flight}): {len(waited)} round trips {waited}, "
              f"{write.started - lost:.2f} s")  # fmt: skip
        assert len(waited) <= ROUND_TRIPS, "\n".join(waited)

        # The pass that was in progress read the world before the pod loss: it never writes the weight back, and
        # the edit it was realising still lands (the pass after the failover does it).
        fake.faults.remove(slow)
        await eventually(lambda: path_prefix(fake), timeout=60, what="the edit realised")
        await eventually(lambda: idle(fake), timeout=60, what="every pass finished (no call for a second)")
        after = route_writes(fake, lost)
        assert all(route_weights(w).get(BASE, 0) == 0 for w in after), [route_weights(w) for w in after]
        assert weights(fake) == {SPEC: 100, BASE: 0}


async def test_a_new_leader_fails_over_a_pool_that_died_while_no_operator_ran(
    fake: FakeApiServer, kimi_doc: JSON
) -> None:
    """A leader that just started has no "before" to see a pool lose its replica: its first act lists the
    SpecServes, pools and routes at once and moves the weight, before kopf has even discovered the API."""
    async with background(Kubelet(fake).run()):
        async with running(resync=60):
            await serving(fake, kimi_doc)
            assert weights(fake) == {SPEC: 0, BASE: 100}
        fake.set_deployment_ready(NS, BASE, 0)  # while no operator runs
        slow = fake.faults.slow(None, SLOW)
        started = time.monotonic()
        async with running(resync=60):
            await eventually(lambda: weights(fake) == {SPEC: 100, BASE: 0}, timeout=120, what="the failover")
            write = next(w for w in route_writes(fake, started) if route_weights(w).get(BASE, 0) == 0)
            # From the operator's start: the listings, then the write (kopf's discovery and watches overlap them).
            waited = round_trips(fake, started, write.started)
            print(f"\nfailover by a new leader: {len(waited)} round trips after its start {waited}, "
                  f"{write.started - started:.2f} s")  # fmt: skip
            assert len(waited) <= 1, "\n".join(waited)  # the listings (answered together)
            fake.faults.remove(slow)

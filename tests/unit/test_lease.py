"""Lease leader election: one leader at a time, standbys take over only after expiry or a release."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client as k8s

from specserve.config import LeaderElection
from specserve.kube.client import ClientOptions, FencedError, KubeClient, KubeError
from specserve.kube.kinds import Kind
from specserve.kube.lease import LEASE, LeaseElector
from specserve_kubefake import LEASES, FakeApiServer

JSON = dict[str, Any]


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class MemoryLeases:
    """Leases with the API server's optimistic concurrency: a PUT with a stale resourceVersion is a 409."""

    stored: dict[str, JSON] = field(default_factory=dict)
    version: int = 0
    failing: bool = False

    def _check(self) -> None:
        if self.failing:
            raise KubeError(0, "connection refused")

    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        self._check()
        return copy.deepcopy(self.stored.get(name))

    async def create(self, kind: Kind, namespace: str, body: JSON, *, attempts: int | None = None) -> JSON | None:
        self._check()
        name = body["metadata"]["name"]
        if name in self.stored:
            return None
        return self._store(name, body)

    async def replace(self, kind: Kind, namespace: str, name: str, body: JSON) -> JSON | None:
        self._check()
        current = self.stored.get(name)
        if current is None or current["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion"):
            return None
        return self._store(name, body)

    def _store(self, name: str, body: JSON) -> JSON:
        self.version += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(self.version)
        self.stored[name] = obj
        return copy.deepcopy(obj)


def election(identity: str, namespace: str = "specserve-system") -> LeaderElection:
    return LeaderElection(
        namespace=namespace, identity=identity, lease_seconds=15, renew_deadline_seconds=10, retry_seconds=2
    )


async def test_the_first_elector_creates_the_lease_and_leads() -> None:
    leases, clock = MemoryLeases(), Clock()
    a = LeaseElector(leases, election("pod-a"), clock)
    assert await a.try_acquire_or_renew()
    spec = leases.stored["specserve-operator"]["spec"]
    assert spec["holderIdentity"] == "pod-a" and spec["leaseDurationSeconds"] == 15
    assert spec["leaseTransitions"] == 0 and spec["renewTime"].endswith("Z")
    assert a.leading


async def test_a_standby_waits_while_the_leader_renews() -> None:
    leases, clock = MemoryLeases(), Clock()
    a = LeaseElector(leases, election("pod-a"), clock)
    b = LeaseElector(leases, election("pod-b"), clock)
    assert await a.try_acquire_or_renew()
    for _ in range(20):  # 100 s of renewals every 5 s: the lease never looks expired to b
        assert not await b.try_acquire_or_renew()
        clock.now += 5
        assert await a.try_acquire_or_renew()
    assert b.holder == "pod-a" and not b.leading
    assert leases.stored["specserve-operator"]["spec"]["holderIdentity"] == "pod-a"


async def test_a_standby_takes_over_only_after_a_whole_lease_without_renewal() -> None:
    leases, clock = MemoryLeases(), Clock()
    a = LeaseElector(leases, election("pod-a"), clock)
    b = LeaseElector(leases, election("pod-b"), clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # b first sees a's renewal now
    clock.now += 14.9
    assert not await b.try_acquire_or_renew()
    clock.now += 0.2
    assert await b.try_acquire_or_renew()
    spec = leases.stored["specserve-operator"]["spec"]
    assert spec["holderIdentity"] == "pod-b" and spec["leaseTransitions"] == 1
    assert not await a.try_acquire_or_renew()  # the old leader sees the new holder and does not take it back
    assert a.holder == "pod-b" and not a.leading


async def test_of_two_standbys_taking_over_together_exactly_one_wins() -> None:
    leases, clock = MemoryLeases(), Clock()
    a = LeaseElector(leases, election("pod-a"), clock)
    assert await a.try_acquire_or_renew()
    b = LeaseElector(leases, election("pod-b"), clock)
    c = LeaseElector(leases, election("pod-c"), clock)
    assert not await b.try_acquire_or_renew() and not await c.try_acquire_or_renew()
    clock.now += 16
    results = await asyncio.gather(b.try_acquire_or_renew(), c.try_acquire_or_renew())
    assert sorted(results) == [False, True]
    holder = leases.stored["specserve-operator"]["spec"]["holderIdentity"]
    assert holder == ("pod-b" if results[0] else "pod-c")


async def test_a_released_lease_is_taken_at_once() -> None:
    leases, clock = MemoryLeases(), Clock()
    a = LeaseElector(leases, election("pod-a"), clock)
    b = LeaseElector(leases, election("pod-b"), clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert leases.stored["specserve-operator"]["spec"]["holderIdentity"] == ""
    assert await b.try_acquire_or_renew()  # no waiting for the expiry
    assert not a.leading


async def test_api_errors_count_as_not_holding() -> None:
    leases, clock = MemoryLeases(failing=True), Clock()
    a = LeaseElector(leases, election("pod-a"), clock)
    assert not await a.try_acquire_or_renew()
    assert not a.leading


async def test_hold_returns_when_renewals_fail_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    leases, clock = MemoryLeases(), Clock()
    a = LeaseElector(leases, election("pod-a"), clock)
    assert await a.try_acquire_or_renew()

    async def tick(seconds: float) -> None:  # time passes only when the elector sleeps
        clock.now += seconds

    monkeypatch.setattr("specserve.kube.lease._sleep", tick)
    leases.failing = True
    await asyncio.wait_for(a.hold(), timeout=5)
    assert clock.now - 1000.0 >= 10  # gave up at the renew deadline, not before
    assert clock.now - 1000.0 < 15  # and before the lease could expire for a standby


async def test_hold_returns_at_once_when_another_replica_holds_the_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    leases, clock = MemoryLeases(), Clock()
    a = LeaseElector(leases, election("pod-a"), clock)
    assert await a.try_acquire_or_renew()
    leases.stored["specserve-operator"]["spec"]["holderIdentity"] = "pod-z"  # e.g. an admin handed it over

    async def tick(seconds: float) -> None:
        clock.now += seconds

    monkeypatch.setattr("specserve.kube.lease._sleep", tick)
    await asyncio.wait_for(a.hold(), timeout=5)
    assert a.holder == "pod-z"


# Over HTTP, against the fake API server: the real client, PUT with resourceVersion, 409 on a lost race.


@pytest.fixture()
async def fake() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as api:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "specserve-system"}})
        yield api


def http_client(url: str) -> KubeClient:
    configuration = k8s.Configuration()
    configuration.host = url
    return KubeClient(configuration, ClientOptions(request_timeout=5, attempts=2, backoff_base=0.01))


async def test_two_electors_over_http_one_leads_and_the_other_takes_over_after_expiry(fake: FakeApiServer) -> None:
    clock = Clock()
    kube_a, kube_b = http_client(fake.url), http_client(fake.url)
    a = LeaseElector(kube_a, election("pod-a"), clock)
    b = LeaseElector(kube_b, election("pod-b"), clock)
    try:
        results = await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew())
        assert sorted(results) == [False, True]  # both saw no lease and created it: one POST got a 409
        leader, standby = (a, b) if results[0] else (b, a)
        stored = fake.get(LEASES, "specserve-system", "specserve-operator")
        assert stored is not None and stored["spec"]["holderIdentity"] == leader.identity
        clock.now += 10
        assert await leader.try_acquire_or_renew() and not await standby.try_acquire_or_renew()
        clock.now += 16  # the leader stops renewing (it died)
        assert await standby.try_acquire_or_renew()
        stored = fake.get(LEASES, "specserve-system", "specserve-operator")
        assert stored is not None and stored["spec"]["holderIdentity"] == standby.identity
        assert stored["spec"]["leaseTransitions"] == 1
        assert not await leader.try_acquire_or_renew()
    finally:
        await kube_a.close()
        await kube_b.close()


async def test_a_stale_put_is_refused_by_resource_version(fake: FakeApiServer) -> None:
    kube = http_client(fake.url)
    try:
        a = LeaseElector(kube, election("pod-a"), Clock())
        assert await a.try_acquire_or_renew()
        lease = await kube.get(LEASE, "specserve-system", "specserve-operator")
        assert lease is not None
        assert await a.try_acquire_or_renew()  # bumps the resourceVersion
        lease["spec"]["holderIdentity"] = "intruder"
        assert await kube.replace(LEASE, "specserve-system", "specserve-operator", lease) is None  # 409
    finally:
        await kube.close()


async def test_leading_lapses_at_the_renew_deadline_without_waiting_for_hold() -> None:
    leases, clock = MemoryLeases(), Clock()
    a = LeaseElector(leases, election("pod-a"), clock)
    assert await a.try_acquire_or_renew()
    clock.now += 9.9
    assert a.leading
    clock.now += 0.1  # 10 s (the renew deadline) since the last renewal, 5 s before a standby may take over
    assert not a.leading


async def test_a_fenced_client_sends_no_write_and_the_lease_client_still_does(fake: FakeApiServer) -> None:
    kube = http_client(fake.url)
    lease_kube = kube.sibling()
    clock = Clock()
    elector = LeaseElector(lease_kube, election("pod-a"), clock)
    kube.fence(lambda: elector.leading)
    event = {"metadata": {"name": "x", "namespace": "specserve-system"}, "kind": "Pod", "apiVersion": "v1"}
    try:
        assert await elector.try_acquire_or_renew()
        await kube.post_event(event, reason="Leading", message="as leader")  # sent
        clock.now += 10  # the lease lapsed (no renewal for the renew deadline)
        start = len(fake.requests)
        with pytest.raises(FencedError):
            await kube.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "llm"}})
        with pytest.raises(FencedError):
            await kube.delete(LEASE, "specserve-system", "specserve-operator")
        await kube.post_event(event, reason="Late", message="fenced")  # events are best-effort: logged, not raised
        assert await kube.get(LEASE, "specserve-system", "specserve-operator") is not None  # reads still go out
        assert fake.writes_since(start) == []
        assert await elector.try_acquire_or_renew()  # the Lease's own client is not fenced: it can win it back
        assert fake.writes_since(start) != []
    finally:
        await kube.close()
        await lease_kube.close()

"""Without leader election, the Lease finds a second operator (PresenceGuard): it refuses to act while another
holds the Lease, loudly and once per holder; a Lease it cannot read is no conflict (unknown holds what runs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specserve.api import reasons
from specserve.kube.lease import LeaseElector, PresenceGuard
from tests.unit.test_lease import Clock, MemoryLeases, election

JSON = dict[str, Any]


@dataclass
class Events:
    posted: list[tuple[str, str, str]] = field(default_factory=list)

    async def post_event(self, involved: JSON, *, reason: str, message: str, type_: str = "Normal") -> None:
        self.posted.append((type_, reason, message))


def guard(leases: MemoryLeases, identity: str, clock: Clock, events: Events, seen: list[bool]) -> PresenceGuard:
    return PresenceGuard(LeaseElector(leases, election(identity), clock), events, lambda c, _: seen.append(c))


async def test_the_second_operator_refuses_to_act_until_the_first_is_gone() -> None:
    leases, clock, events = MemoryLeases(), Clock(), Events()
    seen: list[bool] = []
    a = guard(leases, "pod-a", clock, events, [])
    b = guard(leases, "pod-b", clock, events, seen)
    assert not await a.check()  # the first takes the Lease and acts
    assert await b.check() and b.other == "pod-a"
    assert await b.check()  # still held: reported once
    assert [(t, r) for t, r, _ in events.posted] == [("Warning", reasons.OPERATOR_CONFLICT)]
    assert "pod-b refuses to act" in events.posted[0][2] and seen == [True]
    clock.now += 10
    assert not await a.check()  # a renews: b still waits, whatever the time
    clock.now += 10
    assert await b.check()
    assert not await a.check()
    await a.release()  # a stops cleanly
    assert not await b.check() and seen == [True, False]  # b takes over and acts


async def test_a_lease_that_cannot_be_read_is_no_conflict() -> None:
    leases, clock, events = MemoryLeases(failing=True), Clock(), Events()
    seen: list[bool] = []
    b = guard(leases, "pod-b", clock, events, seen)
    assert not await b.check()  # acts (a warning in the log), never stops serving for the Lease API's sake
    assert events.posted == [] and seen == []

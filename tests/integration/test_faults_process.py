"""The operator process under faults (issue 14, "the operator itself"): the real operator against kubefake."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specserve.commands.run import LeadershipLostError
from specserve.kubefake import DEPLOYMENTS, LEASES
from tests.integration.kube_emulator import eventually, running_operator
from tests.integration.test_ha import NS, ThreadedFake, converged, lease_config, seeded, threaded_fake

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

"""The loop's status write against the fake API server's server-side apply: it applies only its own fields under
its own field manager, so its fields and the reconcile's survive each other's writes, and it writes nothing when
its fields already hold what it means them to."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from specserve.api.validation import parse_object
from specserve.kube.client import KubeClient
from specserve.kube.kinds import SPECSERVE
from specserve.metrics.signal import Reading
from specserve.policy.knobs import knobs_from_spec
from specserve.policy.switching import decide
from specserve.policy.types import PoolSignal, Sample
from specserve.status import SWITCHING_LOOP
from specserve.switching.evaluate import Evaluation, evaluate
from specserve.switching.record import Source
from specserve_kubefake import SPECSERVES, FakeApiServer

NS, NAME = "llm", "kimi-k25"
JSON = dict[str, Any]


@pytest.fixture()
async def fake(kimi_doc: dict[str, Any]) -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as api:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        body = copy.deepcopy(kimi_doc)
        body["metadata"] = {"name": NAME, "namespace": NS}
        api.create(body)
        yield api


def reading(demand: float, now: float) -> Reading:
    pool = PoolSignal(ready_replicas=1, running=demand, queued=0.0)
    return Reading(Sample(now, demand, speculative=pool, baseline=PoolSignal(1, 0.0, 0.0)))


async def loop_round(kube: KubeClient, fake: FakeApiServer, demand: float, now: float) -> Evaluation:
    body = fake.get(SPECSERVES, NS, NAME)
    assert body is not None
    obj = parse_object(body)
    inputs = (decide, knobs_from_spec(obj), None)
    return await evaluate(kube, body, obj, inputs, reading(demand, now), (), Source("test"), None, now)


async def reconcile_writes(kube: KubeClient, ready: str) -> None:
    """The reconcile's own apply (manager `specserve`): its fields only, never the loop's."""
    status = {
        "activeMode": "Baseline",
        "weights": {"speculative": 0, "baseline": 100},
        "conditions": [{"type": "Ready", "status": ready, "reason": "R", "message": "m",
                        "lastTransitionTime": "2026-12-01T00:00:00Z"}],
    }  # fmt: skip
    await kube.apply_status(SPECSERVE, NS, NAME, status, "specserve")


def managers(obj: JSON) -> dict[str, JSON]:
    return {
        m["manager"]: m.get("fieldsV1", {})
        for m in obj["metadata"].get("managedFields", [])
        if m.get("subresource") == "status"
    }


def conditions(obj: JSON) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj["status"].get("conditions", [])}


async def test_the_loop_and_the_reconcile_each_keep_their_own_status_fields(
    kube: KubeClient, fake: FakeApiServer
) -> None:
    await reconcile_writes(kube, "True")
    first = await loop_round(kube, fake, 7.0, 1000.0)
    assert first.written and first.server is not None
    stored = fake.get(SPECSERVES, NS, NAME)
    assert stored is not None
    assert stored["status"]["switching"]["mode"] == "Baseline" and stored["status"]["load"]["concurrency"] == 7.0
    assert stored["status"]["activeMode"] == "Baseline"  # the reconcile's field untouched
    assert conditions(stored) == {"Ready": "True", "MetricsAvailable": "True", "Switching": "False"}
    owned = managers(stored)
    mine = owned[SWITCHING_LOOP.manager]["f:status"]
    assert {f"f:{k}" for k in ("switching", "load")} <= set(mine) and "f:activeMode" not in mine
    assert "f:switching" not in owned["specserve"]["f:status"]
    # The reconcile writes again (a body without the loop's fields): the loop's fields stay.
    await reconcile_writes(kube, "False")
    stored = fake.get(SPECSERVES, NS, NAME)
    assert stored is not None
    assert stored["status"]["load"]["concurrency"] == 7.0 and "switching" in stored["status"]
    assert conditions(stored) == {"Ready": "False", "MetricsAvailable": "True", "Switching": "False"}
    # The loop writes again (demand moved materially, the snapshot 30 s old): the reconcile's Ready=False and
    # activeMode stay.
    again = await loop_round(kube, fake, 30.0, 1030.0)
    assert again.written
    stored = fake.get(SPECSERVES, NS, NAME)
    assert stored is not None
    assert stored["status"]["load"]["concurrency"] == 30.0
    assert stored["status"]["activeMode"] == "Baseline"
    assert conditions(stored) == {"Ready": "False", "MetricsAvailable": "True", "Switching": "False"}


async def test_nothing_is_written_when_the_live_fields_already_hold_the_intent(
    kube: KubeClient, fake: FakeApiServer
) -> None:
    await reconcile_writes(kube, "True")  # the route realises the initial weights
    await loop_round(kube, fake, 7.0, 1000.0)
    writes = len(fake.requests)
    same = await loop_round(kube, fake, 7.2, 1005.0)  # demand barely moved: nothing worth a write
    assert not same.written and len(fake.requests) == writes
    assert set(SWITCHING_LOOP.fields) >= {"switching", "load", "lastDecision", "history"}


async def test_the_order_the_server_keeps_the_conditions_in_is_no_reason_to_write(
    kube: KubeClient, fake: FakeApiServer
) -> None:
    """The conditions are a list map: the server may keep them in any order (another manager's apply reorders
    them). The loop compares by type, as the reconcile does, so a steady state still writes nothing."""
    await reconcile_writes(kube, "True")  # the route realises the initial weights
    await loop_round(kube, fake, 7.0, 1000.0)
    stored = fake.get(SPECSERVES, NS, NAME)
    assert stored is not None
    shuffled = list(reversed(stored["status"]["conditions"]))
    assert [c["type"] for c in shuffled] == ["Switching", "MetricsAvailable", "Ready"]
    fake.patch_status(SPECSERVES, NS, NAME, {"conditions": shuffled})
    writes = len(fake.requests)
    same = await loop_round(kube, fake, 7.2, 1005.0)
    assert not same.written and len(fake.requests) == writes

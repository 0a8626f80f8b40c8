"""The resync loop: every tracked SpecServe reconciled once a round, failures isolated, stopped by its flag."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from specserve.api.models import Condition, SpecServeStatus
from specserve.kube.client import KubeError
from specserve.kube.kinds import OWNED_KINDS, Kind
from specserve.layout import LABEL_INSTANCE
from specserve.objects import Objects, ObjectState
from specserve.reconcile import Outcome
from specserve.resync import ResyncProbe, fingerprints, phase, resync_forever, resync_round


def registry(*names: str) -> Objects:
    out = Objects()
    for name in names:
        out.observe({"metadata": {"namespace": "llm", "name": name}})
    return out


def name_of(item: ObjectState) -> str:
    return str(item.body["metadata"]["name"])


def test_a_round_reconciles_every_tracked_specserve_and_one_failure_spares_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[str] = []

    async def reconcile(item: ObjectState) -> None:
        if name_of(item) == "b":
            raise KubeError(500, "GET /api/v1/namespaces/llm/services: HTTP 500: etcd timeout")
        if name_of(item) == "c":
            raise ZeroDivisionError("a bug")
        done.append(name_of(item))

    with caplog.at_level(logging.WARNING, logger="specserve.resync"):
        failed = asyncio.run(resync_round(registry("a", "b", "c", "d"), reconcile))
    assert failed == 2 and sorted(done) == ["a", "d"]
    by_name = {r.getMessage().split(" ")[2]: r for r in caplog.records}
    assert "HTTP 500: etcd timeout" in by_name["llm/b"].getMessage() and by_name["llm/b"].exc_info is None
    assert by_name["llm/c"].exc_info is not None  # a bug keeps its traceback


def test_a_specserve_forgotten_before_the_round_is_not_reconciled() -> None:
    tracked = registry("a", "gone")
    tracked.forget("llm/gone")
    done: list[str] = []

    async def reconcile(item: ObjectState) -> None:
        done.append(name_of(item))

    asyncio.run(resync_round(tracked, reconcile))
    assert done == ["a"]


def test_rounds_come_every_interval_not_at_the_start_and_stop_with_the_flag() -> None:
    rounds: list[float] = []

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        started = loop.time()

        async def reconcile(_: ObjectState) -> None:
            rounds.append(loop.time() - started)
            if len(rounds) == 3:
                stop.set()

        await asyncio.wait_for(resync_forever(registry("a"), reconcile, 0.05, stop), timeout=5)

    asyncio.run(main())
    assert len(rounds) == 3
    assert rounds[0] >= 0.05  # the start-up reconciled everything already: the first round waits an interval


def test_a_stop_during_the_wait_ends_the_loop_without_another_round() -> None:
    called: list[ObjectState] = []

    async def reconcile(item: ObjectState) -> None:
        called.append(item)

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(resync_forever(registry("a"), reconcile, 3600, stop))
        await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, timeout=5)

    asyncio.run(main())
    assert called == []


def test_a_spread_round_reconciles_in_phase_order_and_each_phase_is_stable_within_the_interval() -> None:
    names = [f"s{i}" for i in range(20)]
    tracked = registry(*names)
    order: list[str] = []

    async def reconcile(item: ObjectState) -> None:
        order.append(name_of(item))

    asyncio.run(resync_round(tracked, reconcile, spread=0.2))
    phases = {name_of(i): phase(i, 0.2) for i in tracked}
    assert sorted(order) == sorted(names)
    assert order == sorted(names, key=phases.__getitem__)  # spread over the interval, not one burst
    assert all(0 <= p < 0.2 for p in phases.values())
    assert len(set(phases.values())) > 1
    assert phases == {name_of(i): phase(i, 0.2) for i in registry(*names)}  # stable


def test_a_stop_mid_round_launches_no_more_reconciles() -> None:
    tracked = registry(*(f"s{i}" for i in range(50)))
    done: list[str] = []

    async def main() -> None:
        stop = asyncio.Event()

        async def reconcile(item: ObjectState) -> None:
            done.append(name_of(item))
            if len(done) == 3:
                stop.set()

        await asyncio.wait_for(resync_round(tracked, reconcile, spread=0.5, stop=stop), timeout=5)

    asyncio.run(main())
    assert len(done) == 3


def labelled(name: str, instance: str, rv: str, namespace: str = "llm") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": {LABEL_INSTANCE: instance},
                         "resourceVersion": rv, "ownerReferences": [{"uid": f"uid-{instance}"}]}}  # fmt: skip


def test_fingerprints_change_with_any_owned_object_and_only_for_its_instance() -> None:
    before = fingerprints(
        [("Deployment", labelled("a-base", "a", "1")), ("Service", labelled("b", "b", "2"))], LABEL_INSTANCE
    )
    after = fingerprints(
        [("Deployment", labelled("a-base", "a", "9")), ("Service", labelled("b", "b", "2"))], LABEL_INSTANCE
    )
    assert before[("llm", "b")] == after[("llm", "b")]
    assert before[("llm", "a")] != after[("llm", "a")]
    gone = fingerprints([("Service", labelled("b", "b", "2"))], LABEL_INSTANCE)
    assert ("llm", "a") not in gone


class Lister:
    def __init__(self) -> None:
        self.objects: list[tuple[str, dict[str, Any]]] = []
        self.calls = 0

    async def list_labelled(self, kind: Kind, namespace: str | None, label: str | None) -> list[dict[str, Any]]:
        self.calls += 1
        return [o for k, o in self.objects if k == kind.kind and o["metadata"]["namespace"] == namespace]


def clean_outcome(written: bool = False) -> Outcome:
    conds = [Condition(type=t, status=s, reason="X", last_transition_time="2026-01-01T00:00:00Z")
             for t, s in (("Ready", "True"), ("Progressing", "False"), ("Degraded", "False"))]  # fmt: skip
    return Outcome(status=SpecServeStatus(conditions=conds), status_written=written)


def test_a_clean_unchanged_specserve_is_skipped_but_not_forever_and_any_change_ends_the_skip() -> None:
    tracked = registry("a", "b")
    for item in tracked:
        item.body["metadata"]["resourceVersion"] = "5"
    kube = Lister()
    kube.objects = [("Deployment", labelled("a-base", "a", "1")), ("Deployment", labelled("b-base", "b", "1"))]
    probe = ResyncProbe(tracked, kube, full_every=3)
    a = tracked.named(("llm", "a"))
    assert a is not None

    async def rounds() -> list[bool]:
        skipped = []
        await probe.read()
        assert kube.calls == len(OWNED_KINDS)  # one LIST per kind for the namespace, not per SpecServe
        skipped.append(probe.unchanged(a))  # nothing known yet: reconciled
        probe.reconciled(a, clean_outcome())
        for _ in range(3):
            await probe.read()
            skipped.append(probe.unchanged(a))
            if not skipped[-1]:
                probe.reconciled(a, clean_outcome())
        kube.objects[0] = ("Deployment", labelled("a-base", "a", "2"))  # someone changed a's pool
        await probe.read()
        skipped.append(probe.unchanged(a))
        probe.reconciled(a, clean_outcome(written=True))  # that reconcile repaired it: not clean
        await probe.read()
        skipped.append(probe.unchanged(a))
        return skipped

    assert asyncio.run(rounds()) == [False, True, True, False, False, False]

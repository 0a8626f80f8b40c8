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
from specserve.resync import ResyncProbe, behind, catch_up, fingerprints, phase, resync_forever, resync_round


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


# ------------------------------------------------------------------------------- what the watch did not deliver


def served(name: str, generation: int, rv: int, mem: float = 0.8, namespace: str = "llm") -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}", "generation": generation,
                         "resourceVersion": str(rv)}, "spec": {"engine": {"memFractionStatic": mem}}}  # fmt: skip


class SpecServeLister:
    """A LIST of SpecServes as the API server answers it: without apiVersion and kind."""

    def __init__(self, *items: dict[str, Any], error: KubeError | None = None) -> None:
        self.items, self.error = list(items), error
        self.calls: list[tuple[str, str | None, str | None]] = []

    async def list_labelled(self, kind: Kind, namespace: str | None, label: str | None) -> list[dict[str, Any]]:
        self.calls.append((kind.kind, namespace, label))
        if self.error is not None:
            raise self.error
        return [i for i in self.items if namespace is None or i["metadata"]["namespace"] == namespace]


def test_behind_is_a_newer_generation_not_a_status_write_nor_an_older_version() -> None:
    held = served("a", 3, 100)
    assert behind(held, served("a", 4, 120))
    assert not behind(held, served("a", 3, 120))  # a status write: the watch's usual lag, no sign
    assert not behind(held, served("a", 4, 90))  # older than what is held: never taken
    assert not behind(held, served("a", 2, 130))


def test_a_spec_change_the_watch_never_delivered_is_taken_from_the_list_and_the_round_reconciles_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The watch delivered generation 1 of `a` and then nothing (its stream open, bookmarks only); the API server
    has generation 2. The round's LIST catches it up: the reconcile sees the new spec, from a body that names its
    kind (owner references are built from it). `b` only had a status write since; `c` is not held (no state made
    from a LIST: the watch's ADDED, and kopf's create handler, own that)."""
    tracked = Objects()
    for body in (served("a", 1, 10), served("b", 5, 11)):
        tracked.observe(body)
    kube = SpecServeLister(served("a", 2, 30, mem=0.76), served("b", 5, 31), served("c", 1, 32))

    async def round_() -> tuple[list[ObjectState], dict[str, float]]:
        caught = await catch_up(tracked, kube, ())
        seen: dict[str, float] = {}

        async def reconcile(item: ObjectState) -> None:
            seen[name_of(item)] = item.body["spec"]["engine"]["memFractionStatic"]

        await resync_round(tracked, reconcile)
        return caught, seen

    with caplog.at_level(logging.WARNING):
        caught, seen = asyncio.run(round_())
    assert [s.key for s in caught] == [("llm", "a")]
    assert seen == {"a": 0.76, "b": 0.8}
    a = tracked.named(("llm", "a"))
    assert a is not None and a.body["kind"] == "SpecServe" and a.body["apiVersion"] == "specserve.io/v1alpha1"
    b = tracked.named(("llm", "b"))
    assert b is not None and b.body["metadata"]["resourceVersion"] == "11"
    assert tracked.named(("llm", "c")) is None
    assert kube.calls == [("SpecServe", None, None)]  # one LIST, every namespace
    assert "the watch has not delivered llm/a generation 2 (it holds 1)" in caplog.text
    # The next round finds nothing more to catch up.
    assert asyncio.run(catch_up(tracked, kube, ())) == []


def test_the_list_goes_to_each_watched_namespace_and_a_failed_list_spares_the_round(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tracked = Objects()
    tracked.observe(served("a", 1, 10, namespace="one"))
    kube = SpecServeLister(served("a", 2, 20, namespace="one"), served("z", 1, 21, namespace="other"))
    assert [s.key for s in asyncio.run(catch_up(tracked, kube, ("one", "two")))] == [("one", "a")]
    assert kube.calls == [("SpecServe", "one", None), ("SpecServe", "two", None)]
    failing = SpecServeLister(error=KubeError(503, "GET specserves: etcdserver: request timed out"))
    with caplog.at_level(logging.WARNING):
        assert asyncio.run(catch_up(tracked, failing, ())) == []
    assert "could not list SpecServes to check the watch" in caplog.text

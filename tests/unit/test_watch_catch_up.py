"""The resync's check of the watch, wired: a spec change the SpecServe watch never delivered (its stream open,
bookmarks only, as after the etcd outage in tests/cluster/test_faults_real.py) is reconciled by the next resync
round from the LIST's body, and counted on specserve_watch_stale_total."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from specserve import telemetry
from specserve.config import OperatorConfig
from specserve.dispatch import KUBE, Dispatcher, lanes, loops
from specserve.kube.kinds import Kind
from specserve.reconcile import Outcome


def served(generation: int, rv: int, mem: float) -> dict[str, Any]:
    return {"apiVersion": "specserve.io/v1alpha1", "kind": "SpecServe",
            "metadata": {"namespace": "llm", "name": "llama", "uid": "uid-llama", "generation": generation,
                         "resourceVersion": str(rv)},
            "spec": {"engine": {"memFractionStatic": mem}}}  # fmt: skip


class Kube:
    """The API server's side: the SpecServe at generation 2 (a LIST returns it without kind and apiVersion)."""

    def __init__(self) -> None:
        listed = served(2, 40, 0.76)
        del listed["kind"], listed["apiVersion"]
        self.listed = [listed]

    async def list_labelled(self, kind: Kind, namespace: str | None, label: str | None) -> list[dict[str, Any]]:
        return self.listed if kind.kind == "SpecServe" else []

    def lane(self) -> Kube:
        return self

    async def close(self) -> None:
        pass


class Idle:
    """The switching loop, not under test."""

    def __init__(self, *args: object) -> None:
        pass

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


def stale(namespace: str, name: str) -> float:
    for metric in telemetry._OBJECTS.collect():
        for sample in metric.samples:
            if sample.name == "specserve_watch_stale_total" and sample.labels == {"namespace": namespace, "name": name}:
                return float(sample.value)
    return 0.0


def test_a_spec_change_the_watch_never_delivered_is_reconciled_by_the_next_resync_round_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ops = Dispatcher(OperatorConfig(resync_seconds=0.05, full_resync_every=1))
    ops.track({"type": "ADDED"}, served(1, 10, 0.8))  # type: ignore[arg-type,typeddict-item]  # the watch's last delivery
    reconciled: list[tuple[str, float]] = []

    async def reconcile(kube: object, body: dict[str, Any], **_: object) -> Outcome:
        reconciled.append((body["kind"], body["spec"]["engine"]["memFractionStatic"]))
        return Outcome()

    monkeypatch.setattr(lanes, "reconcile", reconcile)
    monkeypatch.setattr(loops, "SwitchingLoop", Idle)
    before = stale("llm", "llama")

    async def main() -> None:
        await ops.start({KUBE: Kube()})  # type: ignore[arg-type]
        try:
            for _ in range(200):
                if ("SpecServe", 0.76) in reconciled:
                    return
                await asyncio.sleep(0.05)
        finally:
            await ops.stop()

    asyncio.run(main())
    assert ("SpecServe", 0.76) in reconciled, reconciled
    assert stale("llm", "llama") - before == 1
    state = ops.objects.named(("llm", "llama"))
    assert state is not None and state.body["metadata"]["generation"] == 2

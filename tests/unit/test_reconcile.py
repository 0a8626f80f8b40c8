"""One reconcile against an in-memory API: what is applied, what is left alone, what is written to status."""

from __future__ import annotations

import copy
from typing import Any

from specserve.kube.client import KubeError
from specserve.kube.kinds import SPECSERVE, Kind
from specserve.reconcile import reconcile
from tests.unit.test_api import MINIMAL, with_

JSON = dict[str, Any]


class FakeKube:
    """Stores what is applied (as a real server would after SSA) and records every write."""

    def __init__(self, fail_apply: bool = False) -> None:
        self.objects: dict[tuple[str, str], JSON] = {}
        self.writes: list[tuple[str, str]] = []
        self.status: JSON | None = None
        self.fail_apply = fail_apply

    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        return copy.deepcopy(self.objects.get((kind.kind, name)))

    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]:
        return [copy.deepcopy(o) for (k, _), o in self.objects.items() if k == kind.kind]

    async def apply(self, manifest: JSON) -> JSON:
        if self.fail_apply:
            raise KubeError(403, "forbidden")
        self.writes.append(("apply", f"{manifest['kind']}/{manifest['metadata']['name']}"))
        self.objects[(manifest["kind"], manifest["metadata"]["name"])] = copy.deepcopy(manifest)
        return manifest

    async def delete(self, kind: Kind, namespace: str, name: str) -> None:
        self.writes.append(("delete", f"{kind.kind}/{name}"))
        del self.objects[(kind.kind, name)]

    async def patch_status(self, kind: Kind, namespace: str, name: str, status_body: JSON) -> None:
        assert kind == SPECSERVE
        self.writes.append(("status", name))
        self.status = status_body


def body(spec: JSON, generation: int = 1, status: JSON | None = None) -> JSON:
    return {
        "apiVersion": "specserve.io/v1alpha1",
        "kind": "SpecServe",
        "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": generation},
        "spec": spec,
        "status": status or {},
    }


async def test_first_reconcile_applies_everything_then_nothing() -> None:
    kube = FakeKube()
    first = await reconcile(kube, body(MINIMAL))
    assert set(first.applied) == {
        "Deployment/m-spec",
        "Deployment/m-base",
        "Service/m-spec",
        "Service/m-base",
        "HTTPRoute/m",
    }
    assert first.status_written
    kube.writes.clear()
    second = await reconcile(kube, body(MINIMAL, status=kube.status))
    assert second.applied == () and not second.status_written
    assert kube.writes == []


async def test_apply_bodies_are_complete_objects_with_owner() -> None:
    kube = FakeKube()
    await reconcile(kube, body(MINIMAL))
    for manifest in kube.objects.values():
        assert {"apiVersion", "kind", "metadata", "spec"} <= manifest.keys()
        assert manifest["metadata"]["ownerReferences"][0]["uid"] == "u1"
        assert "status" not in manifest  # never apply status: other controllers own it


async def test_invalid_spec_changes_no_children() -> None:
    kube = FakeKube()
    await reconcile(kube, body(MINIMAL))
    kube.writes.clear()
    outcome = await reconcile(
        kube, body(with_({"placement.gpusPerPod": 3, "engine.tensorParallelSize": 2}), 2, status=kube.status)
    )
    assert outcome.invalid and "spec.placement.gpusPerPod" in outcome.invalid
    assert outcome.newly_invalid
    assert kube.writes == [("status", "m")]
    again = await reconcile(
        kube, body(with_({"placement.gpusPerPod": 3, "engine.tensorParallelSize": 2}), 2, status=kube.status)
    )
    assert not again.newly_invalid  # one warning event per rejection, not one per resync


async def test_strategy_change_prunes_only_owned_objects() -> None:
    kube = FakeKube()
    await reconcile(kube, body(MINIMAL))
    foreign = {
        "kind": "Deployment",
        "metadata": {
            "name": "someone-else",
            "labels": {"specserve.io/instance": "m"},
            "ownerReferences": [{"uid": "other"}],
        },
    }
    kube.objects[("Deployment", "someone-else")] = foreign
    outcome = await reconcile(kube, body(with_({"strategy": "Restart"}), 2, status=kube.status))
    assert set(outcome.pruned) == {"Deployment/m-spec", "Deployment/m-base", "Service/m-spec", "Service/m-base"}
    assert ("Deployment", "someone-else") in kube.objects


async def test_api_failures_are_reported_not_raised() -> None:
    kube = FakeKube(fail_apply=True)
    outcome = await reconcile(kube, body(MINIMAL))
    assert outcome.status_written
    assert kube.status is not None
    degraded = next(c for c in kube.status["conditions"] if c["type"] == "Degraded")
    assert degraded["status"] == "True" and "forbidden" in degraded["message"]


async def test_unreadable_status_is_rebuilt() -> None:
    kube = FakeKube()
    outcome = await reconcile(kube, body(MINIMAL, status={"conditions": "garbage"}))
    assert outcome.status_written and kube.status is not None
    assert kube.status["activeMode"] == "Speculative"


async def test_without_decisions_the_mode_follows_initial_mode() -> None:
    kube = FakeKube()
    await reconcile(kube, body(MINIMAL))
    assert kube.status is not None and kube.status["activeMode"] == "Speculative"
    await reconcile(kube, body(with_({"switching.initialMode": "Baseline"}), 2, status=kube.status))
    assert kube.status["activeMode"] == "Baseline"
    route = kube.objects[("HTTPRoute", "m")]
    assert [b["weight"] for b in route["spec"]["rules"][0]["backendRefs"]] == [0, 100]


async def test_an_applied_decision_wins_over_initial_mode() -> None:
    kube = FakeKube()
    decision = {"time": "2026-01-01T00:00:00Z", "toMode": "Baseline", "reason": "load above crossover"}
    await reconcile(kube, body(MINIMAL, status={"lastDecision": decision}))
    assert kube.status is not None and kube.status["activeMode"] == "Baseline"


async def test_a_stale_object_does_not_make_us_write_our_status_again() -> None:
    kube = FakeKube()
    first = await reconcile(kube, body(MINIMAL))
    assert first.write is not None
    stale = body(with_({"placement.gpusPerPod": 3, "engine.tensorParallelSize": 2}), 2, status=kube.status)
    rejected = await reconcile(kube, stale, last_write=first.write)
    assert rejected.newly_invalid and rejected.write is not None
    kube.writes.clear()
    # The watch has not delivered our Degraded status yet: the object still carries the older one.
    again = await reconcile(kube, stale, last_write=rejected.write, now=lambda: "2099-01-01T00:00:00Z")
    assert kube.writes == [] and not again.newly_invalid


async def test_someone_elses_status_edit_is_repaired() -> None:
    kube = FakeKube()
    first = await reconcile(kube, body(MINIMAL))
    assert kube.status is not None
    tampered = {**kube.status, "activeMode": "Baseline"}
    again = await reconcile(kube, body(MINIMAL, status=tampered), last_write=first.write)
    assert again.status_written and kube.status["activeMode"] == "Speculative"

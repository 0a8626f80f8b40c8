"""Reconcile passes with things going wrong: refused applies never hold traffic on a pool that cannot serve, a
conflicting pool never counts as ready, and the route never loses its last Ready backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from specserve.kube.client import KubeError
from specserve.layout import HANDOVER_MANAGER
from specserve.reconcile.apply import handover, owns_replicas
from specserve.reconcile.traffic import gateway_pending, keep_serving, moves_off_dead, servable, with_live_backends
from tests.unit.fakekube import FakeKube
from tests.unit.test_api import with_
from tests.unit.test_reconcile import cond, run, serving

REFUSED = KubeError(422, 'admission webhook "policy.example" denied the request: image not allowed')


async def test_a_refused_deployment_does_not_hold_the_failover() -> None:
    kube = FakeKube()
    await serving(kube)
    assert kube.route_weights() == {"m-spec": 100, "m-base": 0}
    change = with_({"engine.memFractionStatic": 0.8})
    for name in ("m-spec", "m-base"):
        kube.fail[("apply", f"Deployment/{name}")] = REFUSED  # persistent, as an admission policy is
    first = await run(kube, change, 2)
    assert ("ApplyFailed", f"Deployment/m-base: {REFUSED}") in first.warnings
    assert "Deployment/m-base" in cond(kube, "Degraded")["message"]
    assert "image not allowed" in cond(kube, "Degraded")["message"]

    kube.ready("m-spec", 0)  # the pool holding all the traffic loses its Ready pod
    kube.writes.clear()
    second = await run(kube, change, 2)
    assert kube.route_weights() == {"m-spec": 0, "m-base": 100}  # within one reaction
    assert kube.writes[0] == ("apply", "HTTPRoute/m")  # before any other object
    # m-base's refusal is not announced again; m-spec now serves nothing, rolls at once, and is refused too.
    assert [w for w, _ in second.warnings] == ["ApplyFailed"] and "Deployment/m-spec" in second.warnings[0][1]
    assert kube.status["rollout"]["refused"] == ["Deployment/m-base", "Deployment/m-spec"]
    third = await run(kube, change, 2)
    assert third.warnings == () and kube.route_weights() == {"m-spec": 0, "m-base": 100}
    assert cond(kube, "Degraded")["status"] == "True" and "Deployment/m-spec" in cond(kube, "Degraded")["message"]
    kube.fail.clear()
    for _ in range(8):  # once the policy allows them, both roll: nothing is refused any more
        await run(kube, change, 2)
        for name in ("m-spec", "m-base"):
            kube.ready(name)
    assert "rollout" not in kube.status or not kube.status["rollout"].get("refused")
    assert cond(kube, "Degraded")["status"] == "False"


async def test_a_refused_config_map_holds_the_deployments_but_not_the_route() -> None:
    adaptive = with_({"strategy": "Adaptive"})
    kube = FakeKube()
    await serving(kube, adaptive)
    kube.fail[("apply", "ConfigMap")] = REFUSED
    outcome = await run(kube, with_({"switching.crossoverConcurrency": 40}, adaptive), 2)
    assert not any(r.startswith("Deployment/") for r in outcome.applied)  # no pod rolls onto a missing config
    assert any(r.startswith("ConfigMap/") for r, _ in [(w.partition(": ")[0], w) for _, w in outcome.warnings])


async def test_a_failed_route_apply_is_reported_and_the_rest_still_applies() -> None:
    kube = FakeKube()
    await serving(kube)
    kube.fail[("apply", "HTTPRoute/m")] = KubeError(422, "spec.rules[0]: invalid")
    outcome = await run(kube, with_({"engine.memFractionStatic": 0.8, "routing.pathPrefix": "/v1"}), 2)
    assert "Deployment/m-base" in outcome.applied
    assert "HTTPRoute/m: spec.rules[0]: invalid" in cond(kube, "Degraded")["message"]


def test_a_backend_without_a_service_gets_no_weight() -> None:
    assert servable((("a", 40), ("b", 60), ("old", 0)), {"a"}) == (("a", 100), ("b", 0), ("old", 0))
    assert servable((("a", 40), ("b", 60)), {"a", "b"}) == (("a", 40), ("b", 60))
    assert servable((("a", 30), ("b", 30), ("c", 40)), {"a", "b"}) == (("a", 50), ("b", 50), ("c", 0))
    assert servable((("a", 100), ("b", 0)), {"b"}) == (("a", 100), ("b", 0))  # nobody can take it: as planned


def test_the_route_goes_first_only_when_it_relieves_a_pool_that_cannot_serve() -> None:
    assert moves_off_dead({"a": 100, "b": 0}, (("a", 0), ("b", 100)), serving={"b"})
    assert not moves_off_dead({"a": 100, "b": 0}, (("a", 0), ("b", 100)), serving={"a", "b"})  # a drain
    assert not moves_off_dead({"a": 100, "b": 0}, (("a", 0), ("b", 100)), serving=set())  # nowhere to go
    assert not moves_off_dead(None, (("a", 100),), serving={"a"})


def test_a_backend_whose_service_was_refused_keeps_its_live_reference() -> None:
    rendered = {"spec": {"rules": [{"backendRefs": [{"name": "a", "port": 2, "weight": 1}, {"name": "b", "port": 2}]}]}}
    live = {"spec": {"rules": [{"backendRefs": [{"name": "a", "port": 1, "weight": 9}]}]}}
    out = with_live_backends(rendered, live, {"a", "b"})
    assert out["spec"]["rules"][0]["backendRefs"] == [{"name": "a", "port": 1, "weight": 1}, {"name": "b", "port": 2}]
    assert rendered["spec"]["rules"][0]["backendRefs"][0]["port"] == 2  # not mutated


async def test_a_conflict_on_the_new_side_of_a_strategy_change_keeps_the_old_pools_serving() -> None:
    kube = FakeKube()
    await serving(kube)
    theirs = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "m-engine", "namespace": "ns"},
              "spec": {"replicas": 1}, "status": {"readyReplicas": 1, "replicas": 1, "updatedReplicas": 1}}  # fmt: skip
    kube.put(theirs)
    restart = with_({"strategy": "Restart"})
    for _ in range(3):
        outcome = await run(kube, restart, 2)
        assert outcome.pruned == ()
        assert ("Deployment", "m-spec") in kube.objects and ("Deployment", "m-base") in kube.objects
        weights = kube.route_weights()
        assert weights.get("m-engine", 0) == 0 and sum(weights.values()) == 100, weights
    assert cond(kube, "Ready")["reason"] == "Conflict"
    assert kube.objects[("Deployment", "m-engine")] == theirs  # never fought


async def test_switching_a_pool_to_external_hands_its_replicas_over_first() -> None:
    kube = FakeKube()
    six = with_({"pools.speculative.replicas": 6})
    await serving(kube, six)
    kube.objects[("Deployment", "m-spec")]["metadata"]["managedFields"] = [entry("specserve")]
    kube.writes.clear()
    await run(kube, with_({"pools.speculative.autoscaling": "External"}, six), 2)
    ((manager, body),) = kube.handovers
    assert manager == HANDOVER_MANAGER and body["spec"] == {"replicas": 6}
    assert body["metadata"] == {"name": "m-spec", "namespace": "ns"}
    assert kube.writes.index(("apply", "Deployment/m-spec")) == 0  # the handover, then the intent without it
    assert kube.writes.count(("apply", "Deployment/m-spec")) == 2
    kube.handovers.clear()
    await run(kube, with_({"pools.speculative.autoscaling": "External"}, six), 2)
    assert kube.handovers == []  # only when the intent drops the field


def entry(manager: str, operation: str = "Apply") -> dict[str, Any]:
    """A managedFields entry owning spec.replicas."""
    return {"manager": manager, "operation": operation, "fieldsV1": {"f:spec": {"f:replicas": {}}}}


def test_the_handover_is_needed_only_while_specserve_owns_the_replicas() -> None:
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p", "namespace": "ns"},
                "spec": {"template": {}}}  # fmt: skip
    live = {"metadata": {"managedFields": [entry("specserve")]}, "spec": {"replicas": 4}}
    assert handover(manifest, live) == {**manifest, "spec": {"replicas": 4}}
    hpa = {"metadata": {"managedFields": [entry("kube-controller-manager", "Update")]},
           "spec": {"replicas": 4}}  # fmt: skip
    assert handover(manifest, hpa) is None and not owns_replicas(hpa)
    assert owns_replicas({"metadata": {}})  # no managedFields to tell: hand over (harmless)
    assert handover({**manifest, "spec": {"replicas": 2}}, live) is None  # the intent still carries it


def accepted(kube: FakeKube, generation: int, observed: int | None) -> None:
    """The route at `generation`; the Gateway's Accepted condition at `observed` (None: no status at all)."""
    route = kube.objects[("HTTPRoute", "m")]
    route["metadata"]["generation"] = generation
    cond = {"type": "Accepted", "status": "True", "reason": "Accepted", "observedGeneration": observed}
    route["status"] = {"parents": [{"conditions": [cond]}]} if observed is not None else {}


async def drained(kube: FakeKube, change: dict[str, Any]) -> None:
    """Run an engine change until m-spec (the busy pool) has been drained and waits for its roll."""
    for _ in range(10):
        await run(kube, change, 2)
        for name in ("m-spec", "m-base"):
            kube.ready(name)
        if kube.route_weights() == {"m-spec": 0, "m-base": 100}:
            return
    raise AssertionError(kube.route_weights())


async def test_a_roll_after_a_weight_change_waits_for_the_gateway_to_accept_it() -> None:
    kube = FakeKube()
    await serving(kube)
    change = with_({"engine.memFractionStatic": 0.8})
    await drained(kube, change)
    spec_before = kube.objects[("Deployment", "m-spec")]["spec"]["template"]
    accepted(kube, generation=5, observed=4)  # the Gateway has not taken the drain yet
    outcome = await run(kube, change, 2)
    assert "m-spec" in outcome.held and kube.objects[("Deployment", "m-spec")]["spec"]["template"] == spec_before
    assert "accept generation 5" in cond(kube, "Progressing")["message"]
    accepted(kube, generation=5, observed=5)
    outcome = await run(kube, change, 2)
    assert "Deployment/m-spec" in outcome.applied  # now it rolls


async def test_without_gateway_status_the_roll_waits_the_settle_delay() -> None:
    kube = FakeKube()
    spec = with_({"routing.settleSeconds": 60})
    await serving(kube, spec)
    change = with_({"engine.memFractionStatic": 0.8}, spec)
    await drained(kube, change)
    moved = kube.status["rollout"]["weightsChanged"]
    accepted(kube, generation=5, observed=None)
    later = datetime.strptime(moved, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) + timedelta(seconds=30)
    outcome = await run(kube, change, 2, now=lambda: later.strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert "m-spec" in outcome.held and "settleSeconds" in cond(kube, "Progressing")["message"]
    later += timedelta(seconds=31)
    outcome = await run(kube, change, 2, now=lambda: later.strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert "Deployment/m-spec" in outcome.applied


def test_gateway_pending_reads_the_accepted_generation_or_the_settle_delay() -> None:
    t0 = datetime(2026, 12, 1, tzinfo=UTC)

    def route(generation: int, *observed: int | None) -> dict[str, Any]:
        parents = [{"conditions": [{"type": "Accepted", "status": "True", "observedGeneration": o}]} for o in observed]
        return {"metadata": {"generation": generation}, "status": {"parents": parents}}

    assert gateway_pending(route(3, 3, 3), t0, t0, 30) is None
    assert gateway_pending(route(3, 3, 2), t0, t0, 30) is not None  # one parent lags
    assert gateway_pending(route(3, None), t0, t0, 30) is None  # cannot tell: counts as current
    assert gateway_pending(route(3), t0, t0 + timedelta(seconds=10), 30) is not None
    assert gateway_pending(route(3), t0, t0 + timedelta(seconds=30), 30) is None
    assert gateway_pending(route(3), None, t0, 30) is None  # no weight change recorded
    assert gateway_pending(None, t0, t0, 30) is None


def test_the_route_never_has_all_its_weight_on_backends_that_cannot_serve() -> None:
    assert keep_serving((("a", 100), ("b", 0)), {"b"}) == (("a", 0), ("b", 100))
    assert keep_serving((("a", 0), ("b", 0), ("c", 0)), {"b", "c"}) == (("a", 0), ("b", 50), ("c", 50))
    assert keep_serving((("a", 60), ("b", 40)), {"b"}) == (("a", 60), ("b", 40))  # a Ready backend has weight
    assert keep_serving((("a", 100),), set()) == (("a", 100),)  # nothing can serve: as planned

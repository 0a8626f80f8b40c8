"""Whole reconcile passes against an in-memory API that stores what a real server would: what is applied, held,
pruned and written to status, pass after pass."""

from __future__ import annotations

import asyncio
from typing import Any

from specserve.api.install_policy import InstallPolicy
from specserve.api.models import Mode
from specserve.api.validation import parse_object
from specserve.kube.client import KubeError
from specserve.kube.drift import APPLIED_HASH
from specserve.kube.kinds import OWNED_KINDS, Kind
from specserve.reconcile import Outcome, reconcile
from specserve.reconcile.apply import snapshot
from specserve.reconcile.intent import TEMPLATE_HASH
from specserve.render.engine import ADAPTIVE_CONFIG_KEY
from specserve.render.manifests import render
from tests.unit.fakekube import FakeKube
from tests.unit.test_api import MINIMAL, with_

JSON = dict[str, Any]
POOLS = tuple(f"{k}/m-{p}" for k in ("Deployment", "Service", "PodDisruptionBudget") for p in ("spec", "base"))


def body(spec: JSON, generation: int = 1, status: JSON | None = None) -> JSON:
    return {
        "apiVersion": "specserve.io/v1alpha1",
        "kind": "SpecServe",
        "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": generation},
        "spec": spec,
        "status": status or {},
    }


async def run(kube: FakeKube, spec: JSON, generation: int = 1, **kw: Any) -> Outcome:
    return await reconcile(kube, body(spec, generation, status=kube.status), **kw)


def cond(kube: FakeKube, type_: str) -> JSON:
    return next(c for c in kube.status["conditions"] if c["type"] == type_)


async def serving(kube: FakeKube, spec: JSON = MINIMAL) -> None:
    """Create the SpecServe and make every pool Ready."""
    await run(kube, spec)
    for (kind, name), _ in list(kube.objects.items()):
        if kind == "Deployment":
            kube.ready(name)
        if kind == "HTTPRoute":
            kube.accept_route(name)
    await run(kube, spec)


async def test_first_reconcile_applies_everything_then_nothing() -> None:
    kube = FakeKube()
    first = await run(kube, MINIMAL)
    assert set(first.applied) == {*POOLS, "HTTPRoute/m"}
    assert first.status_written
    kube.writes.clear()
    second = await run(kube, MINIMAL)
    assert second.applied == () and not second.status_written
    assert kube.writes == []


async def test_after_an_operator_restart_the_steady_state_writes_nothing() -> None:
    kube = FakeKube()
    await serving(kube)
    kube.writes.clear()
    for later in ("2030-01-01T00:00:00Z", "2031-01-01T00:00:00Z"):  # no memory of our last write, a later clock
        await run(kube, MINIMAL, now=lambda t=later: t)
    assert kube.writes == []


async def test_apply_bodies_are_complete_objects_with_owner_and_hashes() -> None:
    kube = FakeKube()
    await run(kube, MINIMAL)
    for (kind, _), stored in kube.objects.items():
        assert stored["metadata"]["ownerReferences"][0]["uid"] == "u1"
        assert APPLIED_HASH in stored["metadata"]["annotations"]
        if kind == "Deployment":
            assert TEMPLATE_HASH in stored["metadata"]["annotations"]
            assert TEMPLATE_HASH not in stored["spec"]["template"]["metadata"]["annotations"]  # no extra roll


async def test_a_removed_field_is_applied_away() -> None:
    kube = FakeKube()
    spec = with_({"placement.nodeSelector": {"pool": "gpu", "zone": "a"}, "placement.priorityClassName": "llm"})
    await serving(kube, spec)
    outcome = await run(kube, with_({"placement.nodeSelector": {"pool": "gpu"}}), 2)
    assert "Deployment/m-base" in outcome.applied  # base carries no traffic: it rolls first
    pod = kube.objects[("Deployment", "m-base")]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "gpu"} and "priorityClassName" not in pod


async def test_a_status_field_left_out_of_the_apply_goes() -> None:
    kube = FakeKube()
    restart = with_({"strategy": "Restart"})
    await serving(kube, restart)
    assert kube.status["weights"] == {"speculative": 100, "baseline": 0}
    spec = {k: v for k, v in restart.items() if k != "routing"}
    outcome = await run(kube, spec, 2)
    assert "HTTPRoute/m" in outcome.pruned
    assert "weights" not in kube.status_patches[-1]  # server-side apply removes what its manager left out
    assert "weights" not in kube.status
    assert cond(kube, "RouteReady")["reason"] == "NotRequested"


async def test_the_status_apply_carries_only_the_reconciles_own_fields() -> None:
    kube = FakeKube()
    kube.status = {"switching": {"mode": "Speculative"}, "load": {"concurrency": 3.0},
                   "conditions": [{"type": "Switching", "status": "True", "reason": "Decided",
                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}  # fmt: skip
    kube.status_owners["specserve-switching"] = ({"switching", "load"}, {"Switching"})
    await run(kube, MINIMAL)
    kube.ready("m-spec")
    await run(kube, MINIMAL)
    applied = kube.status_patches[-1]
    assert set(applied) <= {"observedGeneration", "conditions", "pools", "weights", "activeMode", "rollout"}
    assert not {c["type"] for c in applied["conditions"]} & {"Switching", "MetricsAvailable"}
    assert kube.status["switching"] == {"mode": "Speculative"} and kube.status["load"] == {"concurrency": 3.0}
    assert cond(kube, "Switching")["reason"] == "Decided"  # the loop's condition survives the reconcile's apply


async def test_invalid_spec_changes_no_children_and_reports_the_running_pools() -> None:
    kube = FakeKube()
    await serving(kube)
    kube.objects[("Deployment", "m-base")]["status"]["readyReplicas"] = 0
    kube.writes.clear()
    bad = with_({"placement.gpusPerPod": 3, "engine.tensorParallelSize": 2})
    outcome = await run(kube, bad, 2)
    assert outcome.invalid and "spec.placement.gpusPerPod" in outcome.invalid
    assert outcome.newly_invalid
    assert kube.writes == [("status", "m")]
    assert cond(kube, "BaselinePoolReady")["status"] == "False"  # observed, though the spec is invalid
    assert {p["name"]: p["ready"] for p in kube.status["pools"]} == {"m-spec": 1, "m-base": 0}
    again = await run(kube, bad, 2)
    assert not again.newly_invalid  # one warning event per rejection, not one per resync


async def test_a_strategy_change_makes_the_new_pool_before_it_breaks_the_old_ones() -> None:
    kube = FakeKube()
    await serving(kube)
    foreign = {"kind": "Deployment", "metadata": {"name": "someone-else", "labels": {"specserve.io/instance": "m"},
                                                  "ownerReferences": [{"uid": "other"}]}}  # fmt: skip
    kube.put(foreign)
    restart = with_({"strategy": "Restart"})
    first = await run(kube, restart, 2)
    assert "Deployment/m-engine" in first.applied and first.pruned == ()
    assert kube.route_weights() == {"m-engine": 0, "m-spec": 100, "m-base": 0}
    assert (await run(kube, restart, 2)).pruned == ()  # still loading: the old pools stay
    kube.ready("m-engine")
    moved = await run(kube, restart, 2)
    assert kube.route_weights() == {"m-engine": 100, "m-spec": 0}
    assert set(moved.pruned) == {f"{k}/m-base" for k in ("Deployment", "Service", "PodDisruptionBudget")}
    last = await run(kube, restart, 2)
    assert set(last.pruned) == {f"{k}/m-spec" for k in ("Deployment", "Service", "PodDisruptionBudget")}
    assert kube.route_weights() == {"m-engine": 100}
    assert ("Deployment", "someone-else") in kube.objects
    assert cond(kube, "Progressing")["status"] == "True"  # the pruning pass itself
    await run(kube, restart, 2)
    assert cond(kube, "Progressing")["status"] == "False"


async def test_nothing_is_pruned_in_a_pass_whose_apply_failed() -> None:
    kube = FakeKube()
    await serving(kube)
    restart = with_({"strategy": "Restart"})
    await run(kube, restart, 2)
    kube.ready("m-engine")
    kube.fail[("apply", "HTTPRoute/m")] = KubeError(500, "etcd timeout")
    outcome = await run(kube, restart, 2)
    assert outcome.pruned == ()
    assert cond(kube, "Degraded")["reason"] == "ReconcileFailed" and "etcd timeout" in cond(kube, "Degraded")["message"]


async def test_a_422_is_reported_and_the_route_keeps_addressing_the_service_as_it_is() -> None:
    kube = FakeKube()
    await serving(kube)
    kube.fail[("apply", "Service/m-spec")] = KubeError(422, 'Service "m-spec" is invalid: spec.ports[0].port')
    outcome = await run(kube, with_({"engine.port": 31000}), 2)
    assert outcome.pruned == ()
    assert ("ApplyFailed", 'Service/m-spec: Service "m-spec" is invalid: spec.ports[0].port') in outcome.warnings
    assert kube.route_weights()["m-spec"] == 100
    ports = {b["name"]: b["port"] for b in kube.objects[("HTTPRoute", "m")]["spec"]["rules"][0]["backendRefs"]}
    assert ports == {"m-spec": 30000, "m-base": 31000}  # m-spec's Service still listens on 30000
    assert cond(kube, "Degraded")["status"] == "True" and "spec.ports[0].port" in cond(kube, "Degraded")["message"]
    assert kube.status["observedGeneration"] == 1


async def test_an_engine_change_rolls_one_pool_at_a_time_and_the_route_follows_readiness() -> None:
    kube = FakeKube()
    await serving(kube)
    change = with_({"engine.memFractionStatic": 0.8})
    trace: list[tuple[str, ...]] = []
    for _ in range(12):
        outcome = await run(kube, change, 2)
        trace.append(outcome.held)
        deployments = {n: kube.objects[("Deployment", n)] for n in ("m-spec", "m-base")}
        loading = [n for n, d in deployments.items() if d["status"]["readyReplicas"] == 0]
        assert len(loading) <= 1, f"both pools down: {trace}"
        weights = kube.route_weights()
        assert all(weights[n] == 0 for n in loading), (weights, loading)
        for name in loading:  # the pods come up before the next pass
            kube.ready(name)
    args = [kube.objects[("Deployment", n)]["spec"]["template"]["spec"]["containers"][0]["args"] for n in
            ("m-spec", "m-base")]  # fmt: skip
    assert all(a[a.index("--mem-fraction-static") + 1] == "0.8" for a in args)
    assert kube.route_weights() == {"m-spec": 100, "m-base": 0}
    assert cond(kube, "Progressing")["status"] == "False"


async def test_a_conflicting_object_is_left_alone_and_named() -> None:
    kube = FakeKube()
    theirs = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "m-spec", "namespace": "ns"},
              "spec": {"ports": [{"port": 80}]}}  # fmt: skip
    kube.put(theirs)
    outcome = await run(kube, MINIMAL)
    assert "Service/m-spec" not in outcome.applied and "Deployment/m-spec" in outcome.applied
    assert kube.objects[("Service", "m-spec")] == theirs
    degraded = cond(kube, "Degraded")
    assert degraded["reason"] == "Conflict" and "Service/m-spec" in degraded["message"]
    assert cond(kube, "Ready")["reason"] == "Conflict"
    assert kube.route_weights() == {"m-spec": 0, "m-base": 100}  # never route to a Service that is not ours


async def test_a_missing_podmonitor_api_sets_its_own_condition_only() -> None:
    kube = FakeKube()
    spec = with_({"monitoring.podMonitor": True})
    kube.fail[("apply", "PodMonitor/m")] = KubeError(404, "the server could not find the requested resource")
    await serving(kube, spec)
    assert cond(kube, "PodMonitorReady")["reason"] == "NotInstalled"
    assert cond(kube, "Ready")["status"] == "True" and cond(kube, "Degraded")["status"] == "False"
    kube.writes.clear()
    await run(kube, spec)
    assert kube.writes == []  # not tried again every resync for the same generation


async def test_a_read_error_keeps_the_pool_conditions() -> None:
    kube = FakeKube()
    await serving(kube)
    before = {c["type"]: c for c in kube.status["conditions"]}
    kube.fail[("list", "Deployment")] = KubeError(0, "connection reset")
    kube.writes.clear()
    outcome = await run(kube, MINIMAL)
    assert outcome.applied == () and outcome.pruned == ()
    for type_ in ("Ready", "SpeculativePoolReady", "BaselinePoolReady"):
        assert cond(kube, type_) == before[type_]
    assert cond(kube, "Degraded")["reason"] == "ReadFailed"
    assert kube.writes == [("status", "m")]


async def test_a_single_replica_restart_pool_announces_downtime_before_acting() -> None:
    kube = FakeKube()
    restart = with_({"strategy": "Restart"})
    await serving(kube, restart)
    to_baseline = {"switching": {"mode": "Baseline", "modeSince": "2026-01-01T00:00:00Z"}}
    kube.status = {**kube.status, **to_baseline}
    announce = await run(kube, restart)
    assert announce.held == ("m-engine",) and announce.applied == ()
    assert [r for r, _ in announce.warnings] == ["DowntimeAhead"]
    assert cond(kube, "Progressing")["reason"] == "DowntimeAhead"
    act = await run(kube, restart)
    assert act.applied == ("Deployment/m-engine",) and act.warnings == ()
    assert kube.status["activeMode"] == "Speculative"  # still loading: the old mode is what served last
    kube.ready("m-engine")
    await run(kube, restart)
    assert kube.status["activeMode"] == "Baseline"


async def test_the_target_comes_from_status_switching() -> None:
    kube = FakeKube()
    await serving(kube)
    kube.status = {**kube.status, "switching": {"mode": "Baseline", "modeSince": "2026-01-01T00:00:00Z",
                                                 "weights": {"speculative": 30, "baseline": 70}}}  # fmt: skip
    await run(kube, MINIMAL)
    assert kube.route_weights() == {"m-spec": 30, "m-base": 70}
    assert kube.status["weights"] == {"speculative": 30, "baseline": 70}
    assert kube.status["activeMode"] == "Baseline"


async def test_switching_conditions_of_the_loop_are_kept() -> None:
    kube = FakeKube()
    await serving(kube)
    ours = {"type": "Switching", "status": "True", "reason": "Moving", "message": "m", "lastTransitionTime": "t"}
    kube.status["conditions"] = [c for c in kube.status["conditions"] if c["type"] != "Switching"] + [ours]
    await run(kube, MINIMAL)
    assert cond(kube, "Switching") == ours


async def test_api_failures_are_reported_not_raised() -> None:
    kube = FakeKube()
    kube.fail[("apply", "Deployment")] = KubeError(403, "forbidden")
    kube.fail[("apply", "Deployment/m-spec")] = KubeError(403, "forbidden")
    outcome = await run(kube, MINIMAL)
    assert outcome.status_written
    degraded = cond(kube, "Degraded")
    assert degraded["status"] == "True" and "forbidden" in degraded["message"]


async def test_unreadable_status_is_rebuilt() -> None:
    kube = FakeKube()
    kube.status = {"conditions": "garbage"}
    outcome = await run(kube, MINIMAL)
    assert outcome.status_written and kube.status["activeMode"] == "Speculative"
    assert isinstance(kube.status["conditions"], list)


async def test_without_decisions_the_mode_follows_initial_mode() -> None:
    kube = FakeKube()
    await serving(kube)
    assert kube.status["activeMode"] == "Speculative"
    await run(kube, with_({"switching.initialMode": "Baseline"}), 2)
    assert kube.status["activeMode"] == "Baseline"
    assert kube.route_weights() == {"m-spec": 0, "m-base": 100}


async def test_a_stale_object_costs_at_most_the_same_apply_again() -> None:
    kube = FakeKube()
    await run(kube, MINIMAL)
    stale_status = dict(kube.status)
    bad = with_({"placement.gpusPerPod": 3, "engine.tensorParallelSize": 2})
    rejected = await reconcile(kube, body(bad, 2, status=stale_status))
    assert rejected.newly_invalid and rejected.stored is not None
    written = kube.status
    # The watch has not delivered our Degraded status yet: the object still carries the older one.
    await reconcile(kube, body(bad, 2, status=stale_status))
    assert kube.status == written and kube.status_patches[-1] == kube.status_patches[-2]
    kube.writes.clear()
    await reconcile(kube, body(bad, 2, status=written), now=lambda: "2099-01-01T00:00:00Z")
    assert kube.writes == []


async def test_someone_elses_status_edit_is_repaired() -> None:
    kube = FakeKube()
    await run(kube, MINIMAL)
    kube.status = {**kube.status, "activeMode": "Baseline"}
    again = await run(kube, MINIMAL)
    assert again.status_written and kube.status["activeMode"] == "Speculative"


async def test_an_autoscaler_owns_the_replicas_and_is_never_fought() -> None:
    kube = FakeKube()
    spec = with_({"strategy": "Restart", "pools.speculative.autoscaling": "External"})
    await serving(kube, spec)
    deployment = kube.objects[("Deployment", "m-engine")]
    assert "replicas" not in deployment["spec"]  # applied without: the autoscaler's field
    deployment["spec"]["replicas"] = 3  # the HPA scaled it
    kube.ready("m-engine", ready=2)
    kube.writes.clear()
    await run(kube, spec)
    assert [w for w in kube.writes if w[0] == "apply"] == []
    assert kube.objects[("Deployment", "m-engine")]["spec"]["replicas"] == 3
    assert kube.status["pools"] == [{"role": "engine", "name": "m-engine", "desired": 3, "ready": 2, "updated": 3}]


async def test_a_surge_pool_restarts_without_announcing_downtime() -> None:
    kube = FakeKube()
    spec = with_({"strategy": "Restart", "pools.speculative.maxSurge": 1})
    await serving(kube, spec)
    kube.status = {**kube.status, "switching": {"mode": "Baseline", "modeSince": "2026-01-01T00:00:00Z"}}
    outcome = await run(kube, spec)
    assert outcome.applied == ("Deployment/m-engine",) and outcome.warnings == ()


HOST_PATH = with_({"model.cache": {"hostPath": "/mnt/models/llama"}})


async def test_a_host_path_the_installation_does_not_allow_is_refused_and_nothing_applied() -> None:
    kube = FakeKube()
    outcome = await run(kube, HOST_PATH)
    assert outcome.invalid is not None and "spec.model.cache.hostPath" in outcome.invalid
    assert "--allow-host-path" in outcome.invalid
    assert outcome.applied == () and kube.objects == {}
    assert cond(kube, "Degraded")["reason"] == "InvalidSpec"


async def test_an_allowed_host_path_is_served_read_only() -> None:
    kube = FakeKube()
    outcome = await run(kube, HOST_PATH, install=InstallPolicy(("/mnt/models",)))
    assert outcome.invalid is None and "Deployment/m-spec" in outcome.applied
    pod = kube.objects["Deployment", "m-spec"]["spec"]["template"]["spec"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "model-cache")
    assert mount.get("readOnly") is True


ADAPTIVE = with_({"strategy": "Adaptive", "switching": {"crossoverConcurrency": 16}})


def _mounted_configmap(kube: FakeKube) -> str:
    pod = kube.objects["Deployment", "m-engine"]["spec"]["template"]["spec"]
    return next(str(v["configMap"]["name"]) for v in pod["volumes"] if "configMap" in v)


def _adaptive_config(kube: FakeKube) -> str:
    data: str = kube.objects["ConfigMap", _mounted_configmap(kube)]["data"][ADAPTIVE_CONFIG_KEY]
    return data


def _configmaps(kube: FakeKube) -> set[str]:
    return {name for kind, name in kube.objects if kind == "ConfigMap"}


async def test_adaptive_config_follows_the_crossover_the_switching_loop_decided() -> None:
    kube = FakeKube()
    await serving(kube, ADAPTIVE)
    assert '"16"' in _adaptive_config(kube)
    # The loop decided on crossover 40 (re-measured curves moved it past the band): the config follows it.
    kube.status = {**kube.status, "switching": {"mode": "Speculative", "modeSince": "2026-01-01T00:00:00Z",
                                                 "adaptiveCrossover": 40.0}}  # fmt: skip
    await run(kube, ADAPTIVE)  # one pod, no surge: DowntimeAhead is announced first, the pods keep their config
    assert '"16"' in _adaptive_config(kube)
    await run(kube, ADAPTIVE)
    assert '"40"' in _adaptive_config(kube) and '"16"' not in _adaptive_config(kube)
    # A spec crossover inside the band that the loop did not act on changes nothing.
    kube.writes.clear()
    await run(kube, with_({"switching.crossoverConcurrency": 42}, ADAPTIVE))
    assert '"40"' in _adaptive_config(kube)


async def test_a_new_adaptive_config_is_a_new_configmap_and_the_old_one_goes_only_after_the_roll() -> None:
    kube = FakeKube()
    await serving(kube, ADAPTIVE)
    before = _mounted_configmap(kube)
    assert _configmaps(kube) == {before} and kube.objects["ConfigMap", before].get("immutable") is True
    kube.status = {**kube.status, "switching": {"mode": "Speculative", "modeSince": "2026-01-01T00:00:00Z",
                                                 "adaptiveCrossover": 40.0}}  # fmt: skip
    announced = await run(kube, ADAPTIVE)
    # DowntimeAhead (one pod, no surge) holds the roll for a pass: the new config exists, the pods mount the old.
    assert [reason for reason, _ in announced.warnings] == ["DowntimeAhead"]
    assert _mounted_configmap(kube) == before and len(_configmaps(kube)) == 2
    await run(kube, ADAPTIVE)
    after = _mounted_configmap(kube)
    # The rolling pods mount the new config; old pods (one restarting, say) still find the file they started with.
    assert after != before and _configmaps(kube) == {before, after}
    assert '"40"' in kube.objects["ConfigMap", after]["data"][ADAPTIVE_CONFIG_KEY]
    await run(kube, ADAPTIVE)
    assert _configmaps(kube) == {before, after}, "pruned while the roll was still in progress"
    kube.ready("m-engine")
    await run(kube, ADAPTIVE)
    assert _configmaps(kube) == {after}


class Together(FakeKube):
    """Every read waits until `expected` reads are in flight at once: reads made one after another never finish."""

    def __init__(self) -> None:
        super().__init__()
        self.expected = 0
        self.in_flight = 0
        self.all_sent = asyncio.Event()

    async def _together(self) -> None:
        self.in_flight += 1
        if self.in_flight >= self.expected:
            self.all_sent.set()
        await self.all_sent.wait()

    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        await self._together()
        return await super().get(kind, namespace, name)

    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]:
        await self._together()
        return await super().list(kind, namespace, labels)


async def test_a_pass_sends_its_lists_together_then_its_reads_by_name_together() -> None:
    # One after another, a pass's 7 LISTs and its GETs were 13 round trips (0.15-0.4 s each on a loaded real API
    # server): the first pass over 1000 SpecServes ran at 0.55 a second. What they find is unchanged.
    kube = Together()
    desired = render(parse_object(body(MINIMAL)), Mode.SPECULATIVE)
    kube.expected = len(OWNED_KINDS)
    snap = await asyncio.wait_for(snapshot(kube, "ns", "m", "u1", desired), timeout=30)  # generous: a hang fails
    assert snap.owned == {} and snap.read_errors == [] and snap.conflicts == []
    assert kube.all_sent.is_set() and kube.in_flight == len(OWNED_KINDS) + len(desired)  # then one GET each


async def test_reads_made_together_keep_their_findings_in_order() -> None:
    kube = FakeKube()
    await run(kube, MINIMAL)
    foreign = kube.objects[("Service", "m-spec")]
    foreign["metadata"]["ownerReferences"] = [{"uid": "someone-else"}]
    foreign["metadata"]["labels"] = {}
    kube.fail[("list", "NetworkPolicy")] = KubeError(403, "forbidden")
    kube.fail[("list", "Deployment")] = KubeError(500, "etcd unavailable")
    kube.fail[("get", "Deployment/m-base")] = KubeError(500, "etcd unavailable")
    desired = render(parse_object(body(MINIMAL)), Mode.SPECULATIVE)
    snap = await snapshot(kube, "ns", "m", "u1", desired)
    assert snap.read_errors == [
        "listing deployments: etcd unavailable",
        "reading Deployment/m-base: etcd unavailable",
    ]
    assert snap.unread == {"NetworkPolicy": "listing networkpolicies: forbidden"}
    assert snap.conflicts == ["Service/m-spec"]
    assert "Deployment/m-spec" in snap.owned and "Service/m-base" in snap.owned

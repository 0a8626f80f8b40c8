"""Stuck and failed rolls, scales that are no rolls, webhooks and autoscalers: the one Deployment reader, the pods'
reasons, the planner's containment, and whole reconcile passes that name the cause once."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from specserve.api.models import ConditionStatus, PoolFailure, SpecServeStatus, Strategy
from specserve.api.validation import parse_object
from specserve.kube.client import KubeError
from specserve.kube.kinds import HORIZONTALPODAUTOSCALER, Kind
from specserve.pool_state import foreign_template_owner, read_pool
from specserve.reconcile.autoscalers import autoscaler_conflicts
from specserve.reconcile.causes import pool_cause, pool_causes
from specserve.reconcile.intent import TEMPLATE_HASH, live_pool, template_hash, with_template_hash
from specserve.reconcile.rollout import DesiredPool, LivePool, World, plan
from specserve.status import Observation, PoolHealth, RouteHealth, new_failures, observed_status, pool_moved
from specserve.switching.pools import pool_states
from tests.unit.fakekube import FakeKube
from tests.unit.test_api import MINIMAL, with_
from tests.unit.test_reconcile import cond, run, serving

JSON = dict[str, Any]
SPEC, BASE = "m-spec", "m-base"
T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def deployment(
    *, replicas: int = 2, generation: int = 3, observed: int | None = 3, status_replicas: int | None = None,
    ready: int = 2, updated: int | None = None, progressing: JSON | None = None,
) -> JSON:  # fmt: skip
    status: JSON = {
        "replicas": replicas if status_replicas is None else status_replicas,
        "readyReplicas": ready,
        "updatedReplicas": (replicas if status_replicas is None else status_replicas) if updated is None else updated,
    }
    if observed is not None:
        status["observedGeneration"] = observed
    if progressing is not None:
        status["conditions"] = [{"type": "Progressing", **progressing}]
    return {"metadata": {"name": SPEC, "generation": generation}, "spec": {"replicas": replicas}, "status": status}


DEADLINE = {"status": "False", "reason": "ProgressDeadlineExceeded", "message": 'ReplicaSet "m-spec-x" has timed out.'}


# ------------------------------------------------------------------------------------------ the one reader


def test_an_unobserved_scale_is_not_a_roll_but_an_unobserved_template_change_is() -> None:
    scale = read_pool(deployment(replicas=4, generation=4, observed=3, status_replicas=2, ready=2))
    assert not scale.rolling and scale.is_settled(None) and not scale.is_complete(None)
    template = read_pool(deployment(replicas=2, generation=4, observed=3, ready=2))
    assert template.rolling and not template.is_settled(None)


def test_pending_pods_of_a_scale_up_leave_a_serving_pool_settled_and_scaling() -> None:
    counts = read_pool(deployment(replicas=4, ready=2))  # observed: 4 pods of the current template, 2 Pending
    assert counts.is_settled(None) and counts.is_scaling(None) and not counts.is_complete(None)
    assert not read_pool(deployment(replicas=4, ready=0)).is_settled(None)  # nothing serves: not settled
    old_pods = read_pool(deployment(replicas=2, status_replicas=3, updated=2, ready=3))
    assert old_pods.rolling and not old_pods.is_settled(None)


def test_the_deadline_counts_only_for_the_observed_generation() -> None:
    assert read_pool(deployment(ready=0, progressing=DEADLINE)).deadline_exceeded
    stale = read_pool(deployment(ready=0, generation=4, observed=3, progressing=DEADLINE))
    assert not stale.deadline_exceeded  # a new template was applied after the deadline passed
    assert not read_pool(deployment(progressing={"status": "True", "reason": "ReplicaSetUpdated"})).deadline_exceeded


def test_status_planner_and_switching_loop_read_the_same_settled() -> None:
    live = {**deployment(replicas=4, ready=2), "spec": {"replicas": 4}}
    health = PoolHealth.observe(SPEC, None, live)
    assert health.condition()[:2] == (ConditionStatus.TRUE, "Scaling")
    assert live_pool(live, None).settled(None)
    obj = _specserve()
    (state,) = [s for s in pool_states(obj, obj.spec.switching.initial_mode, {SPEC: live}) if s.name == SPEC]
    assert state.settled and not state.complete and state.ready == 2 and state.desired == 4


def _specserve() -> Any:
    meta = {"name": "m", "namespace": "ns", "uid": "u1", "generation": 1}
    return parse_object({"apiVersion": "specserve.io/v1alpha1", "kind": "SpecServe", "metadata": meta, "spec": MINIMAL})


# ------------------------------------------------------------------------------------------ the pods' reasons


def pod(name: str = "m-spec-1", *, waiting: str | None = None, message: str = "", last: str | None = None,
        unschedulable: str | None = None, ready: bool = False, init: bool = False) -> JSON:  # fmt: skip
    container: JSON = {"name": "sglang", "state": {}}
    if waiting:
        container["state"] = {"waiting": {"reason": waiting, "message": message}}
    if last:
        container["lastState"] = {"terminated": {"reason": last, "exitCode": 137}}
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if unschedulable is not None:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": unschedulable})  # fmt: skip
    statuses = {"initContainerStatuses" if init else "containerStatuses": [container]}
    return {"metadata": {"name": name, "labels": {"app": "x"}}, "status": {"conditions": conditions, **statuses}}


NOT_DONE = read_pool(deployment(ready=0))


@pytest.mark.parametrize(
    ("the_pod", "reason", "words"),
    [
        (pod(waiting="ImagePullBackOff", message='Back-off pulling image "sglang:typo"'), "ImagePullBackOff", "typo"),
        (pod(waiting="ErrImagePull", message="manifest unknown"), "ErrImagePull", "manifest unknown"),
        (pod(waiting="CrashLoopBackOff", message="back-off 5m0s"), "CrashLoopBackOff", "back-off"),
        (pod(waiting="CreateContainerConfigError", message='secret "hf" not found'), "CreateContainerConfigError",
         'secret "hf"'),
        (pod(waiting="CrashLoopBackOff", last="OOMKilled"), "OOMKilled", "OOMKilled (exit code 137)"),
        (pod(unschedulable="0/8 nodes are available: 8 Insufficient nvidia.com/gpu."), "Unschedulable",
         "Insufficient nvidia.com/gpu"),
        (pod(waiting="ImagePullBackOff", init=True), "ImagePullBackOff", "container sglang"),
    ],
)  # fmt: skip
def test_each_pod_reason_is_named_with_its_message(the_pod: JSON, reason: str, words: str) -> None:
    cause = pool_cause(NOT_DONE, [the_pod])
    assert cause is not None and cause.reason == reason and words in cause.message
    assert not cause.deadline_exceeded


def test_ready_and_terminating_pods_and_plain_loading_name_no_cause() -> None:
    terminating = pod(waiting="CrashLoopBackOff")
    terminating["metadata"]["deletionTimestamp"] = T0
    loading = pod(waiting="ContainerCreating")
    assert pool_cause(NOT_DONE, [pod(waiting="CrashLoopBackOff", ready=True), terminating, loading]) is None


def test_the_deadline_is_the_reason_and_the_pods_say_why() -> None:
    counts = read_pool(deployment(ready=0, progressing=DEADLINE))
    cause = pool_cause(counts, [pod(unschedulable="no GPU"), pod("b", waiting="ImagePullBackOff")])
    assert cause is not None and cause.reason == "ProgressDeadlineExceeded" and cause.deadline_exceeded
    assert "timed out" in cause.message and "ImagePullBackOff" in cause.message  # the most telling pod reason
    assert pool_cause(counts, []) is not None  # the deadline alone is a failure


class CountingKube(FakeKube):
    def __init__(self) -> None:
        super().__init__()
        self.lists: list[str] = []

    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]:
        self.lists.append(kind.kind)
        return await super().list(kind, namespace, labels)


async def test_pods_are_listed_only_while_a_pool_is_not_complete() -> None:
    kube = CountingKube()
    owned = {"Deployment/m-spec": {**deployment(replicas=2, ready=2), "spec": {"replicas": 2}}}
    assert await pool_causes(kube, "ns", "m", owned, {SPEC: 2}) == {}
    assert kube.lists == []  # the steady state reads no pod
    owned["Deployment/m-spec"]["status"]["readyReplicas"] = 1
    await pool_causes(kube, "ns", "m", owned, {SPEC: 2})
    assert kube.lists == ["Pod"]


# ------------------------------------------------------------------------------------------ the planner


def lp(name: str, *, ready: int = 1, current: bool = True, replicas: int = 1, failure: str | None = None,
       seen: bool = True, status_replicas: int | None = None) -> LivePool:  # fmt: skip
    counted = replicas if status_replicas is None else status_replicas
    return LivePool(
        name=name, generation=2, observed_generation=2 if seen else 1, spec_replicas=replicas, replicas=counted,
        ready=ready, updated=counted, template_current=current, failure=failure,
    )  # fmt: skip


def split(spec: LivePool, base: LivePool, route: dict[str, int], target: tuple[int, int]) -> World:
    return World(
        desired=(DesiredPool(SPEC, spec.spec_replicas, "h"), DesiredPool(BASE, base.spec_replicas, "h")),
        live={SPEC: spec, BASE: base},
        route=True,
        live_route=route,
        target_weights={SPEC: target[0], BASE: target[1]},
    )


def test_the_other_pool_never_rolls_while_one_is_failed() -> None:
    stuck = lp(SPEC, ready=0, failure="ImagePullBackOff")
    p = plan(split(stuck, lp(BASE, current=False), {SPEC: 0, BASE: 100}, (40, 60)))
    assert BASE in p.held and p.route_map == {SPEC: 0, BASE: 100}
    # Failed while still serving (a scale-up stuck Unschedulable): contained all the same.
    serving_failed = lp(SPEC, ready=1, replicas=2, failure="Unschedulable")
    p = plan(split(serving_failed, lp(BASE, current=False), {SPEC: 40, BASE: 60}, (40, 60)))
    assert BASE in p.held


def test_weights_keep_following_the_target_between_ready_pools_while_one_pool_is_stuck() -> None:
    # A failed scale-up leaves spec serving: the target still splits traffic between the Ready pools.
    serving_failed = lp(SPEC, ready=1, replicas=2, failure="Unschedulable")
    for target in ((40, 60), (70, 30)):
        p = plan(split(serving_failed, lp(BASE), {SPEC: 40, BASE: 60}, target))
        assert p.route_map == {SPEC: target[0], BASE: target[1]}


def test_an_hpa_scale_neither_drains_nor_waits() -> None:
    scaled = lp(SPEC, ready=2, replicas=4, seen=False, status_replicas=2)  # the HPA's write, not yet observed
    p = plan(split(scaled, lp(BASE), {SPEC: 40, BASE: 60}, (40, 60)))
    assert p.route_map == {SPEC: 40, BASE: 60} and p.steps == () and p.settled
    pending = lp(SPEC, ready=2, replicas=4)  # observed: 2 pods Pending
    p = plan(split(pending, lp(BASE), {SPEC: 40, BASE: 60}, (40, 60)))
    assert p.route_map == {SPEC: 40, BASE: 60} and p.steps == () and p.settled


def test_a_partly_ready_new_pool_still_cannot_replace_the_old_ones() -> None:
    world = World(
        desired=(DesiredPool("m-engine", 2, "h"),),
        live={"m-engine": lp("m-engine", replicas=2, ready=1), SPEC: lp(SPEC, current=False)},
        route=True,
        live_route={"m-engine": 0, SPEC: 100},
        target_weights={"m-engine": 100},
    )
    assert plan(world).prune_pools == ()


# ------------------------------------------------------------------------------------------ webhooks


def _rendered_deployment() -> JSON:
    return with_template_hash(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": SPEC},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "sglang", "image": "a"}]}}},
        }
    )


def test_a_webhooks_template_mutation_keeps_the_template_current() -> None:
    desired = _rendered_deployment()
    live = copy.deepcopy(desired)
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "mirror.local/a"  # rewritten in our request
    live["spec"]["template"]["spec"]["containers"].append({"name": "istio-proxy"})
    live["metadata"]["managedFields"] = [{"manager": "specserve", "operation": "Apply",
                                          "fieldsV1": {"f:spec": {"f:template": {}}}}]  # fmt: skip
    assert live_pool(live, desired).template_current


def test_a_hand_edit_of_the_template_is_not_current() -> None:
    desired = _rendered_deployment()
    live = copy.deepcopy(desired)
    live["spec"]["template"]["spec"]["containers"][0]["image"] = "b"
    live["metadata"]["managedFields"] = [{"manager": "kubectl-edit", "operation": "Update",
                                          "fieldsV1": {"f:spec": {"f:template": {"f:spec": {}}}}}]  # fmt: skip
    assert not live_pool(live, desired).template_current
    assert live["metadata"]["annotations"][TEMPLATE_HASH] == template_hash(desired)


# ------------------------------------------------------------------------------------------ status and events


def observation(spec: PoolHealth, base: PoolHealth, **kw: Any) -> Observation:
    kw.setdefault("progressing", ("WaitingForPool", "waiting"))
    return Observation(generation=2, strategy=Strategy.TRAFFIC_SPLIT, mode=MINIMAL_MODE, weights=None,
                       speculative_pool=spec, baseline_pool=base, route=RouteHealth(False, None),
                       pools=(spec, base), **kw)  # fmt: skip


MINIMAL_MODE = _specserve().spec.switching.initial_mode


def test_a_failure_is_in_status_progressing_false_and_one_event_per_new_cause() -> None:
    failure = PoolFailure(reason="ImagePullBackOff", message="pod m-spec-1 container sglang: back-off")
    stuck = PoolHealth(SPEC, 1, 0, 1, True, "speculative", failure)
    first = observed_status(SpecServeStatus(), observation(stuck, PoolHealth(BASE, 1, 1, 1, True)), T0)
    (spec_pool,) = [p for p in first.pools if p.name == SPEC]
    assert spec_pool.failure is not None and spec_pool.failure.since == T0
    (progressing,) = [c for c in first.conditions if c.type == "Progressing"]
    assert (progressing.status.value, progressing.reason) == ("False", "ImagePullBackOff")
    assert "back-off" in progressing.message
    (spec_ready,) = [c for c in first.conditions if c.type == "SpeculativePoolReady"]
    assert spec_ready.reason == "ImagePullBackOff"
    assert new_failures(SpecServeStatus(), first) == (("ImagePullBackOff", f"{SPEC}: {failure.message}"),)
    again = observed_status(first, observation(stuck, PoolHealth(BASE, 1, 1, 1, True)), T1)
    assert new_failures(first, again) == ()  # the same cause: no second event
    (spec_pool,) = [p for p in again.pools if p.name == SPEC]
    assert spec_pool.failure is not None and spec_pool.failure.since == T0  # dated from when first seen
    (base_pool,) = [p for p in again.pools if p.name == BASE]
    assert base_pool.failure is None  # a healthy pool has none


def test_a_scaling_pool_keeps_the_specserve_ready() -> None:
    scaling = PoolHealth(SPEC, 4, 2, 4, True, "speculative")
    status = observed_status(
        SpecServeStatus(), observation(scaling, PoolHealth(BASE, 1, 1, 1, True), progressing=None), T0
    )
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert ready.status.value == "True"


# ------------------------------------------------------------------------------------------ autoscalers


HPA_WROTE = [{"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale",
              "fieldsV1": {"f:spec": {"f:replicas": {}}}}]  # fmt: skip


async def test_an_hpa_on_an_operator_sized_pool_is_named_and_hpas_are_listed_only_on_the_signal() -> None:
    kube = CountingKube()
    kube.put({"apiVersion": "autoscaling/v2", "kind": HORIZONTALPODAUTOSCALER.kind,
              "metadata": {"name": "spec-hpa", "namespace": "ns"},
              "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": SPEC}}})  # fmt: skip
    quiet = {"Deployment/m-spec": {"metadata": {"name": SPEC}, "spec": {"replicas": 2}}}
    assert await autoscaler_conflicts(kube, "ns", quiet, {SPEC: 2}, reported=False) == ()
    assert kube.lists == []  # no signal, nothing reported before: no LIST
    fought = {"Deployment/m-spec": {"metadata": {"name": SPEC, "managedFields": HPA_WROTE}, "spec": {"replicas": 4}}}
    (message,) = await autoscaler_conflicts(kube, "ns", fought, {SPEC: 2}, reported=False)
    assert "spec-hpa" in message and "External" in message
    # Our forced re-apply takes the field back; the report stays while the HPA exists.
    assert await autoscaler_conflicts(kube, "ns", quiet, {SPEC: 2}, reported=True) != ()
    # An External pool belongs to the autoscaler: nothing to report.
    assert await autoscaler_conflicts(kube, "ns", fought, {SPEC: None}, reported=False) == ()


async def test_an_unreadable_hpa_list_still_reports_the_writer() -> None:
    kube = FakeKube()
    kube.fail[("list", HORIZONTALPODAUTOSCALER.kind)] = KubeError(403, "forbidden")
    fought = {"Deployment/m-spec": {"metadata": {"name": SPEC, "managedFields": HPA_WROTE}, "spec": {"replicas": 4}}}
    (message,) = await autoscaler_conflicts(kube, "ns", fought, {SPEC: 2}, reported=False)
    assert "kube-controller-manager" in message


# ------------------------------------------------------------------------------------------ whole passes


async def first_rolled(kube: FakeKube, change: JSON) -> str:
    """Reconcile `change` until the first pool has rolled (drained to 0 Ready); that pool's name."""
    for _ in range(6):
        await run(kube, change, 2)
        rolled = [n for n in (SPEC, BASE) if kube.objects[("Deployment", n)]["status"].get("readyReplicas") == 0]
        if rolled:
            return rolled[0]
    raise AssertionError("no pool rolled in 6 passes")


async def test_a_stuck_pool_is_named_in_one_pass_with_one_warning() -> None:
    kube = FakeKube()
    await serving(kube)
    change = with_({"engine.memFractionStatic": 0.8})
    stuck = await first_rolled(kube, change)  # drain and roll the first pool; its new pods never come up
    labels = kube.objects[("Deployment", stuck)]["spec"]["selector"]["matchLabels"]
    bad = pod(f"{stuck}-1", waiting="ImagePullBackOff", message="no such image")
    kube.put({"apiVersion": "v1", "kind": "Pod", **{**bad, "metadata": {**bad["metadata"], "labels": labels}}})
    outcome = await run(kube, change, 2)
    assert ("ImagePullBackOff", f"{stuck}: pod {stuck}-1 container sglang: no such image") in outcome.warnings
    assert cond(kube, "Progressing")["reason"] == "ImagePullBackOff"
    other = BASE if stuck == SPEC else SPEC
    assert other in outcome.held  # contained: the other pool does not roll
    again = await run(kube, change, 2)
    assert not any(r == "ImagePullBackOff" for r, _ in again.warnings)  # once per new cause
    weights = kube.route_weights()
    assert weights[stuck] == 0 and weights[other] == 100


def test_the_deadline_passing_moves_a_pool_for_the_watch() -> None:
    recorded = [{"role": "speculative", "name": SPEC, "desired": 2, "ready": 0, "updated": 2}]
    live = {**deployment(ready=0), "metadata": {"name": SPEC, "generation": 3}}
    assert not pool_moved(recorded, live)
    live["status"]["conditions"] = [{"type": "Progressing", **DEADLINE}]
    assert pool_moved(recorded, live)  # no count changed, but the controller gave up: reconcile now
    recorded[0]["failure"] = {"reason": "ProgressDeadlineExceeded", "deadlineExceeded": True}
    assert not pool_moved(recorded, live)


async def test_unreadable_pods_keep_the_reported_cause() -> None:
    kube = FakeKube()
    kube.fail[("list", "Pod")] = KubeError(500, "etcdserver: request timed out")
    owned = {"Deployment/m-spec": {**deployment(replicas=1, ready=0), "spec": {"replicas": 1}}}
    reported = {SPEC: pool_cause(NOT_DONE, [pod(waiting="ImagePullBackOff", message="x")])}
    assert reported[SPEC] is not None
    kept = await pool_causes(kube, "ns", "m", owned, {SPEC: 1}, {k: v for k, v in reported.items() if v})
    assert kept[SPEC].reason == "ImagePullBackOff"  # unknown is not healthy
    assert await pool_causes(kube, "ns", "m", owned, {SPEC: 1}) == {}


def test_a_rollout_restart_stamp_is_no_hand_edit() -> None:
    restart = {"manager": "kubectl-rollout", "operation": "Update", "fieldsV1": {"f:spec": {"f:template": {
        "f:metadata": {"f:annotations": {"f:kubectl.kubernetes.io/restartedAt": {}}}}}}}  # fmt: skip
    assert not foreign_template_owner({"metadata": {"managedFields": [restart]}})
    edit = {"manager": "kubectl-edit", "operation": "Update",
            "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {}}}}}}  # fmt: skip
    assert foreign_template_owner({"metadata": {"managedFields": [restart, edit]}})
    ours = {"manager": "specserve", "operation": "Apply", "fieldsV1": {"f:spec": {"f:template": {"f:spec": {}}}}}
    assert not foreign_template_owner({"metadata": {"managedFields": [ours]}})

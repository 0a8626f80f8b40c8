"""R1: pods that are never created (a ResourceQuota on nvidia.com/gpu refusing them) are named in status at once.

The Deployment controller copies its ReplicaSet's `ReplicaFailure=True, reason=FailedCreate` condition; no pod exists
to say why, so before this the pool read "loading" until the progress deadline. tests/cluster/test_cluster.py shows the
same on a real control plane with a real quota."""

from __future__ import annotations

from typing import Any

from specserve.pool_state import read_pool
from specserve.reconcile.causes import pool_cause
from specserve.status import pool_moved
from tests.unit.fakekube import FakeKube
from tests.unit.test_api import with_
from tests.unit.test_reconcile import cond, run, serving
from tests.unit.test_rollout_faults import DEADLINE, SPEC, deployment, first_rolled

JSON = dict[str, Any]
QUOTA = (
    'pods "m-spec-7d9f-x2x" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=1, '
    "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
)
REFUSED = {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": QUOTA}


def refused(live: JSON, condition: JSON = REFUSED) -> JSON:
    live["status"]["conditions"] = [*live["status"].get("conditions", []), condition]
    return live


def test_the_replica_failure_condition_is_read_for_the_observed_generation_only() -> None:
    failure = read_pool(refused(deployment(ready=0))).create_failure
    assert failure is not None and failure.reason == "FailedCreate" and "exceeded quota" in failure.message
    assert read_pool(refused(deployment(ready=0), {**REFUSED, "status": "False"})).create_failure is None
    assert read_pool(deployment(ready=0)).create_failure is None
    assert read_pool(refused(deployment(ready=0, generation=4, observed=3))).create_failure is None  # stale


def test_refused_pods_are_the_cause_with_no_pod_to_read() -> None:
    cause = pool_cause(read_pool(refused(deployment(ready=0))), [])
    assert cause is not None and cause.reason == "FailedCreate" and "exceeded quota: gpu" in cause.message
    late = pool_cause(read_pool(refused(deployment(ready=0, progressing=DEADLINE))), [])
    assert late is not None and late.deadline_exceeded and "FailedCreate: " in late.message  # the deadline says why


def test_pods_refused_creation_move_a_pool_for_the_watch() -> None:
    recorded = [{"role": "speculative", "name": SPEC, "desired": 2, "ready": 0, "updated": 2}]
    live = deployment(ready=0)
    assert not pool_moved(recorded, live)
    assert pool_moved(recorded, refused(live))  # no count changed: the controller's word is news
    recorded[0]["failure"] = {"reason": "FailedCreate", "message": QUOTA}
    assert not pool_moved(recorded, live)


async def test_a_gpu_quota_is_named_in_status_in_one_pass() -> None:
    kube = FakeKube()
    await serving(kube)
    change = with_({"engine.memFractionStatic": 0.8})
    stuck = await first_rolled(kube, change)  # roll the first pool; the quota refuses its new pods
    assert cond(kube, "Progressing")["reason"] != "FailedCreate"
    refused(kube.objects[("Deployment", stuck)])
    outcome = await run(kube, change, 2)
    assert cond(kube, "Progressing")["reason"] == "FailedCreate"
    assert "exceeded quota: gpu" in cond(kube, "Progressing")["message"]
    assert any(reason == "FailedCreate" for reason, _ in outcome.warnings)

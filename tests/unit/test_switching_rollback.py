"""Which failed rolls the loop undoes (only its own changes), and what freezes the policy (only what a change
would collide with): pure functions of the SpecServe, its status and its pools."""

from __future__ import annotations

import copy
from typing import Any

from specserve.api.models import Mode, PoolFailure, PoolStatus, SpecServe, SpecServeStatus, SwitchingState, Weights
from specserve.api.validation import parse_object
from specserve.switching.pools import PoolState, converging, pool_states
from specserve.switching.rollback import failed_change

STUCK = PoolFailure(reason="ProgressDeadlineExceeded", message="timed out", deadline_exceeded=True)
PULLING = PoolFailure(reason="ImagePullBackOff", message="back-off pulling image")


def obj_of(doc: dict[str, Any], strategy: str) -> SpecServe:
    body = copy.deepcopy(doc)
    body["spec"]["strategy"] = strategy
    if strategy == "Adaptive":
        body["spec"]["switching"]["crossoverConcurrency"] = 64
    body["metadata"] = {"name": "kimi-k25", "namespace": "llm"}
    return parse_object(body)


def status(failure: PoolFailure | None, active: Mode, target: Mode, **switching: Any) -> SpecServeStatus:
    pools = [PoolStatus(role="engine", name="kimi-k25-engine", desired=1, ready=0, updated=1, failure=failure)]
    state = SwitchingState(mode=target, mode_since="1970-01-01T00:00:00Z", **switching)
    return SpecServeStatus(active_mode=active, switching=state, pools=pools)


def test_only_the_loops_own_restart_past_its_deadline_is_rolled_back(kimi_doc: dict[str, Any]) -> None:
    obj = obj_of(kimi_doc, "Restart")
    failed = failed_change(obj, status(STUCK, Mode.SPECULATIVE, Mode.BASELINE))
    assert failed is not None and (failed.serving, failed.failed) == (Mode.SPECULATIVE, Mode.BASELINE)
    assert failed.reason == "ProgressDeadlineExceeded: timed out" and failed.crossover is None
    # The pool serves the target mode: the stuck roll is the user's (a spec edit), contained, never reverted.
    assert failed_change(obj, status(STUCK, Mode.BASELINE, Mode.BASELINE)) is None
    # A cause without the deadline passed: not yet.
    assert failed_change(obj, status(PULLING, Mode.SPECULATIVE, Mode.BASELINE)) is None


def test_an_adaptive_rerender_is_rolled_back_only_while_its_rollback_point_is_kept(kimi_doc: dict[str, Any]) -> None:
    obj = obj_of(kimi_doc, "Adaptive")
    spec = Mode.SPECULATIVE
    failed = failed_change(obj, status(STUCK, spec, spec, adaptive_crossover=80.0, served_crossover=64.0))
    assert failed is not None and failed.crossover == 64.0
    assert failed_change(obj, status(STUCK, spec, spec, adaptive_crossover=80.0)) is None  # converged earlier
    # TrafficSplit decides no roll: nothing to undo.
    assert failed_change(obj_of(kimi_doc, "TrafficSplit"), status(STUCK, spec, Mode.BASELINE)) is None


def pool(desired: int, ready: int, rolling: bool) -> PoolState:
    return PoolState(
        "engine", "kimi-k25-engine", True, desired, ready, not rolling and ready >= desired, rolling=rolling
    )


def test_pending_pods_of_a_scale_up_do_not_freeze_restart_but_a_roll_does(kimi_doc: dict[str, Any]) -> None:
    obj = obj_of(kimi_doc, "Restart")
    settled = status(None, Mode.SPECULATIVE, Mode.SPECULATIVE)
    assert converging(obj, settled, (pool(4, 2, rolling=False),)) is None  # scaling 2 -> 4: not a roll
    why = converging(obj, settled, (pool(4, 2, rolling=True),))
    assert why is not None and "kimi-k25-engine rolling out (2/4 pods ready)" in why
    assert converging(obj, settled, (pool(2, 0, rolling=False),)) == "no Ready pod of kimi-k25-engine (0/2)"


def test_traffic_split_is_never_frozen_by_a_stuck_pool_or_a_route_held_elsewhere(kimi_doc: dict[str, Any]) -> None:
    obj = obj_of(kimi_doc, "TrafficSplit")
    base = status(STUCK, Mode.BASELINE, Mode.BASELINE)
    stuck = (PoolState("speculative", "kimi-k25-spec", True, 2, 0, False, rolling=True),)
    assert converging(obj, base, stuck) is None  # a stuck pool: weights between Ready pools still move
    switching = base.switching
    assert switching is not None
    target = switching.model_copy(update={"weights": Weights(speculative=40, baseline=60)})
    # The reconcile holds the route at 0/100 (draining the speculative pool to roll it): the target still moves.
    held = base.model_copy(update={"switching": target, "weights": Weights(speculative=0, baseline=100)})
    assert converging(obj, held, stuck) is None


def test_the_live_deployments_deadline_is_read_at_once_before_the_reconcile_reports_it(
    kimi_doc: dict[str, Any],
) -> None:
    obj = obj_of(kimi_doc, "Restart")
    deployment: dict[str, Any] = {
        "metadata": {"name": "kimi-k25-engine", "generation": 2},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1, "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
             "message": 'ReplicaSet "kimi-k25-engine-7d9" has timed out progressing.'}]},
    }  # fmt: skip
    states = pool_states(obj, Mode.BASELINE, {"kimi-k25-engine": deployment})
    assert states[0].stalled == 'ProgressDeadlineExceeded: ReplicaSet "kimi-k25-engine-7d9" has timed out progressing.'
    failed = failed_change(obj, status(None, Mode.SPECULATIVE, Mode.BASELINE), states)
    assert failed is not None and failed.reason == states[0].stalled
    progressing = copy.deepcopy(deployment)
    progressing["status"]["conditions"][0].update(status="True", reason="ReplicaSetUpdated")
    assert pool_states(obj, Mode.BASELINE, {"kimi-k25-engine": progressing})[0].stalled is None

"""The pools as their Deployments report them, and whether the last change has converged (pure).

Ready pods come from the Deployments (the Deployment controller's word), never from Prometheus.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specserve.api.models import ConditionStatus, Mode, SpecServe, SpecServeStatus, Strategy
from specserve.render.manifests import pools

PROGRESSING = "Progressing"  # the reconcile's rollout condition (and the Deployment controller's)
DEADLINE = "ProgressDeadlineExceeded"


@dataclass(frozen=True)
class PoolState:
    role: str
    name: str
    speculative: bool  # serves speculatively in the target mode (Restart's one pool flips with the mode)
    desired: int
    ready: int
    settled: bool  # the Deployment controller has rolled out the current template to every pod
    # the current template is rolled out (observed, every desired pod updated), Ready or not: Pending pods of a
    # scale-up are not a roll
    rolled: bool = True
    # the Deployment controller gave up on the roll: Progressing=False ProgressDeadlineExceeded ("reason: message")
    stalled: str | None = None


def pool_states(obj: SpecServe, mode: Mode, deployments: Mapping[str, Mapping[str, Any]]) -> tuple[PoolState, ...]:
    out = []
    for pool in pools(obj, mode):
        live = deployments.get(pool.name)
        if live is None:
            out.append(PoolState(pool.role, pool.name, pool.flavour.speculative, pool.replicas, 0, False))
            continue
        spec, status = live.get("spec") or {}, live.get("status") or {}
        desired = int(spec.get("replicas", pool.replicas))  # an external autoscaler may own the count
        generation = (live.get("metadata") or {}).get("generation")
        seen = generation is None or status.get("observedGeneration") in (None, generation)
        ready = int(status.get("readyReplicas") or 0)
        updated = int(status.get("updatedReplicas") or 0)
        settled = seen and ready >= desired and updated >= desired
        rolled = seen and updated >= desired
        stalled = deadline_exceeded(live)
        out.append(PoolState(pool.role, pool.name, pool.flavour.speculative, desired, ready, settled, rolled, stalled))
    return tuple(out)


def deadline_exceeded(deployment: Mapping[str, Any]) -> str | None:
    """The Deployment controller's word that the current roll ran past progressDeadlineSeconds, as
    "ProgressDeadlineExceeded: <message>" (None: progressing, or no deadline passed)."""
    for cond in (deployment.get("status") or {}).get("conditions") or []:
        if (cond.get("type"), cond.get("status"), cond.get("reason")) == (PROGRESSING, "False", DEADLINE):
            message = cond.get("message") or ""
            return f"{DEADLINE}: {message}" if message else DEADLINE
    return None


def pending_change(obj: SpecServe, status: SpecServeStatus) -> str | None:
    """What a change the loop decided still waits for (the Switching condition): the target in status.switching
    not realised yet, or the rollout of the loop's own Restart/Reconfigure still running."""
    target = status.switching
    if target is None:
        return None
    if obj.spec.strategy is Strategy.TRAFFIC_SPLIT and target.weights is not None and status.weights != target.weights:
        now = status.weights
        seen = f"{now.speculative}/{now.baseline}" if now is not None else "none"
        aim = f"{target.weights.speculative}/{target.weights.baseline}"
        return f"route weights {seen} (speculative/baseline), target {aim}"
    if obj.spec.strategy is Strategy.RESTART and status.active_mode is not None and status.active_mode != target.mode:
        return f"restarting pods into {target.mode.value} (serving {status.active_mode.value})"
    last = status.last_decision
    ours = last is not None and last.applied and last.action in ("Restart", "Reconfigure", "Rollback")
    progressing = _progressing(status)
    if ours and progressing is not None:
        return progressing
    return None


def _progressing(status: SpecServeStatus) -> str | None:
    for cond in status.conditions:
        if cond.type == PROGRESSING and cond.status == ConditionStatus.TRUE:
            return f"rollout in progress: {cond.message}"
    return None


def converging(obj: SpecServe, status: SpecServeStatus, states: tuple[PoolState, ...]) -> str | None:
    """Why the policy must not start a change now (None: it may). Only what a change would collide with freezes it:

    - TrafficSplit: nothing. The weights it decides keep following the load between Ready pools while a pool
      rolls, is stuck or failed, and while the reconcile holds the route elsewhere (draining a pool to roll it):
      the route then goes to the latest target (the sample's Ready counts keep weight off a pool without Ready
      pods; failover acts before this is even asked);
    - Restart and Adaptive: the loop's own change not realised yet (`pending_change`);
    - Restart and Adaptive (one pool, a change rolls it): a roll under way (Progressing, or a template not yet
      rolled out to every pod), or no Ready pod to read the load from. Pending pods of a scale-up do not freeze
      it: that is scaling, not rolling."""
    if obj.spec.strategy is Strategy.TRAFFIC_SPLIT:
        return None
    pending = pending_change(obj, status)
    if pending is not None:
        return pending
    progressing = _progressing(status)
    if progressing is not None:
        return progressing
    rolling = [
        f"{p.name} rolling out ({p.ready}/{p.desired} pods ready)" for p in states if p.desired > 0 and not p.rolled
    ]
    idle = [f"no Ready pod of {p.name} (0/{p.desired})" for p in states if p.desired > 0 and p.ready == 0]
    return "; ".join(rolling + idle) or None

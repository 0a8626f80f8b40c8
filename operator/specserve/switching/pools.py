"""The pools as their Deployments report them, and whether the last change has converged (pure).

Ready pods come from the Deployments (the Deployment controller's word), never from Prometheus.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specserve.api.models import ConditionStatus, Mode, SpecServe, SpecServeStatus, Strategy
from specserve.pool_state import read_pool
from specserve.render.manifests import pools

PROGRESSING = "Progressing"  # the reconcile's rollout condition


@dataclass(frozen=True)
class PoolState:
    role: str
    name: str
    speculative: bool  # serves speculatively in the target mode (Restart's one pool flips with the mode)
    desired: int
    ready: int
    # `specserve.pool_state`'s one meaning: no template roll in flight and at least one Ready pod (pods of a
    # scale-up still starting leave a serving pool settled: "scaling", not "rolling").
    settled: bool
    complete: bool = False  # settled with every wanted pod Ready
    deadline_exceeded: bool = False  # the Deployment reports ProgressDeadlineExceeded for its current spec


def pool_states(obj: SpecServe, mode: Mode, deployments: Mapping[str, Mapping[str, Any]]) -> tuple[PoolState, ...]:
    """Each pool of the target mode, read through the one Deployment reader."""
    out = []
    for pool in pools(obj, mode):
        live = deployments.get(pool.name)
        if live is None:
            out.append(PoolState(pool.role, pool.name, pool.flavour.speculative, pool.replicas, 0, False))
            continue
        counts = read_pool(live, pool.name)
        # The live count: an external autoscaler may own it (read_pool falls back to the server's default, 1).
        rendered = counts.spec_replicas if counts.spec_replicas is not None else pool.replicas
        out.append(
            PoolState(
                pool.role,
                pool.name,
                pool.flavour.speculative,
                counts.wanted(rendered),
                counts.ready,
                counts.is_settled(rendered),
                counts.is_complete(rendered),
                counts.deadline_exceeded,
            )
        )
    return tuple(out)


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
    ours = last is not None and last.applied and last.action in ("Restart", "Reconfigure")
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
    """Why the policy must not start a change now (None: the last change converged): the loop's own change
    pending, any rollout in progress, or pods not Ready."""
    pending = pending_change(obj, status) or _progressing(status)
    if pending is not None:
        return pending
    waiting = [f"{p.ready}/{p.desired} pods of {p.name} ready" for p in states if p.desired > 0 and not p.settled]
    if waiting:
        return "; ".join(waiting)
    return None

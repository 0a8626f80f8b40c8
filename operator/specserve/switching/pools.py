"""The pools as their Deployments report them, and whether the last change has converged (pure).

Ready pods come from the Deployments (the Deployment controller's word), never from Prometheus.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specserve.api.conditions import PROGRESSING
from specserve.api.models import Action, ConditionStatus, Mode, SpecServe, SpecServeStatus, Strategy
from specserve.layout import pool_layout
from specserve.pool_state import PoolCounts, read_pool


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
    # `specserve.pool_state`'s `rolling`: a template roll in flight (Pending pods of a scale-up are not a roll)
    rolling: bool = False
    # the Deployment controller gave up on the roll: Progressing=False ProgressDeadlineExceeded ("reason: message")
    stalled: str | None = None


def pool_states(obj: SpecServe, mode: Mode, deployments: Mapping[str, Mapping[str, Any]]) -> tuple[PoolState, ...]:
    """Each pool of the target mode, read through the one Deployment reader."""
    out = []
    for pool in pool_layout(obj, mode):
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
                complete=counts.is_complete(rendered),
                rolling=counts.rolling,
                stalled=_stalled(counts),
            )
        )
    return tuple(out)


def _stalled(counts: PoolCounts) -> str | None:
    """The Deployment controller's word that the current roll ran past progressDeadlineSeconds, as
    "ProgressDeadlineExceeded: <message>" (None: progressing, or no deadline passed)."""
    if not counts.deadline_exceeded or counts.progress is None:
        return None
    message = counts.progress.message
    return f"{counts.progress.reason}: {message}" if message else counts.progress.reason


def pending_change(obj: SpecServe, status: SpecServeStatus) -> str | None:
    """What a change the loop decided still waits for (the Switching condition): the target in status.switching
    not realised yet, or the rollout of the loop's own Restart/Reconfigure still running."""
    target = status.switching
    if target is None:
        return None
    lag = route_lag(obj, status)
    if lag is not None:
        return lag
    if obj.spec.strategy is Strategy.RESTART and status.active_mode is not None and status.active_mode != target.mode:
        return f"restarting pods into {target.mode.value} (serving {status.active_mode.value})"
    last = status.last_decision
    ours = last is not None and last.applied and last.action in (Action.RESTART, Action.RECONFIGURE, Action.ROLLBACK)
    progressing = _progressing(status)
    if ours and progressing is not None:
        return progressing
    return None


def route_lag(obj: SpecServe, status: SpecServeStatus) -> str | None:
    """TrafficSplit: the route's weights (as the reconcile reports them) short of the target in status.switching."""
    target = status.switching
    if obj.spec.strategy is not Strategy.TRAFFIC_SPLIT or target is None or target.weights is None:
        return None
    if status.weights == target.weights:
        return None
    now = status.weights
    seen = f"{now.speculative}/{now.baseline}" if now is not None else "none"
    aim = f"{target.weights.speculative}/{target.weights.baseline}"
    return f"route weights {seen} (speculative/baseline), target {aim}"


def switching_wait(obj: SpecServe, before: SpecServeStatus, after: SpecServeStatus) -> str | None:
    """What the Switching condition names after this evaluation (None: Stable). A route move decided by this very
    evaluation is not named yet: the reconcile it triggers moves the route within the round, and naming it would
    cost two status writes per weight move (Converging now, Stable at the next evaluation) for a state that lasts
    well under one interval. It is named from the next evaluation on if the route still lags then (the previous
    target not realised for a whole interval), and a lag already under way stays named with the new target."""
    if route_lag(obj, after) is not None and pending_change(obj, before) is None:
        return None
    return pending_change(obj, after)


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
        f"{p.name} rolling out ({p.ready}/{p.desired} pods ready)" for p in states if p.desired > 0 and p.rolling
    ]
    idle = [f"no Ready pod of {p.name} (0/{p.desired})" for p in states if p.desired > 0 and p.ready == 0]
    return "; ".join(rolling + idle) or None

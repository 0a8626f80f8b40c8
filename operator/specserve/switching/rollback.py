"""Whether the loop's own last change failed to roll out (pure): a pool's Deployment reports Progressing=False
ProgressDeadlineExceeded (read by the loop this round, or reported by the reconcile in status.pools[].failure
with `deadlineExceeded`) while that change is still in flight.

Only a change the loop decided is undone: Restart's target mode (status.switching.mode, written only by the loop)
differing from the mode actually serving (status.activeMode), or Adaptive's re-rendered crossover while the
rollback point (status.switching.servedCrossover) is kept. A roll the user caused (a spec edit) leaves both
untouched, so it is never reverted here: the reconcile contains it instead.
"""

from __future__ import annotations

from specserve.api.models import PoolFailure, SpecServe, SpecServeStatus, Strategy
from specserve.policy.rollback import Failed
from specserve.switching.pools import PoolState


def deadline_failure(status: SpecServeStatus, pools: tuple[PoolState, ...] = ()) -> str | None:
    """Why a pool's roll ran past its progress deadline ("reason: message"): the live Deployment's word (read
    this round), else the reconcile's report in status.pools."""
    stalled = next((p.stalled for p in pools if p.stalled is not None), None)
    if stalled is not None:
        return stalled
    failure = next((p.failure for p in status.pools if p.failure is not None and p.failure.deadline_exceeded), None)
    return _worded(failure) if failure is not None else None


def _worded(failure: PoolFailure) -> str:
    return f"{failure.reason}: {failure.message}" if failure.message else failure.reason


def failed_change(obj: SpecServe, status: SpecServeStatus, pools: tuple[PoolState, ...] = ()) -> Failed | None:
    switching = status.switching
    why = deadline_failure(status, pools)
    if switching is None or why is None:
        return None
    strategy = obj.spec.strategy
    if strategy is Strategy.RESTART and status.active_mode is not None and status.active_mode != switching.mode:
        return Failed(serving=status.active_mode, failed=switching.mode, reason=why)
    if (
        strategy is Strategy.ADAPTIVE
        and switching.served_crossover is not None
        and switching.served_crossover != switching.adaptive_crossover
    ):
        return Failed(serving=switching.mode, failed=switching.mode, reason=why, crossover=switching.served_crossover)
    return None

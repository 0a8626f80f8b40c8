"""Whether the loop's own last change failed to roll out (pure): status says so when a pool's failure has
`deadline_exceeded` (the reconcile reads the Deployment's Progressing=False ProgressDeadlineExceeded) while
that change is still in flight.

Only a change the loop decided is undone: Restart's target mode (status.switching.mode, written only by the loop)
differing from the mode actually serving (status.activeMode), or Adaptive's re-rendered crossover while the
rollback point (status.switching.servedCrossover) is kept. A roll the user caused (a spec edit) leaves both
untouched, so it is never reverted here: the reconcile contains it instead.
"""

from __future__ import annotations

from specserve.api.models import PoolFailure, SpecServe, SpecServeStatus, Strategy
from specserve.policy.rollback import Failed


def deadline_failure(status: SpecServeStatus) -> PoolFailure | None:
    """The first pool whose roll ran past its progress deadline."""
    return next((p.failure for p in status.pools if p.failure is not None and p.failure.deadline_exceeded), None)


def failed_change(obj: SpecServe, status: SpecServeStatus) -> Failed | None:
    switching = status.switching
    failure = deadline_failure(status)
    if switching is None or failure is None:
        return None
    why = f"{failure.reason}: {failure.message}" if failure.message else failure.reason
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

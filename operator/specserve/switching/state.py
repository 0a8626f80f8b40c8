"""PolicyState <-> status.switching (pure). Times are epoch seconds in the policy, RFC3339 in status (UTC, to
the millisecond, so a round trip is exact at that resolution)."""

from __future__ import annotations

from dataclasses import replace

from specserve import clock
from specserve.api.models import Action, ModeBar, PendingKind, PendingMove, SpecServe, SpecServeStatus, SwitchingState
from specserve.clock import epoch
from specserve.policy.forecast import trust
from specserve.policy.switching import initial_state
from specserve.policy.types import Bar, Pending, PolicyState


def status_time(t: float) -> str:
    """A status time: to the millisecond."""
    return clock.rfc3339(t, digits=3)


def _opt(text: str | None) -> float | None:
    return epoch(text) if text is not None else None


def _ms(t: float | None) -> float | None:
    return round(t, 3) if t is not None else None


def pending_out(pending: Pending | None) -> PendingMove | None:
    if pending is None:
        return None
    return PendingMove(
        kind=pending.kind.value,
        since=status_time(pending.since) if pending.since is not None else None,
        speculative_weight=pending.weight,
        action=pending.action.value if pending.action is not None else None,
        mode=pending.mode,
        adaptive_crossover=pending.crossover,
    )


def _pending_in(saved: PendingMove | None) -> Pending | None:
    if saved is None:
        return None
    return Pending(
        kind=PendingKind(saved.kind),
        since=_opt(saved.since),
        weight=saved.speculative_weight,
        action=Action(saved.action) if saved.action is not None else None,
        mode=saved.mode,
        crossover=saved.adaptive_crossover,
    )


def to_status(state: PolicyState) -> SwitchingState:
    return SwitchingState(
        mode=state.mode,
        mode_since=status_time(state.mode_since),
        weights=state.weights,
        last_switch=status_time(state.last_switch) if state.last_switch is not None else None,
        regret=state.regret,
        restarts=[status_time(t) for t in state.restarts],
        pending=pending_out(state.pending),
        unknown_streak=state.unknown_streak,
        last_evaluation=status_time(state.last_evaluation) if state.last_evaluation is not None else None,
        adaptive_crossover=state.adaptive_crossover,
        served_crossover=state.served_crossover,
        barred=[
            ModeBar(mode=b.mode, until=status_time(b.until), failures=b.failures, reason=b.reason) for b in state.barred
        ],
        **forecast_out(state.forecast_error),
    )


def forecast_out(error: float | None) -> dict[str, float]:
    """Restart's forecast quality and the trust it earns (policy.forecast), rounded: status, not a ledger."""
    if error is None:
        return {}
    return {"forecast_error": round(min(max(error, 0.0), 1.0), 4), "forecast_trust": round(trust(error), 4)}


def from_status(saved: SwitchingState) -> PolicyState:
    return PolicyState(
        mode=saved.mode,
        mode_since=epoch(saved.mode_since),
        weights=saved.weights,
        last_switch=_opt(saved.last_switch),
        regret=saved.regret,
        restarts=tuple(epoch(t) for t in saved.restarts),
        pending=_pending_in(saved.pending),
        unknown_streak=saved.unknown_streak,
        last_evaluation=_opt(saved.last_evaluation),
        adaptive_crossover=saved.adaptive_crossover,
        served_crossover=saved.served_crossover,
        barred=tuple(Bar(b.mode, epoch(b.until), b.failures, b.reason) for b in saved.barred),
        forecast_error=saved.forecast_error,  # the trust is derived from it
    )


def first_state(obj: SpecServe, status: SpecServeStatus, now: float) -> PolicyState:
    """Before the first decision: what the reconcile serves now (spec.switching.initialMode and its weights)."""
    return initial_state(obj, obj.spec.switching.initial_mode, now)


def resume(obj: SpecServe, status: SpecServeStatus, now: float) -> PolicyState:
    """The policy's state as status keeps it (an operator restarted mid-switch resumes from here)."""
    if status.switching is None:
        return first_state(obj, status, now)
    return from_status(status.switching)


def material(state: PolicyState) -> PolicyState:
    """The part of the state worth an API write on its own. The evaluation time and the unknown streak change
    every round and live in memory between decisions; regret is written with them (see `worth_writing`)."""
    return PolicyState(
        mode=state.mode,
        mode_since=round(state.mode_since, 3),
        weights=state.weights,
        last_switch=round(state.last_switch, 3) if state.last_switch is not None else None,
        restarts=tuple(round(t, 3) for t in state.restarts),
        pending=replace(state.pending, since=_ms(state.pending.since)) if state.pending is not None else None,
        adaptive_crossover=state.adaptive_crossover,
        served_crossover=state.served_crossover,
        barred=tuple(replace(b, until=round(b.until, 3)) for b in state.barred),
    )


REGRET_STEP = 0.25  # regret is persisted when it moved by more than this fraction since last written


def worth_writing(saved: PolicyState, new: PolicyState) -> bool:
    """Whether a new state must reach status: a material change, or regret grown by REGRET_STEP (a geometric
    rule: while regret accumulates, writes get rarer; an operator restart loses at most that fraction)."""
    if material(saved) != material(new) or forecast_moved(saved, new):
        return True
    moved = abs(new.regret - saved.regret)
    return moved > 0 and moved > REGRET_STEP * max(abs(saved.regret), abs(new.regret))


FORECAST_STEP = 0.05  # the forecast's error is persisted when it moved by more than this (absolute)


def forecast_moved(saved: PolicyState, new: PolicyState) -> bool:
    """Whether Restart's forecast error changed enough to show (and to survive an operator restart): first
    scored, or moved by FORECAST_STEP. An hourly-weighted mean moves slowly: a write every several minutes at most."""
    if saved.forecast_error is None or new.forecast_error is None:
        return saved.forecast_error != new.forecast_error
    return abs(new.forecast_error - saved.forecast_error) > FORECAST_STEP

"""Undoing the policy's own failed change (pure): a Restart into the other mode, or an Adaptive re-render, whose
roll ran past the Deployment's progress deadline is rolled back to what served before it, and what failed is
barred for a back-off: BAR_BASE after the first failure, doubling with each consecutive one, capped at BAR_CAP
(10 min, 20 min, 40 min ... 6 h). After the bar expires the policy may try again; a change made after it that
converges lifts the bar (the count of failures starts over). A change the user made is never undone here: the
caller only asks for a rollback of a change the policy decided (see switching.rollback).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specserve.api.models import Mode, Rule
from specserve.policy.types import Action, Bar, PolicyState, Verdict

BAR_BASE = 600.0  # seconds barred after the first failure
BAR_CAP = 6 * 3600.0  # the longest bar
MAX_BARS = 3  # status.switching.barred holds at most this many (one per mode in practice)


def backoff(failures: int) -> float:
    """Seconds barred after `failures` consecutive failed rolls into a mode."""
    return min(BAR_CAP, BAR_BASE * 2.0 ** max(failures - 1, 0))


def with_bar(bars: tuple[Bar, ...], mode: Mode, now: float, reason: str) -> tuple[Bar, ...]:
    """The bars after one more failed roll into `mode`."""
    previous = next((b for b in bars if b.mode is mode), None)
    failures = previous.failures + 1 if previous is not None else 1
    bar = Bar(mode=mode, until=now + backoff(failures), failures=failures, reason=reason)
    return (*(b for b in bars if b.mode is not mode), bar)[-MAX_BARS:]


def active_bar(bars: tuple[Bar, ...], mode: Mode, now: float) -> Bar | None:
    """The bar that forbids changing into `mode` now, if any."""
    return next((b for b in bars if b.mode is mode and now < b.until), None)


def lifted(state: PolicyState, now: float) -> tuple[Bar, ...]:
    """The bars once the last change has converged: a bar whose time is over and after which a change was made
    (and converged: the caller asks only then) is lifted, so the next failure starts the back-off over."""
    if not state.barred or state.last_switch is None:
        return state.barred
    return tuple(b for b in state.barred if not (now >= b.until and state.last_switch >= b.until))


def converged(state: PolicyState, now: float) -> PolicyState:
    """The state once the last change rolled out: no rollback point kept, expired bars lifted (see `lifted`)."""
    bars = lifted(state, now)
    if bars == state.barred and state.served_crossover is None:
        return state
    return replace(state, barred=bars, served_crossover=None)


@dataclass(frozen=True)
class Failed:
    """The policy's own change that failed to roll out, as the switching loop found it in status."""

    serving: Mode  # the mode that served before the change (status.activeMode), the rollback target
    failed: Mode  # the mode the change rolled into (Adaptive: the same mode, a different config)
    reason: str  # the pool's failure, worded for users (reason: message)
    crossover: float | None = None  # Adaptive: the crossover of the config that served (None: a Restart)


def rollback(state: PolicyState, failure: Failed, now: float) -> Verdict:
    """The verdict that undoes a failed change: back to what served, the failed mode barred, the restart counted
    (pods roll again). It acts whatever the load, the dwell or the restart budget say: the pool is off the air."""
    bars = with_bar(state.barred, failure.failed, now, failure.reason)
    bar = next(b for b in bars if b.mode is failure.failed)
    wait = f"barred for {backoff(bar.failures):.0f} s (failure {bar.failures})"
    if failure.crossover is not None:
        changed = replace(
            state, adaptive_crossover=failure.crossover, served_crossover=None, last_switch=now, barred=bars,
            pending=None, last_evaluation=now,
        )  # fmt: skip
        why = (
            f"rollback: the re-rendered adaptive config (crossover {state.adaptive_crossover}) did not roll out "
            f"({failure.reason}): back to crossover {failure.crossover:g}; re-rendering {wait}"
        )
    else:
        changed = replace(
            state, mode=failure.serving, mode_since=now, last_switch=now, regret=0.0, barred=bars,
            restarts=(*state.restarts, now), pending=None, last_evaluation=now,
        )  # fmt: skip
        why = (
            f"rollback: the restart into {failure.failed} did not roll out ({failure.reason}): back to "
            f"{failure.serving}, which served; {failure.failed} {wait}"
        )
    return Verdict(
        state=changed,
        action=Action.ROLLBACK,
        mode=changed.mode,
        weights=changed.weights,
        reason=why,
        adaptive_crossover=changed.adaptive_crossover,
        rule=Rule.ROLLBACK,
    )

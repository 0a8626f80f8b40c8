"""A verdict and a reading -> the status the switching loop writes (pure): status.switching, lastDecision,
a bounded history, the load snapshot, and the MetricsAvailable and Switching conditions.

Steady state writes nothing: every field here only changes when something worth telling changed. The load
snapshot is refreshed with each decision, when it turns known, when it turns unknown and that is named (with
MetricsAvailable=False, in the same write), or when demand has moved materially
(LOAD_RELATIVE and LOAD_ABSOLUTE) and the snapshot is LOAD_REFRESH_SECONDS old: a demand that moves every round
would otherwise cost a status write per SpecServe per evaluation (200 SpecServes on a real API server: rounds of
7-31 s instead of 2, docs/chaos-soak.md). Condition messages carry no moving numbers for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specserve.api import reasons
from specserve.api.conditions import METRICS_AVAILABLE, SWITCHING, find_condition
from specserve.api.models import (
    HISTORY_LIMIT,
    Action,
    ConditionStatus,
    Decision,
    LoadSnapshot,
    Mode,
    PoolLoad,
    SpecServeStatus,
)
from specserve.clock import epoch
from specserve.metrics.promql import SELECTOR_FIELD
from specserve.metrics.signal import Reading
from specserve.policy.pause import PAUSED_MESSAGE
from specserve.policy.types import PolicyState, PoolSignal, Verdict
from specserve.status import set_condition
from specserve.switching.state import status_time, to_status

FAILURE_THRESHOLD = 3  # consecutive unknown evaluations before MetricsAvailable turns False
# Readings that are a defect, not a gap: a count no deployment produces, an evaluation that raised, a query Prometheus
# refused. Another scrape does not cure them, so waiting out FAILURE_THRESHOLD only delays the name (on a loop whose
# rounds run long, by several rounds); they are named at the first evaluation that reads them.
NAMED_AT_ONCE = frozenset({reasons.IMPLAUSIBLE_READING, reasons.EVALUATION_FAILED, reasons.QUERY_REFUSED})


def named(reading: Reading, streak: int) -> bool:
    """Whether the unknown load is named in MetricsAvailable now: a defect at once, a gap after FAILURE_THRESHOLD
    unknown evaluations in a row."""
    if reading.reason is None:
        return False
    return streak >= (1 if reading.reason in NAMED_AT_ONCE else FAILURE_THRESHOLD)


LOAD_RELATIVE = 0.10
LOAD_ABSOLUTE = 1.0
LOAD_REFRESH_SECONDS = 30.0  # the least age of a snapshot that a load-only move refreshes


def decision(verdict: Verdict, from_mode: Mode, now: float) -> Decision:
    return Decision(
        time=status_time(now),
        from_mode=from_mode,
        to_mode=verdict.mode,
        reason=verdict.reason,
        concurrency=round(verdict.demand, 2) if verdict.demand is not None else None,
        applied=verdict.applied,
        action=verdict.action.value,
        weights=verdict.weights,
        rule=verdict.rule if verdict.action is not Action.HOLD else None,
    )


def is_new(verdict: Verdict, last: Decision | None) -> bool:
    """Worth a history entry: a change, or (advisory) a recommendation that differs from the last one recorded.
    An advisory verdict repeats every round because nothing acts on it; it is recorded once."""
    if verdict.action is Action.HOLD:
        return False
    if verdict.applied:
        return True
    return last is None or (last.action, last.to_mode, last.weights, last.applied) != (
        verdict.action.value,
        verdict.mode,
        verdict.weights,
        False,
    )


def with_decision(status: SpecServeStatus, entry: Decision) -> SpecServeStatus:
    history = [*status.history, entry][-HISTORY_LIMIT:]
    return status.model_copy(update={"last_decision": entry, "history": history})


def _round(value: float | None, digits: int = 2) -> float | None:
    return round(value, digits) if value is not None else None


def pool_load(pool: Literal["speculative", "baseline"], signal: PoolSignal) -> PoolLoad:
    return PoolLoad(
        pool=pool,
        ready=signal.ready_replicas,
        running=_round(signal.running),
        queued=_round(signal.queued),
        tokens_per_second=_round(signal.tokens_per_second, 1),
        ttft_p99_seconds=_round(signal.ttft_p99, 3),
        tpot_p99_seconds=_round(signal.tpot_p99, 4),
        accept_length=_round(signal.accept_length),
        spec_num_steps=_round(signal.spec_num_steps),
    )


def load_snapshot(reading: Reading, now: float) -> LoadSnapshot:
    """Demand and per-pool load; written with decisions or when demand moves (see `load_moved`), so the per-pool
    numbers are those of the last such moment, not of every evaluation."""
    sample = reading.sample
    pools = [p for p in (sample.speculative, sample.baseline) if p is not None]
    queued = [p.queued for p in pools if p.queued is not None]
    per_pool = [pool_load("speculative", sample.speculative)] if sample.speculative is not None else []
    per_pool += [pool_load("baseline", sample.baseline)] if sample.baseline is not None else []
    return LoadSnapshot(
        concurrency=_round(sample.demand),
        queued=round(sum(queued), 2) if queued and sample.demand is not None else None,
        time=status_time(now),
        pools=per_pool,
    )


def load_moved(old: LoadSnapshot | None, new: LoadSnapshot) -> bool:
    if old is None:
        return True
    if (old.concurrency is None) != (new.concurrency is None):
        return True
    if old.concurrency is None or new.concurrency is None:
        return False
    delta = abs(new.concurrency - old.concurrency)
    return delta >= LOAD_ABSOLUTE and delta > LOAD_RELATIVE * max(old.concurrency, new.concurrency)


def load_due(old: LoadSnapshot | None, new: LoadSnapshot, named: bool) -> bool:
    """Whether a load-only change reaches status: a turn to known at once; a turn to unknown once it is `named`
    (written with MetricsAvailable=False, one write; an outage shorter than FAILURE_THRESHOLD evaluations writes
    nothing, and the snapshot keeps its time, so it reads as old, not as current); a material move once the
    snapshot is LOAD_REFRESH_SECONDS old (an unreadable time counts as old)."""
    if not load_moved(old, new):
        return False
    if old is None:
        return True
    if (old.concurrency is None) != (new.concurrency is None):
        return new.concurrency is not None or named
    if old.time is None or new.time is None:
        return True
    try:
        return epoch(new.time) - epoch(old.time) >= LOAD_REFRESH_SECONDS
    except ValueError:
        return True


@dataclass(frozen=True)
class Source:
    """Where the load is read, for condition messages."""

    description: str  # e.g. "Prometheus at http://prometheus:9090" or "the pods' /metrics"
    selector_override: bool = False


def metrics_condition(
    status: SpecServeStatus, reading: Reading, streak: int, source: Source, generation: int | None, now: str
) -> SpecServeStatus:
    """True when demand is known; False once the unknown load is `named` (a defect at once, a gap after
    FAILURE_THRESHOLD unknown rounds in a row), naming the reason and the query (and the field to fix when
    Prometheus refused a seriesSelector query); else left as it was."""
    if reading.reason is None:
        cond = (ConditionStatus.TRUE, reasons.READING, f"load read from {source.description}")
    elif named(reading, streak):
        message = f"{reading.sample.error} (query: {reading.query})" if reading.query else str(reading.sample.error)
        if reading.reason == reasons.QUERY_REFUSED and source.selector_override and SELECTOR_FIELD not in message:
            message += f"; fix {SELECTOR_FIELD}"
        message += f"; {streak} evaluation(s) in a row without load: no switch until it is read again"
        cond = (ConditionStatus.FALSE, reading.reason, message)
    else:
        return status
    old = find_condition(status.conditions, METRICS_AVAILABLE)
    if old is not None and (old.status, old.reason) == cond[:2] and cond[0] == ConditionStatus.FALSE:
        # The streak count moves every round: keep the first message rather than write every round.
        return status
    conditions = set_condition(status.conditions, METRICS_AVAILABLE, *cond, generation, now)
    return status.model_copy(update={"conditions": conditions})


def switching_condition(
    status: SpecServeStatus,
    converging: str | None,
    state: PolicyState,
    generation: int | None,
    now: str,
    paused: bool = False,
) -> SpecServeStatus:
    """True while a change converges (the reconcile has not realised the target yet), with what it waits for;
    False with reason Paused while the pause annotation holds switching."""
    if converging is not None:
        cond = (ConditionStatus.TRUE, reasons.CONVERGING, converging)
    elif paused:
        cond = (ConditionStatus.FALSE, reasons.PAUSED, PAUSED_MESSAGE)
    else:
        cond = (ConditionStatus.FALSE, reasons.STABLE, f"serving {state.mode.value}")
    conditions = set_condition(status.conditions, SWITCHING, *cond, generation, now)
    return status.model_copy(update={"conditions": conditions})


def with_state(status: SpecServeStatus, state: PolicyState) -> SpecServeStatus:
    return status.model_copy(update={"switching": to_status(state)})


def became_unavailable(before: SpecServeStatus, after: SpecServeStatus) -> str | None:
    """The message when MetricsAvailable just turned False (one Warning event per outage)."""
    old = find_condition(before.conditions, METRICS_AVAILABLE)
    new = find_condition(after.conditions, METRICS_AVAILABLE)
    if new is not None and new.status == ConditionStatus.FALSE and (old is None or old.status != new.status):
        return new.message
    return None

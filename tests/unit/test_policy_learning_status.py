"""The live curves in the switching loop: status.learning round-trips (an operator restart resumes the
evidence), writes are throttled, a drift fires the CurveDrift condition, and the status stays bounded."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

from specserve.api.conditions import CURVE_DRIFT
from specserve.api.curves import Curve
from specserve.api.models import LearningStatus, Mode, SpecServeStatus, Strategy
from specserve.objects import Remembered
from specserve.policy.curves import ModeCurves
from specserve.policy.learning import CONFIDENT, MAX_GRID, coverage, start
from specserve.policy.types import PoolSignal, Sample
from specserve.switching.learning import (
    drift_condition,
    from_status,
    learning_round,
    persist_seconds,
    to_status,
)
from tests.unit.test_policy_learning import CALIBRATED


def sample(t: float, tokens_per_replica: float, running: float = 4.0, ready: int = 2) -> Sample:
    pool = PoolSignal(ready_replicas=ready, running=running * ready, tokens_per_second=tokens_per_replica * ready)
    return Sample(t, running * ready, speculative=pool)


def drive(
    factor: float, rounds: int, t0: float = 0.0, memory: Remembered | None = None, saved: LearningStatus | None = None
) -> tuple[Remembered, LearningStatus | None, list[float], list[str]]:
    """Rounds as the loop runs them: memory between rounds, status written when the round says so."""
    writes: list[float] = []
    drifts: list[str] = []
    for i in range(rounds):
        t = t0 + i * 15.0
        done = learning_round(
            memory,
            saved,
            CALIBRATED,
            sample(t, CALIBRATED.speculative.at(4.0) * factor),
            Strategy.TRAFFIC_SPLIT,
            settled=True,
            interval=15.0,
        )
        if done.write is not None:
            saved = done.write
            writes.append(t)
        memory = Remembered(done.round.learning, saved.last_update if saved is not None else None)
        drifts += [d.mode.value for d in done.round.drifts]
    assert memory is not None
    return memory, saved, writes, drifts


def test_status_round_trip_resumes_the_evidence() -> None:
    memory, saved, _, _ = drive(0.8, 80)
    assert saved is not None
    fresh = to_status(CALIBRATED, memory.learning, memory.learning.updated or 0.0)
    back = from_status(LearningStatus.model_validate(json.loads(fresh.model_dump_json(by_alias=True))), CALIBRATED)
    assert coverage(back, Mode.SPECULATIVE) == coverage(memory.learning, Mode.SPECULATIVE) is not None
    point = next(p for p in fresh.speculative.points if p.concurrency == 4.0)
    assert point.confidence >= CONFIDENT
    assert abs(point.learned / (CALIBRATED.speculative.at(4.0) * 0.8) - 1) < 0.03
    assert fresh.crossover.calibrated is not None
    assert len(fresh.speculative.points) <= MAX_GRID
    assert len(fresh.model_dump_json()) < 4000  # bounded whatever the run's length


def test_writes_are_throttled_and_an_operator_restart_loses_at_most_one_period() -> None:
    memory, saved, writes, _ = drive(0.8, 120)  # 30 minutes
    assert writes[0] == 0.0
    gaps = [b - a for a, b in itertools.pairwise(writes)]
    assert gaps and min(gaps) >= persist_seconds(15.0) == 300.0
    assert len(writes) <= 1 + 120 * 15.0 / 300.0
    # A restarted operator has no memory: it resumes from status, confident where the memory was.
    resumed = learning_round(
        None, saved, CALIBRATED, sample(1800.0, 0.0, running=0.0), Strategy.TRAFFIC_SPLIT, settled=True, interval=15.0
    )
    assert coverage(resumed.round.learning, Mode.SPECULATIVE) == coverage(memory.learning, Mode.SPECULATIVE)


def test_a_drift_writes_at_once_and_sets_the_condition() -> None:
    memory, saved, _, drifts = drive(1.0, 60)
    assert drifts == []
    memory, saved2, _, drifts = drive(0.6, 40, t0=900.0, memory=memory, saved=saved)
    assert drifts == ["Speculative"]
    assert saved2 is not None and saved2.last_drift is not None and saved2.last_drift.shift < 0
    status = SpecServeStatus()
    done = learning_round(
        memory,
        saved2,
        CALIBRATED,
        sample(2000.0, 0.0, running=0.0),
        Strategy.TRAFFIC_SPLIT,
        settled=True,
        interval=15.0,
    )
    cond = next(c for c in done.apply(status, 3, 2000.0).conditions if c.type == CURVE_DRIFT)
    assert cond.reason in ("Relearning", "Relearned")
    quiet = learning_round(None, None, CALIBRATED, sample(0.0, 1.0, running=0.0), Strategy.TRAFFIC_SPLIT, True, 15.0)
    cond = next(c for c in quiet.apply(status, 3, 0.0).conditions if c.type == CURVE_DRIFT)
    assert (cond.status, cond.reason) == ("False", "NoDrift")


def test_an_accept_length_moved_from_the_calibrated_one_is_named_in_the_drift_condition() -> None:
    """The H200's drift half: the accept length fell from 3.98 to 1.66, the whole speculative curve with it; no
    residual fires the drift test (the accept scale explains the fall), so only this rule names it."""
    moved = replace(start(CALIBRATED), accept_reference=3.98, accept_recent=1.66)
    cond = next(c for c in drift_condition(SpecServeStatus(), moved, 3, 0.0).conditions if c.type == CURVE_DRIFT)
    assert (cond.status, cond.reason) == ("True", "AcceptLengthMoved")
    # The message holds no live numbers: another reading of the same state writes nothing.
    again = replace(moved, accept_recent=1.7)
    cond2 = next(c for c in drift_condition(SpecServeStatus(), again, 3, 0.0).conditions if c.type == CURVE_DRIFT)
    assert cond2.message == cond.message
    near = replace(moved, accept_recent=3.6)
    cond = next(c for c in drift_condition(SpecServeStatus(), near, 3, 0.0).conditions if c.type == CURVE_DRIFT)
    assert (cond.status, cond.reason) == ("False", "NoDrift")


def test_a_roll_in_flight_teaches_nothing() -> None:
    done = learning_round(None, None, CALIBRATED, sample(0.0, 1.0), Strategy.RESTART, settled=False, interval=15.0)
    assert all(p.weight == 0 for p in done.round.learning.speculative.points)
    assert done.curves == CALIBRATED


def test_new_calibrated_curves_start_learning_afresh() -> None:
    _, saved, _, _ = drive(0.8, 80)
    assert saved is not None
    recal = ModeCurves(speculative=Curve.from_points([(1.0, 10.0), (3.0, 30.0)]), baseline=CALIBRATED.baseline)
    assert coverage(from_status(saved, recal), Mode.SPECULATIVE) is None

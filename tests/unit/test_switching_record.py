"""Decisions into status: bounded history, advisory recorded once, the load snapshot rule, the conditions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specserve.api import reasons
from specserve.api.models import (
    HISTORY_LIMIT,
    ConditionStatus,
    LoadSnapshot,
    Mode,
    Rule,
    SpecServeStatus,
    Weights,
)
from specserve.metrics.signal import Reading
from specserve.policy.types import Action, PolicyState, PoolSignal, Sample, Verdict
from specserve.switching.record import (
    FAILURE_THRESHOLD,
    Source,
    became_unavailable,
    decision,
    is_new,
    load_due,
    load_moved,
    load_snapshot,
    metrics_condition,
    named,
    with_decision,
)

STATE = PolicyState(mode=Mode.BASELINE, mode_since=0.0, weights=Weights(speculative=0, baseline=100))
W = Weights(speculative=25, baseline=75)


def verdict(action: Action = Action.SET_WEIGHTS, applied: bool = True) -> Verdict:
    rule = Rule.SPLIT if action is not Action.HOLD else Rule.HOLD
    return Verdict(STATE, action, Mode.BASELINE, W, "demand 31.0 > crossover", applied=applied, demand=31.04, rule=rule)


def test_a_decision_records_from_to_action_weights_and_demand() -> None:
    entry = decision(verdict(), Mode.SPECULATIVE, 1_800_000_000.0)
    assert (entry.from_mode, entry.to_mode, entry.action, entry.weights) == (
        Mode.SPECULATIVE, Mode.BASELINE, "SetWeights", W
    )  # fmt: skip
    assert entry.concurrency == 31.04 and entry.time == "2027-01-15T08:00:00Z" and entry.applied
    assert entry.rule is Rule.SPLIT


def test_a_decision_names_its_rule_and_a_hold_none() -> None:
    failover = replace(verdict(), rule=Rule.FAILOVER)
    assert decision(failover, Mode.SPECULATIVE, 0.0).rule is Rule.FAILOVER
    assert decision(verdict(Action.HOLD), Mode.BASELINE, 0.0).rule is None


def test_history_keeps_the_last_entries_only() -> None:
    status = SpecServeStatus()
    for i in range(HISTORY_LIMIT + 5):
        status = with_decision(status, decision(verdict(), Mode.BASELINE, float(i)))
    assert len(status.history) == HISTORY_LIMIT
    assert status.history[-1] == status.last_decision
    assert status.history[0].time == "1970-01-01T00:00:05Z"


def test_hold_is_never_recorded_and_advisory_only_once() -> None:
    assert not is_new(verdict(Action.HOLD), None)
    assert is_new(verdict(), None)
    advised = verdict(applied=False)
    assert is_new(advised, None)
    recorded = decision(advised, Mode.BASELINE, 0.0)
    assert not is_new(advised, recorded)  # the same recommendation again: not a new entry
    assert is_new(verdict(), recorded)  # an applied change always is


def test_load_snapshot_moves_on_one_request_and_ten_percent() -> None:
    old = LoadSnapshot(concurrency=20.0)
    assert not load_moved(old, LoadSnapshot(concurrency=21.5))  # 1.5 requests but 7%
    assert load_moved(old, LoadSnapshot(concurrency=23.0))
    assert not load_moved(LoadSnapshot(concurrency=2.0), LoadSnapshot(concurrency=2.8))  # 40% but < 1 request
    assert load_moved(old, LoadSnapshot(concurrency=None))  # turned unknown
    assert load_moved(None, LoadSnapshot(concurrency=None))


def test_snapshot_sums_queued_over_pools() -> None:
    sample = Sample(0.0, 12.0, PoolSignal(1, running=8, queued=1), PoolSignal(1, running=2, queued=1))
    snap = load_snapshot(Reading(sample), 0.0)
    assert (snap.concurrency, snap.queued) == (12.0, 2.0)


def test_metrics_unavailable_only_after_the_threshold_and_then_stable() -> None:
    unknown = Reading(Sample(0.0, None, error="Prometheus at p unreachable"), reasons.QUERY_FAILED, "sum(x)")
    source = Source("Prometheus at p")
    status = SpecServeStatus()
    assert metrics_condition(status, unknown, 2, source, 1, "t0") == status  # two failures: left as it was
    down = metrics_condition(status, unknown, 3, source, 1, "t1")
    cond = down.conditions[-1]
    assert (cond.status, cond.reason) == (ConditionStatus.FALSE, "QueryFailed")
    assert "Prometheus at p unreachable (query: sum(x))" in cond.message
    assert became_unavailable(status, down) == cond.message
    assert metrics_condition(down, unknown, 9, source, 1, "t2") == down  # the streak moving writes nothing
    assert became_unavailable(down, down) is None
    up = metrics_condition(down, Reading(Sample(0.0, 1.0)), 0, source, 1, "t3")
    assert up.conditions[-1].status == ConditionStatus.TRUE


@pytest.mark.parametrize("reason", [reasons.IMPLAUSIBLE_READING, reasons.EVALUATION_FAILED, reasons.QUERY_REFUSED])
def test_a_defect_is_named_at_its_first_evaluation_a_gap_after_the_threshold(reason: str) -> None:
    """A reading another scrape does not cure (a count no deployment holds, an evaluation that raised, a query
    Prometheus refused) is named at once; a gap (Prometheus away, no data) waits out FAILURE_THRESHOLD."""
    source = Source("Prometheus at p")
    defect = Reading(Sample(0.0, None, error="broken"), reason, "sum(x)")
    gap = Reading(Sample(0.0, None, error="Prometheus at p unreachable"), reasons.QUERY_FAILED, "sum(x)")
    assert named(defect, 1) and not named(gap, 1) and not named(gap, FAILURE_THRESHOLD - 1)
    assert named(gap, FAILURE_THRESHOLD) and not named(Reading(Sample(0.0, 1.0)), 5)
    cond = metrics_condition(SpecServeStatus(), defect, 1, source, 1, "t0").conditions[-1]
    assert (cond.status, cond.reason) == (ConditionStatus.FALSE, reason)
    assert metrics_condition(SpecServeStatus(), gap, 1, source, 1, "t0") == SpecServeStatus()


def test_snapshot_reports_each_pools_load() -> None:
    spec = PoolSignal(2, running=8.0, queued=1.0, tokens_per_second=812.345, accept_length=2.456, spec_num_steps=0.0)
    snap = load_snapshot(Reading(Sample(0.0, 9.0, spec, PoolSignal(1, running=None, queued=None))), 0.0)
    assert [p.pool for p in snap.pools] == ["speculative", "baseline"]
    first = snap.pools[0]
    assert (first.ready, first.running, first.tokens_per_second, first.accept_length, first.spec_num_steps) == (
        2, 8.0, 812.3, 2.46, 0.0
    )  # fmt: skip
    assert snap.pools[1].running is None  # unknown stays unset, never 0


def test_a_load_only_move_waits_until_the_snapshot_is_30_seconds_old() -> None:
    """A demand that moves every round would write status every evaluation: a material move refreshes the
    snapshot once it is LOAD_REFRESH_SECONDS old; turning known refreshes it at once, turning unknown once named."""
    old = LoadSnapshot(concurrency=20.0, time="2026-12-04T10:00:00Z")
    assert not load_due(old, LoadSnapshot(concurrency=30.0, time="2026-12-04T10:00:10Z"), named=False)
    assert load_due(old, LoadSnapshot(concurrency=30.0, time="2026-12-04T10:00:30Z"), named=False)
    assert not load_due(old, LoadSnapshot(concurrency=20.5, time="2026-12-04T10:05:00Z"), named=False)  # not material
    assert load_due(old, LoadSnapshot(concurrency=None, time="2026-12-04T10:00:02Z"), named=True)  # unknown, named
    assert load_due(LoadSnapshot(concurrency=None, time="2026-12-04T10:00:00Z"),
                    LoadSnapshot(concurrency=5.0, time="2026-12-04T10:00:02Z"), named=False)  # fmt: skip
    assert load_due(LoadSnapshot(concurrency=20.0), LoadSnapshot(concurrency=30.0, time="2026-12-04T10:00:02Z"),
                    named=False)  # fmt: skip
    assert load_due(None, LoadSnapshot(concurrency=None), named=False)  # the first snapshot


def test_a_turn_to_unknown_waits_for_its_naming() -> None:
    """Unknown reaches status.load with MetricsAvailable=False (FAILURE_THRESHOLD evaluations), in one write, not
    at the first unknown evaluation too: a Prometheus outage cost 200 writes more per round at 200 SpecServes."""
    old = LoadSnapshot(concurrency=20.0, time="2026-12-04T10:00:00Z")
    assert not load_due(old, LoadSnapshot(concurrency=None, time="2026-12-04T10:05:00Z"), named=False)

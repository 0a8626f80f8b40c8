"""The day-2 gauges the alerts read: one current series per condition, absent (not 0) when unknown, gone with
the SpecServe."""

from __future__ import annotations

import pytest

from specserve import telemetry
from specserve.api.models import (
    Condition,
    ConditionStatus,
    LearnedMode,
    LearnedPoint,
    LearningStatus,
    PoolStatus,
    SpecServeStatus,
    SwitchingState,
    Weights,
)


def _value(metric: str, /, **labels: str) -> float | None:
    value = telemetry.REGISTRY.get_sample_value(metric, labels)
    return value


def _status(reason: str) -> SpecServeStatus:
    cond = Condition(type="MetricsAvailable", status=ConditionStatus.FALSE, reason=reason, last_transition_time="t")
    return SpecServeStatus(
        conditions=[cond],
        pools=[PoolStatus(role="speculative", name="m-spec", desired=2, ready=0, updated=0)],
        weights=Weights(speculative=30, baseline=70),
        switching=SwitchingState(mode="Baseline", mode_since="t", restarts=["a", "b"]),
    )


def test_a_condition_has_one_series_and_an_old_reason_disappears() -> None:
    telemetry.observe_status("ns1", "m", _status("NoData"))
    labels = {"namespace": "ns1", "name": "m", "type": "MetricsAvailable", "status": "False"}
    assert _value("specserve_condition", **labels, reason="NoData") == 1
    telemetry.observe_status("ns1", "m", _status("Stale"))
    assert _value("specserve_condition", **labels, reason="Stale") == 1
    assert _value("specserve_condition", **labels, reason="NoData") is None


def test_pools_weights_and_restarts_are_exported_and_forgotten_with_the_specserve() -> None:
    telemetry.observe_status("ns2", "m", _status("NoData"))
    assert _value("specserve_pool_ready_replicas", namespace="ns2", name="m", pool="speculative") == 0
    assert _value("specserve_pool_desired_replicas", namespace="ns2", name="m", pool="speculative") == 2
    assert _value("specserve_route_weight", namespace="ns2", name="m", pool="baseline") == 70
    assert _value("specserve_restarts_used", namespace="ns2", name="m") == 2
    telemetry.observe_status("ns2", "other", _status("NoData"))
    telemetry.forget("ns2", "m")
    assert _value("specserve_route_weight", namespace="ns2", name="m", pool="baseline") is None
    assert _value("specserve_condition", namespace="ns2", name="m", type="MetricsAvailable", status="False",
                  reason="NoData") is None  # fmt: skip
    assert _value("specserve_route_weight", namespace="ns2", name="other", pool="baseline") == 70


def test_an_unknown_value_is_absent_not_zero() -> None:
    telemetry.set_or_clear(telemetry.CALIBRATED_ACCEPT_LENGTH, ("ns3", "m"), 3.2)
    assert _value("specserve_calibrated_accept_length", namespace="ns3", name="m") == 3.2
    telemetry.set_or_clear(telemetry.CALIBRATED_ACCEPT_LENGTH, ("ns3", "m"), None)
    assert _value("specserve_calibrated_accept_length", namespace="ns3", name="m") is None


def test_the_learned_curve_divergence_counts_only_confident_points() -> None:
    def point(x: float, learned: float, confidence: float) -> LearnedPoint:
        return LearnedPoint(concurrency=x, calibrated=100.0, learned=learned, confidence=confidence)

    learning = LearningStatus(
        last_update="t",
        # the unconfident point is far off (-60 %) but must not count; the confident ones are -30 % and +10 %
        speculative=LearnedMode(points=[point(1, 70.0, 0.8), point(8, 110.0, 0.9), point(64, 40.0, 0.3)]),
        baseline=LearnedMode(points=[point(1, 50.0, 0.5)]),  # nothing confident: no series, not 0
    )
    telemetry.observe_status("ns4", "m", SpecServeStatus(learning=learning))
    divergence = _value("specserve_learned_curve_divergence", namespace="ns4", name="m", mode="speculative")
    assert divergence == pytest.approx(0.3)
    assert _value("specserve_learned_curve_divergence", namespace="ns4", name="m", mode="baseline") is None
    telemetry.observe_status("ns4", "m", SpecServeStatus())  # learning gone (e.g. the curves were removed)
    assert _value("specserve_learned_curve_divergence", namespace="ns4", name="m", mode="speculative") is None

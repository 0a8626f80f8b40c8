"""The day-2 gauges the alerts read: one current series per condition, absent (not 0) when unknown, gone with
the SpecServe: computed at scrape time from the operator's cache (telemetry.SpecServeCollector)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import generate_latest

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


CACHE: dict[tuple[str, str], dict[str, Any]] = {}  # what the operator's Registry holds, for these tests


@pytest.fixture(autouse=True)
def cache() -> Iterator[dict[tuple[str, str], dict[str, Any]]]:
    """The collector follows this stand-in for the operator's cache, as Dispatcher.start makes it follow its own."""

    def bodies() -> list[dict[str, Any]]:
        return list(CACHE.values())

    CACHE.clear()
    telemetry.COLLECTOR.serve(bodies)
    yield CACHE
    telemetry.COLLECTOR.serve(None)
    CACHE.clear()


def observe(namespace: str, name: str, status: SpecServeStatus) -> None:
    """The watch delivered this object (status and all) into the cache."""
    CACHE[(namespace, name)] = {
        "metadata": {"namespace": namespace, "name": name},
        "status": status.model_dump(mode="json", by_alias=True, exclude_none=True),
    }


def _status(reason: str) -> SpecServeStatus:
    cond = Condition(type="MetricsAvailable", status=ConditionStatus.FALSE, reason=reason, last_transition_time="t")
    return SpecServeStatus(
        conditions=[cond],
        pools=[PoolStatus(role="speculative", name="m-spec", desired=2, ready=0, updated=0)],
        weights=Weights(speculative=30, baseline=70),
        switching=SwitchingState(mode="Baseline", mode_since="t", restarts=["a", "b"]),
    )


def test_a_condition_has_one_series_and_an_old_reason_disappears() -> None:
    observe("ns1", "m", _status("NoData"))
    labels = {"namespace": "ns1", "name": "m", "type": "MetricsAvailable", "status": "False"}
    assert _value("specserve_condition", **labels, reason="NoData") == 1
    observe("ns1", "m", _status("Stale"))
    assert _value("specserve_condition", **labels, reason="Stale") == 1
    assert _value("specserve_condition", **labels, reason="NoData") is None


def test_pools_weights_and_restarts_are_exported_and_forgotten_with_the_specserve() -> None:
    observe("ns2", "m", _status("NoData"))
    assert _value("specserve_pool_ready_replicas", namespace="ns2", name="m", pool="speculative") == 0
    assert _value("specserve_pool_desired_replicas", namespace="ns2", name="m", pool="speculative") == 2
    assert _value("specserve_route_weight", namespace="ns2", name="m", pool="baseline") == 70
    assert _value("specserve_restarts_used", namespace="ns2", name="m") == 2
    observe("ns2", "other", _status("NoData"))
    del CACHE[("ns2", "m")]  # deleted: the watch's DELETED event took it out of the cache
    assert _value("specserve_route_weight", namespace="ns2", name="m", pool="baseline") is None
    assert _value("specserve_condition", namespace="ns2", name="m", type="MetricsAvailable", status="False",
                  reason="NoData") is None  # fmt: skip
    assert _value("specserve_route_weight", namespace="ns2", name="other", pool="baseline") == 70


def test_an_unknown_value_is_absent_not_zero() -> None:
    observe("ns3", "m", SpecServeStatus())
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
    observe("ns4", "m", SpecServeStatus(learning=learning))
    divergence = _value("specserve_learned_curve_divergence", namespace="ns4", name="m", mode="speculative")
    assert divergence == pytest.approx(0.3)
    assert _value("specserve_learned_curve_divergence", namespace="ns4", name="m", mode="baseline") is None
    observe("ns4", "m", SpecServeStatus())  # learning gone (e.g. the curves were removed)
    assert _value("specserve_learned_curve_divergence", namespace="ns4", name="m", mode="speculative") is None


def test_a_deleted_specserves_series_leave_the_scrape(cache: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Every per-SpecServe series, the ones set as things happen too (demand, target weight, counters), follows
    the cache: gone from the next scrape once the SpecServe is, even if its DELETED event was never handled."""
    ready = SpecServeStatus(
        conditions=[Condition(type="Ready", status=ConditionStatus.TRUE, reason="Ready", last_transition_time="t")],
        weights=Weights(speculative=100, baseline=0),
    )
    observe("ns5", "gone", ready)
    observe("ns5", "kept", ready)
    for name in ("gone", "kept"):
        telemetry.DEMAND.labels("ns5", name).set(7)
        telemetry.TARGET_WEIGHT.labels("ns5", name, "speculative").set(100)
        telemetry.RECONCILES.labels("ns5", name, "ok").inc()
    scrape = generate_latest(telemetry.REGISTRY).decode()
    assert 'specserve_ready{name="gone",namespace="ns5"} 1.0' in scrape
    assert 'specserve_demand{name="gone",namespace="ns5"} 7.0' in scrape
    del cache[("ns5", "gone")]
    scrape = generate_latest(telemetry.REGISTRY).decode()
    assert 'name="gone"' not in scrape
    assert 'specserve_ready{name="kept",namespace="ns5"} 1.0' in scrape
    assert 'specserve_speculative_weight{name="kept",namespace="ns5"} 100.0' in scrape
    assert 'specserve_demand{name="kept",namespace="ns5"} 7.0' in scrape
    assert 'specserve_reconciles_total{name="kept",namespace="ns5",result="ok"} 1.0' in scrape

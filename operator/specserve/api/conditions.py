"""A SpecServe's status conditions: their types and the one way to find a condition by type (their reasons are in
specserve.api.reasons). Which writer owns which condition is in specserve.status (the Writer table: RECONCILE,
SWITCHING_LOOP)."""

from __future__ import annotations

from collections.abc import Iterable

from specserve.api.models import Condition

READY = "Ready"
SPECULATIVE_POOL_READY = "SpeculativePoolReady"
BASELINE_POOL_READY = "BaselinePoolReady"
ROUTE_READY = "RouteReady"
POD_MONITOR_READY = "PodMonitorReady"
METRICS_AVAILABLE = "MetricsAvailable"
SWITCHING = "Switching"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
CURVE_DRIFT = "CurveDrift"  # the live curves left the calibrated ones (also the Warning event's reason)
CONDITION_ORDER = (
    READY,
    SPECULATIVE_POOL_READY,
    BASELINE_POOL_READY,
    ROUTE_READY,
    POD_MONITOR_READY,
    METRICS_AVAILABLE,
    SWITCHING,
    PROGRESSING,
    DEGRADED,
)
# Conditions whose True is the abnormal state (Kubernetes' "abnormal-true" polarity): False is the fine one.
ABNORMAL_TRUE = frozenset({DEGRADED, PROGRESSING, SWITCHING, CURVE_DRIFT})


def find_condition(conditions: Iterable[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)

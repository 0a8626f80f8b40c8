"""The operator's own Prometheus metrics (not the engines')."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

REGISTRY = CollectorRegistry(auto_describe=True)

RECONCILES = Counter(
    "specserve_reconciles", "Reconciles run, by result.", ["namespace", "name", "result"], registry=REGISTRY
)
APPLIES = Counter(
    "specserve_applies",
    "Objects (re)applied because they drifted or were missing.",
    ["namespace", "name", "kind"],
    registry=REGISTRY,
)
PRUNES = Counter(
    "specserve_prunes",
    "Owned objects deleted because the spec no longer renders them.",
    ["namespace", "name", "kind"],
    registry=REGISTRY,
)
READY = Gauge(
    "specserve_ready", "1 when the SpecServe's Ready condition is True.", ["namespace", "name"], registry=REGISTRY
)
SPECULATIVE_WEIGHT = Gauge(
    "specserve_speculative_weight",
    "HTTPRoute weight of the speculative pool.",
    ["namespace", "name"],
    registry=REGISTRY,
)

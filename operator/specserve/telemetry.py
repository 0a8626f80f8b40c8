"""The operator's own Prometheus metrics (not the engines')."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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

# ------------------------------------------------------------------------------------------ load-based switching
# Decision reasons are free text with numbers; the `rule` label keeps their leading words only (bounded).
EVALUATIONS = Counter(
    "specserve_evaluations",
    "Switching evaluations, by whether the load was known.",
    ["namespace", "name", "load"],
    registry=REGISTRY,
)
DECISIONS = Counter(
    "specserve_decisions",
    "Switching decisions other than Hold, by action, rule (the reason's leading words) and whether applied.",
    ["namespace", "name", "action", "rule", "applied"],
    registry=REGISTRY,
)
SWITCHES = Counter(
    "specserve_switches", "Changes the switching loop made (applied decisions).", ["namespace", "name", "action"],
    registry=REGISTRY,
)  # fmt: skip
METRIC_ERRORS = Counter(
    "specserve_metric_errors",
    "Evaluations whose load was unknown, by reason (QueryFailed, QueryRefused, NoData, Stale, ...).",
    ["namespace", "name", "reason"],
    registry=REGISTRY,
)
METRIC_QUERIES = Counter(
    "specserve_metric_queries", "Prometheus queries and pod scrapes sent by the switching loop.", ["source"],
    registry=REGISTRY,
)  # fmt: skip
EVALUATION_SECONDS = Histogram(
    "specserve_evaluation_round_seconds",
    "Wall time of one switching round (all SpecServes due), reading included.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
DEMAND = Gauge(
    "specserve_demand", "Requests in flight across the SpecServe's pods, smoothed (NaN: unknown).",
    ["namespace", "name"], registry=REGISTRY,
)  # fmt: skip
TARGET_WEIGHT = Gauge(
    "specserve_target_weight", "HTTPRoute weight the switching loop decided, per pool.", ["namespace", "name", "pool"],
    registry=REGISTRY,
)  # fmt: skip


def rule_of(reason: str) -> str:
    """The leading words of a decision reason, up to the first number or punctuation: a bounded label value."""
    words = []
    for word in reason.split():
        if not word.isalpha():
            break
        words.append(word.lower())
    return " ".join(words[:4]) or "other"

"""The operator's own Prometheus metrics (not the engines')."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from specserve.api.models import LearnedMode, SpecServe, SpecServeStatus
from specserve.policy.learning import CONFIDENT

REGISTRY = CollectorRegistry(auto_describe=True)
SPECSERVE = ("namespace", "name")  # the labels of a series per SpecServe


def _counter(name: str, doc: str, *labels: str) -> Counter:
    return Counter(name, doc, labels, registry=REGISTRY)


def _gauge(name: str, doc: str, *labels: str) -> Gauge:
    return Gauge(name, doc, labels, registry=REGISTRY)


RECONCILES = _counter("specserve_reconciles", "Reconciles run, by result.", *SPECSERVE, "result")
APPLIES = _counter("specserve_applies", "Objects (re)applied because they drifted or were missing.", *SPECSERVE, "kind")
PRUNES = _counter(
    "specserve_prunes", "Owned objects deleted because the spec no longer renders them.", *SPECSERVE, "kind"
)
READY = _gauge("specserve_ready", "1 when the SpecServe's Ready condition is True.", *SPECSERVE)
SPECULATIVE_WEIGHT = _gauge("specserve_speculative_weight", "HTTPRoute weight of the speculative pool.", *SPECSERVE)

# ------------------------------------------------------------------------------------------ load-based switching
# Decision reasons are free text with numbers; the `rule` label keeps their leading words only (bounded).
EVALUATIONS = _counter(
    "specserve_evaluations", "Switching evaluations, by whether the load was known.", *SPECSERVE, "load"
)
DECISIONS = _counter(
    "specserve_decisions",
    "Switching decisions other than Hold, by action, rule (the reason's leading words) and whether applied.",
    *SPECSERVE, "action", "rule", "applied",
)  # fmt: skip
SWITCHES = _counter("specserve_switches", "Changes the switching loop made (applied decisions).", *SPECSERVE, "action")
METRIC_ERRORS = _counter(
    "specserve_metric_errors",
    "Evaluations whose load was unknown, by reason (QueryFailed, QueryRefused, NoData, Stale, ...).",
    *SPECSERVE, "reason",
)  # fmt: skip
METRIC_QUERIES = _counter(
    "specserve_metric_queries", "Prometheus queries and pod scrapes sent by the switching loop.", "source"
)
EVALUATION_SECONDS = Histogram(
    "specserve_evaluation_round_seconds",
    "Wall time of one switching round (all SpecServes due), reading included.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
DEMAND = _gauge(
    "specserve_demand", "Requests in flight across the SpecServe's pods, smoothed (NaN: unknown).", *SPECSERVE
)
TARGET_WEIGHT = _gauge(
    "specserve_target_weight", "HTTPRoute weight the switching loop decided, per pool.", *SPECSERVE, "pool"
)


def rule_of(reason: str) -> str:
    """The leading words of a decision reason, up to the first number or punctuation: a bounded label value."""
    words = []
    for word in reason.split():
        if not word.isalpha():
            break
        words.append(word.lower())
    return " ".join(words[:4]) or "other"


# ------------------------------------------------------------------------------ day-2 operations (alerts, dashboard)
# What the alerts in charts/specserve/rules and the dashboard read; set from the status wherever it is computed.
LEADER = _gauge(
    "specserve_leader", "1 while this operator process acts (holds the Lease, or runs without leader election)."
)
OPERATOR_CONFLICT = _gauge(
    "specserve_operator_conflict",
    "1 while this operator process refuses to act because another operator holds its Lease (two operators over "
    "the same objects; see the OperatorConflict event on the Lease).",
)
RECONCILE_SECONDS = Histogram(
    "specserve_reconcile_seconds",
    "Wall time of one reconcile of one SpecServe (reads, applies and the status write).",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
CONDITION = _gauge(
    "specserve_condition",
    "1 for each condition's current status and reason (one series per condition type).",
    *SPECSERVE, "type", "status", "reason",
)  # fmt: skip
POOL_READY = _gauge(
    "specserve_pool_ready_replicas", "Ready pods per pool, as the Deployment reports them.", *SPECSERVE, "pool"
)
POOL_DESIRED = _gauge("specserve_pool_desired_replicas", "Desired pods per pool.", *SPECSERVE, "pool")
POOL_DEADLINE_EXCEEDED = _gauge(
    "specserve_pool_roll_deadline_exceeded",
    "1 while a pool's roll has run past its progress deadline.",
    *SPECSERVE,
    "pool",
)
ROUTE_WEIGHT = _gauge(
    "specserve_route_weight",
    "HTTPRoute weight on each pool (speculative, baseline), as on the route.",
    *SPECSERVE,
    "pool",
)
ACTIVE_MODE = _gauge(
    "specserve_active_mode", "1 for the mode actually serving (Speculative or Baseline).", *SPECSERVE, "mode"
)
RESTARTS_USED = _gauge("specserve_restarts_used", "Restart strategy: restarts made in the last 24 h.", *SPECSERVE)
RESTART_BUDGET = _gauge("specserve_restart_budget", "spec.switching.maxRestartsPerDay.", *SPECSERVE)
CROSSOVER = _gauge(
    "specserve_crossover_concurrency",
    "The crossover per replica the policy uses (spec, else from the curves).",
    *SPECSERVE,
)
CALIBRATED_ACCEPT_LENGTH = _gauge(
    "specserve_calibrated_accept_length", "spec.switching.calibratedAcceptLength (absent when unset).", *SPECSERVE
)
LEARNED_DIVERGENCE = _gauge(
    "specserve_learned_curve_divergence",
    "Per mode: the largest |learned / calibrated - 1| over the concurrencies where the learned curve is confident"
    " (absent where none is).",
    *SPECSERVE, "mode",
)  # fmt: skip
PAUSED = _gauge("specserve_paused", "1 while switching is paused (annotation specserve.io/paused).", *SPECSERVE)

# Gauges whose label sets change with the status: a stale series (an old reason) must disappear, not linger at 1.
_CONDITIONS_SEEN: dict[tuple[str, str], set[tuple[str, str, str]]] = {}


def observe_conditions(namespace: str, name: str, conditions: Iterable[tuple[str, str, str]]) -> None:
    """(type, status, reason) per condition: one series at 1 per type; series of earlier values removed."""
    now = set(conditions)
    for gone in _CONDITIONS_SEEN.get((namespace, name), set()) - now:
        with contextlib.suppress(KeyError):
            CONDITION.remove(namespace, name, *gone)
    for labels in now:
        CONDITION.labels(namespace, name, *labels).set(1)
    _CONDITIONS_SEEN[(namespace, name)] = now


def observe_mode(namespace: str, name: str, mode: str | None) -> None:
    for candidate in ("Speculative", "Baseline"):
        ACTIVE_MODE.labels(namespace, name, candidate).set(1 if candidate == mode else 0)


def set_or_clear(gauge: Gauge, labels: tuple[str, ...], value: float | None) -> None:
    """A gauge absent rather than 0 when the value is unknown (so an alert on it does not misfire)."""
    if value is None:
        with contextlib.suppress(KeyError):
            gauge.remove(*labels)
    else:
        gauge.labels(*labels).set(value)


def observe_status(namespace: str, name: str, status: SpecServeStatus) -> None:
    """The status-derived gauges: conditions, pools, route weights, the mode serving, restarts used."""
    observe_conditions(namespace, name, ((c.type, c.status.value, c.reason) for c in status.conditions))
    for pool in status.pools:
        POOL_READY.labels(namespace, name, pool.role).set(pool.ready)
        POOL_DESIRED.labels(namespace, name, pool.role).set(pool.desired)
        stuck = pool.failure is not None and pool.failure.deadline_exceeded
        POOL_DEADLINE_EXCEEDED.labels(namespace, name, pool.role).set(1 if stuck else 0)
    if status.weights is not None:
        ROUTE_WEIGHT.labels(namespace, name, "speculative").set(status.weights.speculative)
        ROUTE_WEIGHT.labels(namespace, name, "baseline").set(status.weights.baseline)
    observe_mode(namespace, name, status.active_mode.value if status.active_mode is not None else None)
    if status.switching is not None:
        RESTARTS_USED.labels(namespace, name).set(len(status.switching.restarts))
    learning = status.learning
    for mode in ("speculative", "baseline"):
        learned = getattr(learning, mode) if learning is not None else None
        set_or_clear(LEARNED_DIVERGENCE, (namespace, name, mode), _divergence(learned))


def _divergence(learned: LearnedMode | None) -> float | None:
    """How far the confident part of a learned curve strays from the calibrated one (None: nothing confident)."""
    if learned is None:
        return None
    gaps = [abs(p.learned / p.calibrated - 1) for p in learned.points if p.confidence >= CONFIDENT and p.calibrated > 0]
    return max(gaps) if gaps else None


def observe_spec(namespace: str, name: str, obj: SpecServe, crossover: float | None, paused: bool) -> None:
    """The spec-derived gauges the alerts compare against (budget, calibrated accept length, crossover, pause)."""
    switching = obj.spec.switching
    RESTART_BUDGET.labels(namespace, name).set(switching.max_restarts_per_day)
    set_or_clear(CALIBRATED_ACCEPT_LENGTH, (namespace, name), switching.calibrated_accept_length)
    set_or_clear(CROSSOVER, (namespace, name), crossover)
    PAUSED.labels(namespace, name).set(1 if paused else 0)


_PER_SPECSERVE = (
    CONDITION, POOL_READY, POOL_DESIRED, POOL_DEADLINE_EXCEEDED, ROUTE_WEIGHT, ACTIVE_MODE, RESTARTS_USED,
    RESTART_BUDGET, CROSSOVER, CALIBRATED_ACCEPT_LENGTH, PAUSED, LEARNED_DIVERGENCE,
)  # fmt: skip


def forget(namespace: str, name: str) -> None:
    """Drop a deleted SpecServe's day-2 series (an alert must not fire on a SpecServe that is gone)."""
    _CONDITIONS_SEEN.pop((namespace, name), None)
    for gauge in _PER_SPECSERVE:
        for metric in gauge.collect():
            for sample in metric.samples:
                labels = sample.labels
                if labels.get("namespace") == namespace and labels.get("name") == name:
                    with contextlib.suppress(KeyError):
                        gauge.remove(*(labels[k] for k in gauge._labelnames))

"""The operator's own Prometheus metrics (not the engines').

Per-SpecServe series follow the SpecServes in the operator's cache (the kube-state-metrics pattern): the
status-derived gauges are computed at scrape time from the cached objects (SpecServeCollector), and the series
set as things happen (counters, the loop's demand and target weights, the spec-derived gauges) are served only
while their SpecServe is in the cache. A deleted SpecServe's series leave the next scrape, whether or not its
DELETED event was seen."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Metric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from pydantic import ValidationError

from specserve.api.models import ConditionStatus, LearnedMode, SpecServe, SpecServeStatus
from specserve.policy.learning import CONFIDENT

REGISTRY = CollectorRegistry(auto_describe=True)
# The per-SpecServe series set as things happen; REGISTRY serves them through SpecServeCollector (filtered).
_OBJECTS = CollectorRegistry(auto_describe=True)
SPECSERVE = ("namespace", "name")  # the labels of a series per SpecServe


_SET: list[Counter | Gauge] = []  # the metrics in _OBJECTS, for forget()
_M = TypeVar("_M", Counter, Gauge)


def _metric(kind: type[_M], name: str, doc: str, labels: tuple[str, ...]) -> _M:
    """A metric in REGISTRY, or, when its series are per SpecServe, in _OBJECTS (served filtered by the cache)."""
    if labels[:2] != SPECSERVE:
        return kind(name, doc, labels, registry=REGISTRY)
    metric = kind(name, doc, labels, registry=_OBJECTS)
    _SET.append(metric)
    return metric


def _counter(name: str, doc: str, *labels: str) -> Counter:
    return _metric(Counter, name, doc, labels)


def _gauge(name: str, doc: str, *labels: str) -> Gauge:
    return _metric(Gauge, name, doc, labels)


RECONCILES = _counter("specserve_reconciles", "Reconciles run, by result.", *SPECSERVE, "result")
APPLIES = _counter("specserve_applies", "Objects (re)applied because they drifted or were missing.", *SPECSERVE, "kind")
PRUNES = _counter(
    "specserve_prunes", "Owned objects deleted because the spec no longer renders them.", *SPECSERVE, "kind"
)
WATCH_STALE = _counter(
    "specserve_watch_stale",
    "Spec changes the SpecServe watch had not delivered when a resync round's LIST found them (reconciled then).",
    *SPECSERVE,
)  # fmt: skip
API_WARNINGS = _counter(
    "specserve_api_warnings",
    "Warning headers the API server sent on the operator's requests (PodSecurity, deprecations), by verb and resource.",
    "verb", "resource",
)  # fmt: skip
API_UNAVAILABLE = _counter(
    "specserve_api_unavailable",
    "The operator's API requests that got no answer (refused, reset, timed out), a 429 or a 5xx, each attempt, by "
    "verb and resource: an API server or etcd outage, seen while it lasts (nothing can be written to status then).",
    "verb", "resource",
)  # fmt: skip

# ------------------------------------------------------------------------------------------ load-based switching
# Decision reasons are free text with numbers; the `rule` label is the typed rule (api.models.Rule, bounded).
EVALUATIONS = _counter(
    "specserve_evaluations", "Switching evaluations, by whether the load was known.", *SPECSERVE, "load"
)
DECISIONS = _counter(
    "specserve_decisions",
    "Switching decisions other than Hold, by action, rule (api.models.Rule) and whether applied.",
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


# ------------------------------------------------------------------------------ day-2 operations (alerts, dashboard)
# What the alerts in charts/specserve/rules and the dashboard read besides the status-derived gauges, which
# status_families() computes at scrape time.
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
RESTART_BUDGET = _gauge("specserve_restart_budget", "spec.switching.maxRestartsPerDay.", *SPECSERVE)
CROSSOVER = _gauge(
    "specserve_crossover_concurrency",
    "The crossover per replica the policy uses (spec, else from the curves).",
    *SPECSERVE,
)
CALIBRATED_ACCEPT_LENGTH = _gauge(
    "specserve_calibrated_accept_length", "spec.switching.calibratedAcceptLength (absent when unset).", *SPECSERVE
)
PAUSED = _gauge("specserve_paused", "1 while switching is paused (annotation specserve.io/paused).", *SPECSERVE)


def set_or_clear(gauge: Gauge, labels: tuple[str, ...], value: float | None) -> None:
    """A gauge absent rather than 0 when the value is unknown (so an alert on it does not misfire)."""
    if value is None:
        with contextlib.suppress(KeyError):
            gauge.remove(*labels)
    else:
        gauge.labels(*labels).set(value)


def observe_spec(namespace: str, name: str, obj: SpecServe, crossover: float | None, paused: bool) -> None:
    """The spec-derived gauges the alerts compare against (budget, calibrated accept length, crossover, pause)."""
    switching = obj.spec.switching
    RESTART_BUDGET.labels(namespace, name).set(switching.max_restarts_per_day)
    set_or_clear(CALIBRATED_ACCEPT_LENGTH, (namespace, name), switching.calibrated_accept_length)
    set_or_clear(CROSSOVER, (namespace, name), crossover)
    PAUSED.labels(namespace, name).set(1 if paused else 0)


def forget(namespace: str, name: str) -> None:
    """Free a deleted SpecServe's series set as things happen (the collector already stopped serving them)."""
    for collector in _SET:
        for metric in collector.collect():
            for sample in metric.samples:
                labels = sample.labels
                if labels.get("namespace") == namespace and labels.get("name") == name:
                    with contextlib.suppress(KeyError):
                        collector.remove(*(labels[k] for k in collector._labelnames))


# ------------------------------------------------------------------------------- scrape time, from the cache
Key = tuple[str, str]
Bodies = Callable[[], Iterable[Mapping[str, Any]]]


def _family(name: str, doc: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=[*SPECSERVE, *labels])


def status_families(bodies: Iterable[Mapping[str, Any]]) -> list[GaugeMetricFamily]:
    """The status-derived gauges of these SpecServes (pure): what the alerts and the dashboard read."""
    ready = _family("specserve_ready", "1 when the SpecServe's Ready condition is True.")
    weight = _family("specserve_speculative_weight", "HTTPRoute weight of the speculative pool.")
    condition = _family(
        "specserve_condition",
        "1 for each condition's current status and reason (one series per condition type).",
        "type", "status", "reason",
    )  # fmt: skip
    pool_ready = _family("specserve_pool_ready_replicas", "Ready pods per pool, as the Deployment reports it.", "pool")
    pool_desired = _family("specserve_pool_desired_replicas", "Desired pods per pool.", "pool")
    deadline = _family(
        "specserve_pool_roll_deadline_exceeded", "1 while a pool's roll has run past its progress deadline.", "pool"
    )
    route = _family(
        "specserve_route_weight", "HTTPRoute weight on each pool (speculative, baseline), as on the route.", "pool"
    )
    mode = _family("specserve_active_mode", "1 for the mode actually serving (Speculative or Baseline).", "mode")
    restarts = _family("specserve_restarts_used", "Restart strategy: restarts made in the last 24 h.")
    divergence = _family(
        "specserve_learned_curve_divergence",
        "Per mode: the largest |learned / calibrated - 1| over the concurrencies where the learned curve is"
        " confident (absent where none is).",
        "mode",
    )
    for body in bodies:
        meta = body.get("metadata") or {}
        key = [str(meta.get("namespace", "")), str(meta.get("name", ""))]
        try:
            status = SpecServeStatus.model_validate(body.get("status") or {})
        except ValidationError:
            continue  # an unreadable status exports nothing (unknown is not zero)
        for c in status.conditions:
            condition.add_metric([*key, c.type, c.status.value, c.reason], 1)
            if c.type == "Ready":
                ready.add_metric(key, 1 if c.status == ConditionStatus.TRUE else 0)
        for pool in status.pools:
            pool_ready.add_metric([*key, pool.role], pool.ready)
            pool_desired.add_metric([*key, pool.role], pool.desired)
            stuck = pool.failure is not None and pool.failure.deadline_exceeded
            deadline.add_metric([*key, pool.role], 1 if stuck else 0)
        if status.weights is not None:
            weight.add_metric(key, status.weights.speculative)
            route.add_metric([*key, "speculative"], status.weights.speculative)
            route.add_metric([*key, "baseline"], status.weights.baseline)
        serving = status.active_mode.value if status.active_mode is not None else None
        for candidate in ("Speculative", "Baseline"):
            mode.add_metric([*key, candidate], 1 if candidate == serving else 0)
        if status.switching is not None:
            restarts.add_metric(key, len(status.switching.restarts))
        for learned_mode in ("speculative", "baseline"):
            learned = getattr(status.learning, learned_mode) if status.learning is not None else None
            gap = _divergence(learned)
            if gap is not None:
                divergence.add_metric([*key, learned_mode], gap)
    return [ready, weight, condition, pool_ready, pool_desired, deadline, route, mode, restarts, divergence]


def _divergence(learned: LearnedMode | None) -> float | None:
    """How far the confident part of a learned curve strays from the calibrated one (None: nothing confident)."""
    if learned is None:
        return None
    gaps = [abs(p.learned / p.calibrated - 1) for p in learned.points if p.confidence >= CONFIDENT and p.calibrated > 0]
    return max(gaps) if gaps else None


class SpecServeCollector(Collector):
    """At each scrape: the status-derived gauges of the SpecServes in the cache, and the series set as things
    happen, of those SpecServes only. Without a cache (a tool, a test of one part) nothing is derived and the
    set series are served as set."""

    def __init__(self) -> None:
        self._bodies: Bodies | None = None

    def serve(self, bodies: Bodies | None) -> None:
        """Follow this cache (the operator's latest body of every SpecServe); None: follow none."""
        self._bodies = bodies

    def serving(self, bodies: Bodies) -> bool:
        return self._bodies is bodies

    def describe(self) -> Iterable[Metric]:
        return [*_OBJECTS.collect(), *status_families([])]

    def collect(self) -> Iterator[Metric]:
        if self._bodies is None:
            yield from _OBJECTS.collect()
            return
        bodies = list(self._bodies())
        live: set[Key] = set()
        for body in bodies:
            meta = body.get("metadata") or {}
            live.add((str(meta.get("namespace", "")), str(meta.get("name", ""))))
        for family in _OBJECTS.collect():
            family.samples = [s for s in family.samples if (s.labels["namespace"], s.labels["name"]) in live]
            yield family
        yield from status_families(bodies)


COLLECTOR = SpecServeCollector()
REGISTRY.register(COLLECTOR)

"""Read the load of every SpecServe due this round, at a cost that does not grow with their number.

SpecServes are grouped by source: per Prometheus URL and query window, one grouped query per signal covers
them all (plus each seriesSelector SpecServe's own queries in the same batch); Direct SpecServes are scraped
pod by pod. Deployments (Ready pods) and, for Direct, Pods are listed once per namespace.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from specserve.api import reasons
from specserve.api.models import MetricsSourceKind, Mode, SpecServe, Strategy
from specserve.kube.client import KubeError
from specserve.kube.kinds import DEPLOYMENT, POD, Kind
from specserve.layout import LABEL_INSTANCE, LABEL_POOL, MANAGED_BY
from specserve.metrics.promql import (
    PoolKey,
    Query,
    SelectorError,
    Windows,
    grouped_queries,
    history_queries,
    horizon_of,
    selector_history_queries,
    selector_queries,
)
from specserve.metrics.results import QueryResult
from specserve.metrics.signal import PoolTarget, Reading, ReadTarget, failed, index, read, read_history
from specserve.metrics.startup import measured_startup_seconds
from specserve.policy.knobs import default_startup_seconds, min_dwell_seconds
from specserve.policy.switching import MAX_DEMAND
from specserve.policy.types import PoolSignal, Sample
from specserve.switching.pools import PoolState, pool_states
from specserve.switching.record import Source

log = logging.getLogger(__name__)
JSON = dict[str, Any]
MANAGED = {"app.kubernetes.io/managed-by": MANAGED_BY}


class KubeReader(Protocol):
    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]: ...


class QueryReader(Protocol):
    async def read(self, queries: Sequence[Query]) -> list[QueryResult]: ...


class PodReader(Protocol):
    async def read(self, pods: Mapping[PoolKey, Sequence[str]], windows: Windows) -> list[QueryResult]: ...


class Readers(Protocol):
    def prometheus(self, url: str) -> QueryReader: ...

    @property
    def direct(self) -> PodReader: ...


@dataclass(frozen=True)
class ReadPlan:
    """How one due SpecServe is read."""

    obj: SpecServe
    mode: Mode  # the target mode now (Restart's one pool reports as speculative or baseline by it)
    windows: Windows
    url: str | None  # Prometheus; None with the Direct source
    horizon: int | None = None  # Restart through Prometheus: the forecast horizon its demand history covers

    @property
    def key(self) -> tuple[str, str]:
        return self.obj.metadata.namespace, self.obj.metadata.name

    @property
    def direct(self) -> bool:
        return self.obj.spec.switching.metrics.source is MetricsSourceKind.DIRECT

    @property
    def source(self) -> Source:
        selector = self.obj.spec.switching.metrics.series_selector
        if self.direct:
            return Source("the pods' /metrics (Direct)")
        return Source(f"Prometheus at {self.url}", selector_override=selector is not None)


def read_plan(obj: SpecServe, mode: Mode, default_url: str | None) -> ReadPlan:
    switching = obj.spec.switching
    # Direct scrapes the pods once per evaluation, whatever the PodMonitor's interval (which only Prometheus uses):
    # windows sized by that interval (15 s by default) made a 2 s loop read load 20-30 s late (docs/real-engine.md).
    direct = switching.metrics.source is MetricsSourceKind.DIRECT
    scrape = switching.evaluation_interval_seconds if direct else obj.spec.monitoring.interval_seconds
    windows = Windows.of(switching.evaluation_interval_seconds, scrape)
    return ReadPlan(obj, mode, windows, switching.metrics.prometheus_url or default_url, forecast_horizon(obj))


def forecast_horizon(obj: SpecServe) -> int | None:
    """Restart reads its demand history over the restart horizon (start-up + min dwell: the time a restart must
    repay itself in); the Direct source has no history (the rule is then the reactive one), nor do the other
    strategies need one. The spec's start-up figure, not the pods' measured one: the queries go out before the
    pods are read, and rounding (promql.horizon_of) absorbs the difference."""
    switching = obj.spec.switching
    if obj.spec.strategy is not Strategy.RESTART or switching.metrics.source is MetricsSourceKind.DIRECT:
        return None
    return horizon_of(default_startup_seconds(obj) + min_dwell_seconds(obj))


def target_of(p: ReadPlan, states: tuple[PoolState, ...]) -> ReadTarget:
    adaptive = p.obj.spec.strategy is Strategy.ADAPTIVE
    pools = tuple(PoolTarget(s.role, s.ready, s.speculative or adaptive) for s in states)
    return ReadTarget(p.obj.metadata.namespace, p.obj.metadata.name, pools, p.obj.spec.monitoring.interval_seconds)


async def _list_by_namespace(kube: KubeReader, kind: Kind, namespaces: set[str]) -> dict[str, list[JSON] | str]:
    async def one(ns: str) -> list[JSON] | str:
        try:
            return await kube.list(kind, ns, MANAGED)
        except KubeError as exc:
            return str(exc)

    names = sorted(namespaces)
    return dict(zip(names, await asyncio.gather(*(one(ns) for ns in names)), strict=True))


def _by_name(items: list[JSON]) -> dict[str, JSON]:
    return {(i.get("metadata") or {}).get("name", ""): i for i in items}


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """The kubelet's word: Running with the Ready condition True (a loading engine is neither)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def pod_urls(obj: SpecServe, pods: list[JSON]) -> dict[PoolKey, list[str]]:
    """The /metrics URLs of a SpecServe's Ready pods with an IP, by pool (pure). A pod still loading its model
    serves no traffic and answers no scrape: reading it would make the whole SpecServe's demand unknown."""
    out: dict[PoolKey, list[str]] = defaultdict(list)
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        status = pod.get("status") or {}
        if labels.get(LABEL_INSTANCE) != obj.metadata.name or not pod_ready(pod):
            continue
        if status.get("podIP") and labels.get(LABEL_POOL):
            key = PoolKey(obj.metadata.namespace, obj.metadata.name, labels[LABEL_POOL])
            out[key].append(f"http://{status['podIP']}:{obj.spec.engine.port}/metrics")
    return out


@dataclass(frozen=True)
class Gathered:
    reading: Reading
    pools: tuple[PoolState, ...]
    startup_seconds: float | None = None  # Restart: the engine's start-up as its pods measured it


NO_URL = "no Prometheus: set spec.switching.metrics.prometheusUrl or run the operator with --prometheus-url"


class _Round:
    """One round's bookkeeping: which queries and scrapes to send, and whose readings they make."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.out: dict[tuple[str, str], Gathered] = {}
        self.targets: dict[tuple[str, str], ReadTarget] = {}
        self.queries: dict[tuple[str, Windows], list[Query]] = defaultdict(list)
        self.scrapes: dict[Windows, dict[PoolKey, list[str]]] = defaultdict(dict)
        self.members: dict[tuple[str, Windows] | Windows, list[ReadPlan]] = defaultdict(list)
        # Restart's demand history: one batch per Prometheus, window and horizon (grouped queries share keys)
        self.history: dict[tuple[str, Windows, int], list[Query]] = defaultdict(list)
        self.history_members: dict[tuple[str, Windows, int], list[ReadPlan]] = defaultdict(list)

    def fail(self, p: ReadPlan, states: tuple[PoolState, ...], reason: str, message: str) -> None:
        self.out[p.key] = Gathered(failed(self.now, reason, message), states)

    def add_direct(self, p: ReadPlan, pods: list[JSON]) -> None:
        urls = pod_urls(p.obj, pods)
        for pool in self.targets[p.key].pools:
            key = PoolKey(p.obj.metadata.namespace, p.obj.metadata.name, pool.role)
            self.scrapes[p.windows][key] = urls.get(key, [])
        self.members[p.windows].append(p)

    def add_prometheus(self, p: ReadPlan, url: str) -> str | None:
        group = (url, p.windows)
        selector = p.obj.spec.switching.metrics.series_selector
        own: list[Query] = []
        if selector is not None:
            roles = tuple(pool.role for pool in self.targets[p.key].pools)
            try:
                own = selector_queries(selector, p.obj.metadata.namespace, p.obj.metadata.name, roles, p.windows)
            except SelectorError as exc:
                return str(exc)
        if not self.queries[group]:
            self.queries[group] += grouped_queries(p.windows)  # once per Prometheus and window, for all
        self.queries[group] += own
        self.members[group].append(p)
        if p.horizon is not None:
            self.add_history(p, url, p.horizon, selector)
        return None

    def add_history(self, p: ReadPlan, url: str, horizon: int, selector: str | None) -> None:
        group = (url, p.windows, horizon)
        if not self.history[group]:
            self.history[group] += history_queries(p.windows, horizon)
        if selector is not None:
            roles = tuple(pool.role for pool in self.targets[p.key].pools)
            ns, name = p.obj.metadata.namespace, p.obj.metadata.name
            self.history[group] += selector_history_queries(selector, ns, name, roles, p.windows, horizon)
        self.history_members[group].append(p)

    def settle_history(self, members: list[ReadPlan], horizon: int, results: list[QueryResult]) -> None:
        """Attach the demand history to readings already settled (a failed reading keeps it too: it is unused)."""
        by_query = index(results)
        for p in members:
            got = self.out[p.key]
            try:
                history = read_history(self.targets[p.key], by_query, horizon)
            except Exception:  # no history: Restart decides on the reactive rule
                log.exception("switching %s/%s: reading its demand history failed", *p.key)
                continue
            sample = replace(got.reading.sample, history=history)
            self.out[p.key] = replace(got, reading=replace(got.reading, sample=sample))

    def settle(self, members: list[ReadPlan], results: list[QueryResult]) -> None:
        by_query = index(results)
        for p in members:
            try:
                reading = plausible(read(self.targets[p.key], by_query, self.now))
            except Exception as exc:  # one SpecServe's results must not spoil the others'
                log.exception("switching %s/%s: reading its load failed", *p.key)
                reading = failed(
                    self.now, reasons.QUERY_FAILED, f"reading the load failed unexpectedly ({_named(exc)})"
                )
            self.out[p.key] = Gathered(reading, self.out[p.key].pools)

    def fail_all(self, members: list[ReadPlan], where: str, exc: BaseException) -> None:
        """A reader that raised: its SpecServes' load is unknown (the others' reading goes on). The exception's
        type only: what a server answered goes to the log, never to a status."""
        log.error("switching: reading %s failed", where, exc_info=exc)
        message = f"reading {where} failed unexpectedly ({_named(exc)}); the operator's log has the details"
        for p in members:
            self.out[p.key] = Gathered(failed(self.now, reasons.QUERY_FAILED, message), self.out[p.key].pools)


def _named(exc: BaseException) -> str:
    return type(exc).__name__


def _count_plausible(value: float | None) -> bool:
    return value is None or 0 <= value <= MAX_DEMAND  # read() already made NaN and infinities None


def plausible(reading: Reading) -> Reading:
    """The reading, or unknown (ImplausibleReading) when a pool reports a request count no deployment produces: the
    policy would hold on it too (policy.switching.known), but status must say why the load is unknown."""
    sample = reading.sample
    pools: list[PoolSignal] = [s for s in (sample.speculative, sample.baseline) if s is not None]
    bad = [s for s in pools if not (_count_plausible(s.running) and _count_plausible(s.queued))]
    if reading.reason is not None or (not bad and _count_plausible(sample.demand)):
        return reading
    message = (
        f"a pool reports a request count no deployment holds (more than {MAX_DEMAND:.0e} in flight, or negative): "
        "a broken or hostile exporter, not load"
    )
    return Reading(readiness_only(sample, message), reasons.IMPLAUSIBLE_READING, reading.query)


def readiness_only(sample: Sample, error: str) -> Sample:
    """An unknown-load sample that keeps only the pools' Ready replicas (from the Deployments: a failover still
    acts on them) and none of the values read beside the load."""

    def ready(signal: PoolSignal | None) -> PoolSignal | None:
        return PoolSignal(ready_replicas=signal.ready_replicas) if signal is not None else None

    return Sample(sample.time, None, ready(sample.speculative), ready(sample.baseline), error=error)


def _plan(
    r: _Round,
    p: ReadPlan,
    deployments: Mapping[str, list[JSON] | str],
    by_name: Mapping[str, dict[str, JSON]],
    pods: Mapping[str, list[JSON] | str],
) -> None:
    """Which queries or scrapes read one SpecServe (its reading fails here when none can)."""
    ns = p.obj.metadata.namespace
    listed = deployments[ns]
    if isinstance(listed, str):
        r.fail(p, (), reasons.KUBE_READ_FAILED, f"cannot read the pools' Deployments: {listed}")
        return
    states = pool_states(p.obj, p.mode, by_name[ns])
    r.targets[p.key] = target_of(p, states)
    r.fail(p, states, reasons.NOT_READ, "not read")  # replaced once read
    if p.direct:
        listed_pods = pods.get(ns, [])
        if isinstance(listed_pods, str):
            r.fail(p, states, reasons.KUBE_READ_FAILED, f"cannot list the pods: {listed_pods}")
        else:
            r.add_direct(p, listed_pods)
    elif p.url is None:
        r.fail(p, states, reasons.NO_PROMETHEUS, NO_URL)
    elif (problem := r.add_prometheus(p, p.url)) is not None:
        r.fail(p, states, reasons.QUERY_REFUSED, problem)


async def gather(
    kube: KubeReader, readers: Readers, plans: Sequence[ReadPlan], now: float
) -> dict[tuple[str, str], Gathered]:
    """One round's reading for every due SpecServe: list Deployments (and pods, for Direct and Restart) once per
    namespace, then query each Prometheus once per window for all its SpecServes and scrape Direct pods, all at
    once. Every failure is its own SpecServes' (a reason in their reading: load unknown), never the round's."""
    deployments = await _list_by_namespace(kube, DEPLOYMENT, {p.obj.metadata.namespace for p in plans})
    # Pods: scraped by Direct; their start-up times price a Restart switch.
    pod_ns = {p.obj.metadata.namespace for p in plans if p.direct or p.obj.spec.strategy is Strategy.RESTART}
    pods = await _list_by_namespace(kube, POD, pod_ns) if pod_ns else {}
    r = _Round(now)
    # Indexed once per namespace, not once per SpecServe (with 1000 SpecServes: a million dict entries a round).
    by_name = {ns: _by_name(listed) for ns, listed in deployments.items() if not isinstance(listed, str)}
    for p in plans:
        try:
            _plan(r, p, deployments, by_name, pods)
        except Exception as exc:  # one SpecServe's objects must not spoil the others' reading
            log.exception("switching %s/%s: planning its reading failed", *p.key)
            r.fail(p, r.out[p.key].pools if p.key in r.out else (), reasons.QUERY_FAILED,
                   f"planning the load's reading failed unexpectedly ({_named(exc)})")  # fmt: skip

    # Each reader's failure is its own SpecServes' (a Prometheus answering what is no vector failed every round).
    async def run_prometheus(group: tuple[str, Windows]) -> None:
        try:
            results = await readers.prometheus(group[0]).read(r.queries[group])
        except Exception as exc:
            r.fail_all(r.members[group], f"Prometheus at {group[0]}", exc)
            return
        r.settle(r.members[group], results)

    async def run_direct(windows: Windows) -> None:
        try:
            results = await readers.direct.read(r.scrapes[windows], windows)
        except Exception as exc:
            r.fail_all(r.members[windows], "the pods' /metrics", exc)
            return
        r.settle(r.members[windows], results)

    histories: dict[tuple[str, Windows, int], list[QueryResult]] = {}

    async def run_history(group: tuple[str, Windows, int]) -> None:
        try:
            histories[group] = await readers.prometheus(group[0]).read(r.history[group])
        except Exception:  # no history: Restart decides on the reactive rule, as with no Prometheus history
            log.exception("switching: reading the demand history from %s failed", group[0])

    await asyncio.gather(
        *(run_prometheus(g) for g in r.queries),
        *(run_direct(w) for w in r.scrapes),
        *(run_history(g) for g in r.history),
    )
    for group, results in histories.items():  # after the load: its readings are the ones the history joins
        r.settle_history(r.history_members[group], group[2], results)
    for p in plans:
        in_namespace = pods.get(p.obj.metadata.namespace)
        if p.obj.spec.strategy is Strategy.RESTART and isinstance(in_namespace, list) and p.key in r.out:
            try:
                measured = measured_startup_seconds(in_namespace, p.obj.metadata.name)
            except Exception:  # unmeasured: the spec's start-up figure prices the restart
                log.exception("switching %s/%s: measuring its pods' start-up failed", *p.key)
                continue
            r.out[p.key] = replace(r.out[p.key], startup_seconds=measured)
    return r.out

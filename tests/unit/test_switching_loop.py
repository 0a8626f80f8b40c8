"""The switching loop with a scripted load source, a stand-in policy and an in-memory Kubernetes."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from specserve import telemetry
from specserve.api.models import Mode, Weights
from specserve.kube.client import KubeError
from specserve.kube.kinds import DEPLOYMENT, POD, Kind
from specserve.metrics.promql import LOAD_SIGNALS, PoolKey, Query, Signal
from specserve.metrics.results import QueryResult
from specserve.objects import Objects, ObjectState
from specserve.policy.curves import ModeCurves
from specserve.policy.types import Action, Knobs, PolicyState, Sample, Verdict
from specserve.status import SWITCHING_LOOP
from specserve.switching.loop import LoopConfig, SwitchingLoop

NS = "llm"
JSON = dict[str, Any]
ALL_BASE, ALL_SPEC = Weights(speculative=0, baseline=100), Weights(speculative=100, baseline=0)


def deployment(name: str, ready: int = 1) -> JSON:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 1},
        "status": {"readyReplicas": ready, "updatedReplicas": 1},
    }


@dataclass
class FakeKube:
    """Status patches land in the registry's body at once (the watch echoing our write)."""

    registry: Objects
    deployments: list[JSON] = field(default_factory=list)
    pods: list[JSON] = field(default_factory=list)
    patches: list[tuple[str, JSON]] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)

    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]:
        assert kind in (DEPLOYMENT, POD)
        return copy.deepcopy(self.deployments if kind is DEPLOYMENT else self.pods)

    async def apply_status(self, kind: Kind, namespace: str, name: str, status_body: JSON, field_manager: str) -> JSON:
        """Server-side apply as the loop's only manager: its fields are replaced by the body, conditions merged by
        type, every other field kept. Returns the object; the watch echoes it too (into the registry)."""
        assert field_manager == "specserve-switching"
        self.patches.append((name, status_body))
        tracked = self.registry.named((namespace, name))
        assert tracked is not None
        body = copy.deepcopy(tracked.body)
        status = {k: v for k, v in (body.get("status") or {}).items() if k not in SWITCHING_LOOP.fields}
        mine = [c for c in status_body.get("conditions", [])]
        kept = [c for c in status.get("conditions", []) if c["type"] not in {m["type"] for m in mine}]
        status.update({k: v for k, v in status_body.items() if k != "conditions"})
        if kept or mine:
            status["conditions"] = kept + mine
        body["status"] = status
        tracked.observe(body)
        return copy.deepcopy(body)

    async def post_event(self, involved: JSON, *, reason: str, message: str, type_: str = "Normal") -> None:
        self.events.append((type_, reason, message))


@dataclass
class FakePrometheus:
    demand: dict[str, float | None]  # per SpecServe name, all on the speculative pool
    error: str | None = None
    refused: bool = False
    reads: list[list[Query]] = field(default_factory=list)
    now: float = 0.0

    async def read(self, queries: Sequence[Query]) -> list[QueryResult]:
        self.reads.append(list(queries))
        out = []
        for q in queries:
            if self.error is not None:
                out.append(QueryResult(q, error=self.error, refused=self.refused))
                continue
            values: dict[PoolKey, float] = {}
            if q.signal is Signal.LATENCY_IN_FLIGHT:  # too few finished requests to say: the gauges decide
                out.append(QueryResult(q, values, self.now))
                continue
            for name, demand in self.demand.items():
                for pool in ("speculative", "baseline"):
                    key = PoolKey(NS, name, pool)
                    if demand is None:
                        continue
                    share = demand if pool == "speculative" else 0.0
                    values[key] = {Signal.RUNNING: share, Signal.QUEUED: 0.0, Signal.FRESHNESS: self.now}.get(
                        q.signal, 1.0
                    )
            out.append(QueryResult(q, values, self.now))
        return out


@dataclass
class FakeReaders:
    prom: FakePrometheus
    urls: list[str] = field(default_factory=list)

    def prometheus(self, url: str) -> FakePrometheus:
        self.urls.append(url)
        return self.prom

    @property
    def direct(self) -> Any:
        raise AssertionError("Direct is not used here")


@dataclass
class StandIn:
    """The policy, reduced to one rule: all weight to baseline above 10 requests, to speculative below 5."""

    calls: list[tuple[PolicyState, Sample, bool]] = field(default_factory=list)
    knobs: list[Knobs] = field(default_factory=list)

    def __call__(
        self, knobs: Knobs, curves: ModeCurves | None, state: PolicyState, sample: Sample, *, converging: bool = False
    ) -> Verdict:
        self.calls.append((state, sample, converging))
        self.knobs.append(knobs)
        streak = 0 if sample.demand is not None else state.unknown_streak + 1
        held = replace(state, unknown_streak=streak, last_evaluation=sample.time)
        hold = Verdict(held, Action.HOLD, held.mode, held.weights, "hold", demand=sample.demand)
        if sample.demand is None or converging:
            return hold
        want = ALL_BASE if sample.demand > 10 else ALL_SPEC if sample.demand < 5 else state.weights
        if want == state.weights:
            return hold
        mode = Mode.BASELINE if want == ALL_BASE else Mode.SPECULATIVE
        new = replace(held, weights=want, mode=mode, mode_since=sample.time, last_switch=sample.time)
        return Verdict(new, Action.SET_WEIGHTS, mode, want, f"demand {sample.demand} crossed", demand=sample.demand)


@dataclass
class World:
    registry: Objects
    kube: FakeKube
    prom: FakePrometheus
    policy: StandIn
    loop: SwitchingLoop
    clock: list[float]
    triggered: list[str]

    async def round_at(self, t: float) -> None:
        self.clock[0] = t
        self.prom.now = t
        await self.loop.run_round()
        await self.loop.realised()  # the reconciles it started (beside the round) have run

    def status(self, name: str = "kimi-k25") -> JSON:
        tracked = self.registry.named((NS, name))
        assert tracked is not None
        return dict(tracked.body.get("status") or {})

    def condition(self, type_: str, name: str = "kimi-k25") -> JSON:
        return next(c for c in self.status(name).get("conditions", []) if c["type"] == type_)


def body_of(doc: Mapping[str, Any], name: str = "kimi-k25", interval: int = 5, **metrics: str) -> JSON:
    body = copy.deepcopy(dict(doc))
    body["metadata"] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "generation": 1}
    body["spec"]["switching"]["evaluationIntervalSeconds"] = interval
    body["spec"]["switching"]["metrics"] = dict(metrics)
    # As the reconcile reports it before any decision: initialMode Baseline, all weight there.
    body["status"] = {"weights": {"speculative": 0, "baseline": 100}, "activeMode": "Baseline"}
    return body


def make_world(doc: Mapping[str, Any], names: Sequence[str] = ("kimi-k25",), **metrics: str) -> World:
    registry = Objects()
    for name in names:
        registry.observe(body_of(doc, name, 5, **metrics))
    kube = FakeKube(registry, [deployment(f"{n}-{p}") for n in names for p in ("spec", "base")])
    prom = FakePrometheus({n: 7.0 for n in names})  # inside the stand-in's band: no decision
    policy = StandIn()
    clock = [0.0]
    triggered: list[str] = []

    async def trigger(item: ObjectState) -> None:
        # The reconcile realising the target: the route now carries the decided weights.
        triggered.append(item.body["metadata"]["name"])
        switching = item.body["status"]["switching"]
        if switching.get("weights") is not None:
            item.observe({**item.body, "status": {**item.body["status"], "weights": switching["weights"]}})

    loop = SwitchingLoop(
        registry, kube, FakeReaders(prom), policy, trigger, LoopConfig(prometheus_url="http://prom:9090"),
        clock=lambda: clock[0],
    )  # fmt: skip
    return World(registry, kube, prom, policy, loop, clock, triggered)


@pytest.fixture()
def world(kimi_doc: dict[str, Any]) -> World:
    return make_world(kimi_doc)


async def test_first_round_records_the_state_then_steady_state_writes_nothing(world: World) -> None:
    await world.round_at(100)
    assert len(world.kube.patches) == 1
    status = world.status()
    assert status["switching"]["mode"] == "Baseline" and status["switching"]["weights"] == {
        "speculative": 0,
        "baseline": 100,
    }
    assert status["load"]["concurrency"] == 7.0
    assert world.condition("MetricsAvailable")["status"] == "True"
    assert world.condition("Switching")["status"] == "False"
    for t in (105, 110, 115, 120):
        await world.round_at(t)
    assert len(world.policy.calls) == 5  # it did evaluate every interval...
    assert len(world.kube.patches) == 1  # ...and wrote nothing more
    assert world.kube.events == []


async def test_a_decision_is_written_realised_at_once_and_announced(world: World) -> None:
    world.prom.demand["kimi-k25"] = 2.0  # below 5: all weight to speculative
    labels = {"namespace": NS, "name": "kimi-k25"}
    switches = telemetry.REGISTRY.get_sample_value("specserve_switches_total", {**labels, "action": "SetWeights"})
    await world.round_at(100)
    after = telemetry.REGISTRY.get_sample_value("specserve_switches_total", {**labels, "action": "SetWeights"})
    assert (after or 0) == (switches or 0) + 1
    assert telemetry.REGISTRY.get_sample_value("specserve_demand", labels) == 2.0
    assert telemetry.REGISTRY.get_sample_value("specserve_target_weight", {**labels, "pool": "speculative"}) == 100
    _, patch = world.kube.patches[-1]
    assert patch["switching"]["weights"] == {"speculative": 100, "baseline": 0}
    last = world.status()["lastDecision"]
    assert (last["fromMode"], last["toMode"], last["action"], last["applied"]) == (
        "Baseline", "Speculative", "SetWeights", True
    )  # fmt: skip
    assert last["concurrency"] == 2.0 and last["reason"] == "demand 2.0 crossed"
    assert world.triggered == ["kimi-k25"]  # the reconcile ran now, not at the next resync
    assert [(t, r) for t, r, _ in world.kube.events] == [("Normal", "SetWeights")]
    assert "Baseline -> Speculative" in world.kube.events[0][2]
    # The reconcile it triggers moves the route within the round: the decision is one write, Switching stays
    # Stable (Converging now and Stable at the next evaluation cost two writes per weight move).
    assert [c["status"] for c in patch["conditions"] if c["type"] == "Switching"] == ["False"]
    writes = len(world.kube.patches)
    for t in (105, 110):  # realised: nothing more to write
        await world.round_at(t)
    assert len(world.kube.patches) == writes
    assert world.condition("Switching")["status"] == "False"
    assert len(world.status()["history"]) == 1


async def test_a_route_move_not_realised_by_the_next_evaluation_is_named_converging(world: World) -> None:
    async def slow(item: ObjectState) -> None:
        world.triggered.append(item.body["metadata"]["name"])  # the reconcile does not move the route (yet)

    world.loop.trigger = slow
    world.prom.demand["kimi-k25"] = 2.0
    await world.round_at(100)
    assert world.condition("Switching")["status"] == "False"  # decided this evaluation: the reconcile runs now
    await world.round_at(105)  # a whole interval later the route still lags: named
    switching = world.condition("Switching")
    assert (switching["status"], switching["reason"]) == ("True", "Converging")
    assert "route weights 0/100 (speculative/baseline), target 100/0" in switching["message"]
    tracked = world.registry.named((NS, "kimi-k25"))
    assert tracked is not None
    tracked.body["status"]["weights"] = {"speculative": 100, "baseline": 0}  # realised at last
    await world.round_at(110)
    assert world.condition("Switching")["status"] == "False"


async def test_a_slow_reconcile_of_one_decision_holds_no_other_specserve_of_the_round(kimi_doc: JSON) -> None:
    # The round awaited each decided SpecServe's reconcile before evaluating the next one: at 200 SpecServes on a
    # real API server a round took 16-72 s, so a hostile gauge was evaluated once a minute instead of every 2 s.
    names = ("first", "second")
    w = make_world(kimi_doc, names)
    for name in names:
        w.prom.demand[name] = 2.0  # both decide
    release = asyncio.Event()
    started: list[str] = []

    async def slow_reconcile(item: ObjectState) -> None:
        started.append(item.body["metadata"]["name"])
        await release.wait()

    w.loop.trigger = slow_reconcile
    w.clock[0] = w.prom.now = 100.0
    round_ = asyncio.create_task(w.loop.run_round())
    await asyncio.wait({round_}, timeout=10)  # generous: the round never ends while a reconcile holds it
    try:
        assert round_.done(), "the round waited for a reconcile"
        assert {name for name, _ in w.kube.patches} == set(names)  # both evaluated and written
        assert sorted(started) == sorted(names)  # both reconciles started, neither finished
    finally:
        release.set()
        await asyncio.wait({round_}, timeout=10)
    await w.loop.realised()


async def test_the_writes_of_one_round_overlap(kimi_doc: JSON) -> None:
    # One after another, each status write's round trip through a busy event loop made a round over 200 SpecServes
    # take 10-30 s on a real API server. Here a write finishes only once the other SpecServe's has started.
    names = ("first", "second")
    w = make_world(kimi_doc, names)
    for name in names:
        w.prom.demand[name] = 2.0  # both decide: both write
    both = asyncio.Event()
    sent: list[str] = []
    write = w.kube.apply_status

    async def together(kind: Kind, namespace: str, name: str, status_body: JSON, field_manager: str) -> JSON:
        sent.append(name)
        if len(sent) >= len(names):
            both.set()
        await both.wait()
        return await write(kind, namespace, name, status_body, field_manager)

    w.kube.apply_status = together  # type: ignore[method-assign]
    w.clock[0] = w.prom.now = 100.0
    await asyncio.wait_for(w.loop.run_round(), timeout=30)  # generous: writes one after another never finish
    await w.loop.realised()
    assert sorted(sent) == sorted(names) and sorted(w.triggered) == sorted(names)


async def test_a_failed_reconcile_of_a_decision_is_logged_and_the_loop_goes_on(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    async def refused(item: ObjectState) -> None:
        raise KubeError(500, "etcd unavailable")

    world.loop.trigger = refused
    world.prom.demand["kimi-k25"] = 2.0
    await world.round_at(100)
    assert world.status()["switching"]["weights"] == {"speculative": 100, "baseline": 0}  # the decision stands
    assert "the reconcile realising the decision failed" in caplog.text


async def test_traffic_split_keeps_deciding_while_the_route_lags_its_target(world: World) -> None:
    world.prom.demand["kimi-k25"] = 2.0
    await world.round_at(100)
    # The reconcile has not moved the route yet (e.g. it drains a pool to roll it).
    tracked = world.registry.named((NS, "kimi-k25"))
    assert tracked is not None
    tracked.body["status"]["weights"] = {"speculative": 0, "baseline": 100}
    world.prom.demand["kimi-k25"] = 50.0
    await world.round_at(105)
    assert world.policy.calls[-1][2] is False  # not frozen: the target follows the load
    assert world.status()["switching"]["weights"] == {"speculative": 0, "baseline": 100}
    # The Switching condition still tells that the route has not reached the target.
    tracked.body["status"]["weights"] = {"speculative": 100, "baseline": 0}
    await world.round_at(110)
    assert world.condition("Switching")["status"] == "True"
    assert "route weights 100/0 (speculative/baseline), target 0/100" in world.condition("Switching")["message"]


async def test_a_pool_without_ready_pods_does_not_freeze_traffic_split(kimi_doc: dict[str, Any]) -> None:
    # A stuck or failed pool: weights between the Ready pools keep following load (the sample says which are Ready).
    w = make_world(kimi_doc)
    w.kube.deployments[0]["status"]["readyReplicas"] = 0
    await w.round_at(100)
    assert w.policy.calls[-1][2] is False
    assert w.policy.calls[-1][1].speculative is not None and w.policy.calls[-1][1].speculative.ready_replicas == 0


def restart_world(kimi_doc: dict[str, Any], status: JSON) -> World:
    doc = copy.deepcopy(kimi_doc)
    doc["spec"]["strategy"] = "Restart"
    w = make_world(doc)
    tracked = w.registry.named((NS, "kimi-k25"))
    assert tracked is not None
    tracked.body["status"] = status
    w.kube.deployments = [deployment("kimi-k25-engine")]
    return w


RESTARTED = {
    "activeMode": "Speculative",  # what serves: the roll into Baseline has not settled
    "switching": {"mode": "Baseline", "modeSince": "1970-01-01T00:01:40Z", "lastSwitch": "1970-01-01T00:01:40Z",
                  "restarts": ["1970-01-01T00:01:40Z"]},
    "lastDecision": {"time": "1970-01-01T00:01:40Z", "fromMode": "Speculative", "toMode": "Baseline",
                     "reason": "regret > cost", "action": "Restart", "applied": True},
}  # fmt: skip
DEADLINE = {"role": "engine", "name": "kimi-k25-engine", "desired": 1, "ready": 0, "updated": 1,
            "failure": {"reason": "ProgressDeadlineExceeded", "message": "ReplicaSet has timed out progressing.",
                        "deadlineExceeded": True}}  # fmt: skip


async def test_a_restart_whose_roll_ran_past_its_deadline_is_rolled_back_and_the_mode_barred(
    kimi_doc: dict[str, Any],
) -> None:
    w = restart_world(kimi_doc, {**copy.deepcopy(RESTARTED), "pools": [DEADLINE]})
    w.prom.demand["kimi-k25"] = None  # the load is unknown too: the rollback does not wait for it
    await w.round_at(400)
    switching = w.status()["switching"]
    assert switching["mode"] == "Speculative"  # the target is the mode that served
    bar = switching["barred"]
    assert [(b["mode"], b["until"], b["failures"]) for b in bar] == [("Baseline", "1970-01-01T00:16:40Z", 1)]
    assert "ProgressDeadlineExceeded" in bar[0]["reason"]
    last = w.status()["lastDecision"]
    assert (last["action"], last["fromMode"], last["toMode"]) == ("Rollback", "Baseline", "Speculative")
    assert w.status()["history"][-1] == last
    assert [(t, r) for t, r, _ in w.kube.events] == [("Warning", "Rollback")]
    assert w.triggered == ["kimi-k25"]  # realised at once
    assert w.policy.calls == []  # the policy was not asked this round
    # The roll back is under way (activeMode is still Speculative, the target too): no second rollback.
    await w.round_at(405)
    assert w.status()["lastDecision"] == last and len(w.kube.events) == 1


async def test_the_back_off_doubles_with_each_failure_and_a_converged_change_after_it_lifts_the_bar(
    kimi_doc: dict[str, Any],
) -> None:
    w = restart_world(kimi_doc, {**copy.deepcopy(RESTARTED), "pools": [DEADLINE]})
    w.status()["switching"]["barred"] = [
        {"mode": "Baseline", "until": "1970-01-01T00:05:00Z", "failures": 2, "reason": "OOMKilled"}
    ]
    await w.round_at(400)
    bar = w.status()["switching"]["barred"][0]
    assert (bar["failures"], bar["until"]) == (3, "1970-01-01T00:46:40Z")  # 400 s + 40 min
    # Later: the bar is over, the policy restarted into Baseline after it and that roll converged.
    tracked = w.registry.named((NS, "kimi-k25"))
    assert tracked is not None
    switching = {**w.status()["switching"], "mode": "Baseline", "lastSwitch": "1970-01-01T01:10:00Z"}
    tracked.body["status"] = {**w.status(), "activeMode": "Baseline", "pools": [], "switching": switching}
    await w.round_at(4500)
    assert w.status()["switching"].get("barred", []) == []


async def test_three_failed_rounds_turn_metrics_unavailable_once_and_recovery_clears_it(world: World) -> None:
    await world.round_at(100)
    world.kube.events.clear()
    world.prom.error = "Prometheus at http://prom:9090 unreachable: ConnectionError"
    await world.round_at(105)
    await world.round_at(110)
    assert world.condition("MetricsAvailable")["status"] == "True"  # two failures: not yet
    await world.round_at(115)
    cond = world.condition("MetricsAvailable")
    assert (cond["status"], cond["reason"]) == ("False", "QueryFailed")
    assert "unreachable" in cond["message"] and "sglang:num_running_reqs" in cond["message"]
    assert all(c[1].demand is None for c in world.policy.calls[-3:])  # the policy saw unknown, never 0
    writes = len(world.kube.patches)
    await world.round_at(120)
    await world.round_at(125)
    assert len(world.kube.patches) == writes  # an outage does not write every round
    assert [(t, r) for t, r, _ in world.kube.events] == [("Warning", "MetricsUnavailable")]
    world.prom.error = None
    await world.round_at(130)
    assert world.condition("MetricsAvailable")["status"] == "True"
    assert world.status()["load"]["concurrency"] == 7.0


async def test_a_refused_selector_names_prometheus_message_and_the_field(kimi_doc: dict[str, Any]) -> None:
    w = make_world(kimi_doc, seriesSelector='namespace="$namespace",app="$name"')
    w.prom.error, w.prom.refused = "Prometheus at http://prom:9090: parse error: unexpected }", True
    for t in (100, 105, 110):
        await w.round_at(t)
    cond = w.condition("MetricsAvailable")
    assert (cond["status"], cond["reason"]) == ("False", "QueryRefused")
    assert "parse error: unexpected }" in cond["message"]
    assert "spec.switching.metrics.seriesSelector" in cond["message"]
    assert "switching" in w.status() and "lastDecision" not in w.status()  # nothing switched
    assert w.prom.reads[0][-1].key is not None  # its own queries went with the grouped ones


async def test_one_query_per_signal_for_every_specserve_sharing_a_prometheus(kimi_doc: dict[str, Any]) -> None:
    names = [f"s{i}" for i in range(40)]
    w = make_world(kimi_doc, names)
    await w.round_at(100)
    assert len(w.prom.reads) == 1
    assert len(w.prom.reads[0]) == len(LOAD_SIGNALS)
    assert len(w.policy.calls) == 40


async def test_each_specserve_keeps_its_own_evaluation_interval(kimi_doc: dict[str, Any]) -> None:
    w = make_world(kimi_doc)
    w.registry.observe(body_of(kimi_doc, "slow", interval=12))
    w.kube.deployments += [deployment("slow-spec"), deployment("slow-base")]
    w.prom.demand["slow"] = 2.0
    for t in range(100, 125):  # the loop ticks every second
        await w.round_at(float(t))
    times = [c[1].time for c in w.policy.calls]
    # Every 5 s and every 12 s, on the clock's grid of each interval (so same-interval SpecServes share rounds).
    assert times == [100.0, 100.0, 105.0, 108.0, 110.0, 115.0, 120.0, 120.0]


async def test_a_restarted_operator_resumes_from_status(world: World) -> None:
    world.prom.demand["kimi-k25"] = 2.0
    await world.round_at(100)
    saved = world.status()["switching"]
    # A new loop (operator restart): no memory, only status.
    again = SwitchingLoop(
        world.registry, world.kube, FakeReaders(world.prom), world.policy, lambda item: asyncio.sleep(0),
        LoopConfig(prometheus_url="http://prom:9090"), clock=lambda: world.clock[0],
    )  # fmt: skip
    world.clock[0] = world.prom.now = 300.0
    await again.run_round()
    state = world.policy.calls[-1][0]
    assert state.mode is Mode.SPECULATIVE and state.last_switch == 100.0  # no forgotten dwell
    assert world.status()["switching"] == saved
    assert len(world.status()["history"]) == 1  # no second switch


async def test_load_snapshot_moves_only_materially(world: World) -> None:
    await world.round_at(100)
    writes = len(world.kube.patches)
    world.prom.demand["kimi-k25"] = 7.6  # +0.6: less than one request
    await world.round_at(105)
    assert len(world.kube.patches) == writes
    world.prom.demand["kimi-k25"] = 9.0  # +2 and +22%, but the snapshot is 10 s old: it waits
    await world.round_at(110)
    assert len(world.kube.patches) == writes
    await world.round_at(130)  # 30 s old: refreshed
    assert len(world.kube.patches) == writes + 1
    assert world.status()["load"]["concurrency"] == 9.0
    assert "lastDecision" not in world.status()


async def test_a_restart_in_progress_is_resumed_not_repeated(kimi_doc: dict[str, Any]) -> None:
    """An operator killed after deciding a Restart: the new one sees the target in status, the pods still in the
    old mode, and holds (converging) with the restart budget it had."""
    restart_doc = copy.deepcopy(kimi_doc)
    restart_doc["spec"]["strategy"] = "Restart"
    w = make_world(restart_doc)
    tracked = w.registry.named((NS, "kimi-k25"))
    assert tracked is not None
    tracked.body["status"] = {
        "activeMode": "Speculative",  # the reconcile has not rolled the pods yet
        "switching": {"mode": "Baseline", "modeSince": "1970-01-01T00:01:40Z", "lastSwitch": "1970-01-01T00:01:40Z",
                      "restarts": ["1970-01-01T00:01:40Z"]},
        "lastDecision": {"time": "1970-01-01T00:01:40Z", "fromMode": "Speculative", "toMode": "Baseline",
                         "reason": "regret > cost", "action": "Restart", "applied": True},
    }  # fmt: skip
    w.kube.deployments = [deployment("kimi-k25-engine")]
    await w.round_at(130)
    state, _, converging = w.policy.calls[-1]
    assert converging is True
    assert state.mode is Mode.BASELINE and state.restarts == (100.0,)
    assert w.triggered == [] and w.kube.events == []
    assert w.condition("Switching")["status"] == "True"
    assert "restarting pods into Baseline" in w.condition("Switching")["message"]


async def test_specserves_created_apart_share_their_rounds(kimi_doc: dict[str, Any]) -> None:
    w = make_world(kimi_doc, ["a"])
    await w.round_at(100.3)
    w.registry.observe(body_of(kimi_doc, "b", 5))
    w.kube.deployments += [deployment("b-spec"), deployment("b-base")]
    w.prom.demand["b"] = 7.0
    await w.round_at(103.7)  # b's first evaluation: at once
    reads = len(w.prom.reads)
    await w.round_at(105.0)  # both due on the 5 s grid: one read for the two
    assert len(w.prom.reads) == reads + 1
    assert [c[1].time for c in w.policy.calls] == [100.3, 103.7, 105.0, 105.0]


async def test_a_specserve_without_metrics_costs_no_write_until_they_are_declared_unavailable(
    kimi_doc: dict[str, Any],
) -> None:
    w = make_world(kimi_doc)
    w.prom.error = "Prometheus at http://prom:9090 unreachable: ConnectionError"
    await w.round_at(100)
    await w.round_at(105)
    assert w.kube.patches == []  # no status.switching and no loop condition yet
    await w.round_at(110)
    assert len(w.kube.patches) == 1
    assert w.condition("MetricsAvailable")["status"] == "False"
    assert w.status()["switching"]["unknownStreak"] == 3
    assert [(t, r) for t, r, _ in w.kube.events] == [("Warning", "MetricsUnavailable")]


async def test_a_restart_is_priced_with_the_start_up_its_pods_measured(kimi_doc: dict[str, Any]) -> None:
    doc = copy.deepcopy(kimi_doc)
    doc["spec"]["strategy"] = "Restart"
    world = make_world(doc)
    await world.round_at(100)
    assert world.policy.knobs[-1].startup_seconds == 600.0  # no pod has shown it: the documented default
    world.kube.pods = [
        {
            "metadata": {"name": "kimi-k25-engine-0", "labels": {"specserve.io/instance": "kimi-k25"}},
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T10:08:30Z"}],
                "containerStatuses": [{"name": "sglang", "state": {"running": {"startedAt": "2026-12-01T10:00:00Z"}}}],
            },
        }
    ]
    await world.round_at(105)
    assert world.policy.knobs[-1].startup_seconds == 510.0


async def test_a_pending_move_stored_untyped_by_an_earlier_release_is_written_back_typed(world: World) -> None:
    await world.round_at(100)
    tracked = world.registry.named((NS, "kimi-k25"))
    assert tracked is not None
    switching = {**tracked.body["status"]["switching"], "pending": "w=40", "pendingSince": "1970-01-01T00:01:40Z"}
    tracked.body["status"] = {**tracked.body["status"], "switching": switching}
    writes = len(world.kube.patches)
    await world.round_at(105)
    assert len(world.kube.patches) == writes + 1
    written = world.status()["switching"]
    assert "pendingSince" not in written and not isinstance(written.get("pending"), str)
    await world.round_at(110)
    assert len(world.kube.patches) == writes + 1  # once


async def test_the_answer_to_the_loops_write_does_not_replace_a_newer_body_the_watch_delivered_meanwhile(
    world: World,
) -> None:
    """The loop's status write is in flight while the watch delivers a newer body (a spec change, the reconcile's
    write): the server's answer to the loop's write is older and must not replace it (the same staleness guard
    as the watch and the reconcile's own write)."""
    state = world.registry.named((NS, "kimi-k25"))
    assert state is not None
    state.observe({**state.body, "metadata": {**state.body["metadata"], "resourceVersion": "5"}})
    write = world.kube.apply_status

    async def newer_during_the_write(
        kind: Kind, namespace: str, name: str, status_body: JSON, field_manager: str
    ) -> JSON:
        answer = await write(kind, namespace, name, status_body, field_manager)
        newer = copy.deepcopy(answer)
        newer["metadata"].update(resourceVersion="7", annotations={"changed": "meanwhile"})
        state.observe(newer)  # the watch, while the write's answer is on its way
        answer["metadata"]["resourceVersion"] = "6"
        return answer

    world.kube.apply_status = newer_during_the_write  # type: ignore[method-assign]
    world.prom.demand["kimi-k25"] = 2.0  # below 5: the stand-in policy moves the weight, the loop writes
    await world.round_at(100)
    assert world.kube.patches and world.triggered == ["kimi-k25"]
    assert state.body["metadata"]["resourceVersion"] == "7"
    assert state.body["metadata"]["annotations"] == {"changed": "meanwhile"}


def test_a_watch_event_older_than_the_answer_to_our_write_does_not_replace_it() -> None:
    registry = Objects()
    registry.observe({"metadata": {"namespace": NS, "name": "a", "resourceVersion": "10"}})
    tracked = registry.named((NS, "a"))
    assert tracked is not None
    tracked.observe({"metadata": {"namespace": NS, "name": "a", "resourceVersion": "12"}, "status": {"x": 1}})
    registry.observe({"metadata": {"namespace": NS, "name": "a", "resourceVersion": "11"}})  # queued before
    assert tracked.body["status"] == {"x": 1}
    registry.observe({"metadata": {"namespace": NS, "name": "a", "resourceVersion": "13"}})
    assert tracked.body["metadata"]["resourceVersion"] == "13"


async def test_a_paused_specserve_holds_says_paused_and_moves_again_on_resume(world: World) -> None:
    tracked = world.registry.named((NS, "kimi-k25"))
    assert tracked is not None
    tracked.body["metadata"]["annotations"] = {"specserve.io/paused": "true"}
    world.prom.demand["kimi-k25"] = 2.0  # below 5: the policy wants all weight on speculative
    await world.round_at(100)
    assert world.triggered == []  # nothing to realise
    assert world.status()["switching"]["weights"] == {"speculative": 0, "baseline": 100}
    switching = world.condition("Switching")
    assert (switching["status"], switching["reason"]) == ("False", "Paused")
    labels = {"namespace": NS, "name": "kimi-k25"}
    assert telemetry.REGISTRY.get_sample_value("specserve_paused", labels) == 1
    assert not [e for e in world.kube.events if e[1] == "SetWeights"]

    tracked.body["metadata"]["annotations"] = {}
    await world.round_at(105)
    assert world.triggered == ["kimi-k25"]
    assert world.status()["switching"]["weights"] == {"speculative": 100, "baseline": 0}
    assert telemetry.REGISTRY.get_sample_value("specserve_paused", labels) == 0

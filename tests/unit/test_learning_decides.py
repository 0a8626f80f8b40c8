"""The curves the policy decides with are the learned, slew-bounded effective ones (docs/learning.md): the shared
learning round returns them, the switching loop hands them to the policy, and simulate's learned policy runs the
loop's own round, so its figures are the operator's."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

import specserve.switching.loop as loop_module
import specserve_tools.simulate.learned as simulate_learned
from specserve.api.models import Mode, Strategy
from specserve.metrics.promql import Signal
from specserve.objects import Objects, ObjectState, Remembered
from specserve.policy.curves import ModeCurves, crossover
from specserve.policy.learning import Learning, Point, effective, start
from specserve.policy.types import Action, Knobs, PolicyState, Sample, Verdict
from specserve.switching import learning as switching_learning
from specserve.switching.learning import learning_round, to_status
from specserve.switching.loop import LoopConfig, SwitchingLoop
from specserve_tools.simulate.learned import LearnedPolicy
from tests.unit.policy_helpers import ILLUSTRATIVE, knobs, profile_curves
from tests.unit.test_switching_loop import NS, FakeKube, FakePrometheus, FakeReaders, body_of, deployment

CURVES = profile_curves(ILLUSTRATIVE)  # speculation wins below 64 per replica
T0 = 10_000.0


def slowed(curves: ModeCurves, applied: float, t: float = T0) -> Learning:
    """Learning that has moved the speculative curve the policy uses to `applied` x calibrated (the evidence since
    reset by a drift, so nothing pulls it back within a test's minutes)."""
    fresh = start(curves)
    points = tuple(Point(weight=0.0, ratio=1.0, applied=applied) for _ in fresh.grid)
    return replace(fresh.with_mode(Mode.SPECULATIVE, replace(fresh.speculative, points=points)), updated=t)


def idle(t: float) -> Sample:
    return Sample(t, 0.0)


def test_the_round_decides_with_the_effective_curves_where_learning_moved_them() -> None:
    saved = to_status(CURVES, slowed(CURVES, 0.6), T0)
    done = learning_round(None, saved, CURVES, idle(T0 + 15), Strategy.RESTART, settled=True, interval=15.0)
    assert done.curves == effective(CURVES, done.round.learning)
    assert done.curves != CURVES
    cross, calibrated = crossover(done.curves), crossover(CURVES)
    assert cross is not None and calibrated is not None and cross < calibrated / 2
    # Slew-bounded: one 15 s round moved the applied ratio back towards 1 by at most 25 % per hour of it.
    at = 8.0
    assert done.curves.speculative.at(at) / CURVES.speculative.at(at) == pytest.approx(0.6, abs=0.25 * 15 / 3600 + 1e-6)


def test_no_evidence_or_adaptive_decides_with_the_calibrated_curves() -> None:
    fresh = learning_round(None, None, CURVES, idle(T0), Strategy.TRAFFIC_SPLIT, settled=True, interval=15.0)
    assert fresh.curves == CURVES
    saved = to_status(CURVES, slowed(CURVES, 0.6), T0)
    adaptive = learning_round(None, saved, CURVES, idle(T0 + 15), Strategy.ADAPTIVE, settled=True, interval=15.0)
    assert adaptive.curves == CURVES  # Adaptive re-renders from the calibrated curves (docs/learning.md)


def test_removing_status_learning_starts_over_though_the_loop_remembers() -> None:
    """`kubectl patch ... -p '{"status":{"learning":null}}'` (docs/learning.md): the loop's memory is of a status
    that is gone, so the next round starts from the calibrated curves and says so in status at once."""
    learned = slowed(CURVES, 0.6)
    saved = to_status(CURVES, learned, T0)
    memory = Remembered(learned, saved.last_update)
    kept = learning_round(memory, saved, CURVES, idle(T0 + 15), Strategy.TRAFFIC_SPLIT, settled=True, interval=15.0)
    assert kept.curves != CURVES  # memory still matches status: what was learned holds
    again = learning_round(memory, None, CURVES, idle(T0 + 15), Strategy.TRAFFIC_SPLIT, settled=True, interval=15.0)
    assert again.curves == CURVES
    assert again.write is not None and again.write.last_update is not None


@dataclass
class Recorder:
    """The policy, holding always, recording the curves and sample it was handed."""

    calls: list[tuple[ModeCurves | None, Sample, bool]] = field(default_factory=list)

    def __call__(
        self, knobs: Knobs, curves: ModeCurves | None, state: PolicyState, sample: Sample, *, converging: bool = False
    ) -> Verdict:
        self.calls.append((curves, sample, converging))
        held = replace(state, last_evaluation=sample.time)
        return Verdict(held, Action.HOLD, held.mode, held.weights, "hold", demand=sample.demand)


def curve_points(curves: ModeCurves) -> dict[str, list[dict[str, float]]]:
    def pts(mode: Mode) -> list[dict[str, float]]:
        return [{"concurrency": x, "tokensPerSecond": y} for x, y in curves.curve(mode).points()]

    return {"speculative": pts(Mode.SPECULATIVE), "baseline": pts(Mode.BASELINE)}


Looped = tuple[SwitchingLoop, Recorder, list[float], FakePrometheus]


def every_round_due(loop: SwitchingLoop) -> None:
    for state in loop.objects:
        state.loop.due = -math.inf


def loop_with(doc: dict[str, Any], learning: Learning | None, demand: float) -> Looped:
    body = body_of(doc, interval=5)
    body["spec"]["switching"]["curves"] = curve_points(CURVES)
    if learning is not None:
        saved = to_status(CURVES, learning, learning.updated or T0)
        body["status"]["learning"] = saved.model_dump(mode="json", by_alias=True, exclude_none=True)
    registry = Objects()
    registry.observe(body)
    kube = FakeKube(registry, [deployment("kimi-k25-spec"), deployment("kimi-k25-base")])
    clock = [T0]
    recorder = Recorder()

    async def trigger(item: ObjectState) -> None:
        return None

    prom = FakePrometheus({"kimi-k25": demand})
    loop = SwitchingLoop(
        registry, kube, FakeReaders(prom), recorder, trigger, LoopConfig(prometheus_url="http://prom:9090"),
        clock=lambda: clock[0],
    )  # fmt: skip
    return loop, recorder, clock, prom


def serve_speculative(prom: FakePrometheus, tokens_per_second: float) -> None:
    """The pools' throughput series read as the speculative pool serving `tokens_per_second`, the plain one nothing."""

    async def tokens(queries: Any) -> Any:
        results = await FakePrometheus.read(prom, queries)
        out = []
        for r in results:
            throughput = r.query.signal in (Signal.TOKENS, Signal.GEN_THROUGHPUT)
            values = {k: tokens_per_second if k.pool == "speculative" else 0.0 for k in r.values}
            out.append(replace(r, values=values) if throughput else r)
        return out

    prom.read = tokens  # type: ignore[method-assign]


async def test_the_loop_hands_the_policy_the_curves_status_says_it_decides_with(kimi_doc: dict[str, Any]) -> None:
    loop, recorder, clock, _ = loop_with(copy.deepcopy(kimi_doc), slowed(CURVES, 0.6, T0 - 5), demand=7.0)
    for i in range(3):
        clock[0] = T0 + 5 * i
        every_round_due(loop)  # the test steps the clock itself
        await loop.run_round()
    assert len(recorder.calls) == 3
    tracked = loop.objects.named((NS, "kimi-k25"))
    assert tracked is not None
    learned = tracked.body["status"]["learning"]
    for curves, _, _ in recorder.calls:
        assert curves is not None and curves != CURVES
        # status.learning.crossover.effective: "the crossover of the curves the policy decides with"
        assert crossover(curves) == pytest.approx(learned["crossover"]["effective"], rel=0.01)
        assert crossover(curves) != pytest.approx(learned["crossover"]["calibrated"], rel=0.1)


async def test_simulate_and_the_loop_decide_with_the_same_curves_round_by_round(kimi_doc: dict[str, Any]) -> None:
    """The same samples through the loop (what it hands the policy) and through simulate's learned policy (what
    it decides with): equal every round, while the pool serves half its calibrated curve and learning moves."""
    shared = switching_learning.learning_round
    assert vars(simulate_learned)["learning_round"] is shared is vars(loop_module)["learning_round"]
    loop, recorder, clock, prom = loop_with(copy.deepcopy(kimi_doc), None, demand=7.0)
    served = CURVES.speculative.at(7.0) * 0.5

    serve_speculative(prom, served)  # half its calibrated curve
    for i in range(60):
        clock[0] = prom.now = T0 + 5 * i
        every_round_due(loop)
        await loop.run_round()
    policy = LearnedPolicy(knobs(Strategy.TRAFFIC_SPLIT), CURVES, Mode.BASELINE, Strategy.TRAFFIC_SPLIT, interval=5.0)
    moved = False
    for curves, sample, converging in recorder.calls:
        policy.decide(sample, converging)
        assert policy.curves == curves
        moved = moved or curves != CURVES
    assert moved, "learning never moved the curves: the comparison says nothing"


async def test_a_modelled_specserve_learns_once_its_pools_give_the_model_units(kimi_doc: dict[str, Any]) -> None:
    """crossoverConcurrency alone: the loop decides with the model as it is until the pools' readings confirm a
    scale, then writes status.learning (modelScale) and hands the policy curves with units."""
    doc = copy.deepcopy(kimi_doc)
    loop, recorder, clock, prom = loop_with(doc, None, demand=7.0)
    tracked = loop.objects.named((NS, "kimi-k25"))
    assert tracked is not None
    switching = tracked.body["spec"]["switching"]
    del switching["curves"]
    switching["crossoverConcurrency"] = 24.0
    tracked.observe({**tracked.body, "metadata": {**tracked.body["metadata"], "generation": 2}})

    serve_speculative(prom, 900.0)
    for i in range(12):
        clock[0] = prom.now = T0 + 5 * i
        every_round_due(loop)
        await loop.run_round()
    learned = tracked.body["status"].get("learning")
    assert learned is not None and learned["modelScale"] > 0
    first = recorder.calls[0][0]
    assert first is not None and first.unitless  # relative units until the readings agree
    last = recorder.calls[-1][0]
    assert last is not None and not last.unitless and last.scale == pytest.approx(learned["modelScale"])

"""The switching loop: one task per operator, ticking about once a second, evaluating the SpecServes whose
own spec.switching.evaluationIntervalSeconds is due. kopf timers have one fixed interval, and a daemon per
SpecServe would send one query per SpecServe; one loop reads them all with one query per signal."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pydantic import ValidationError

from specserve import telemetry
from specserve.api import reasons
from specserve.api.conditions import CURVE_DRIFT
from specserve.api.models import SpecServe
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.kube.client import KubeError
from specserve.kube.kinds import Kind
from specserve.metrics.signal import Reading, failed
from specserve.objects import Memory, Objects, ObjectState, Remembered
from specserve.policy.curves import ModeCurves, crossover, curves_from_spec
from specserve.policy.knobs import knobs_from_spec, shares_gpus
from specserve.policy.pause import PausedDecide, is_paused
from specserve.policy.types import Action, Knobs
from specserve.status import read_status
from specserve.switching.evaluate import Decide, Evaluation, evaluate
from specserve.switching.gather import Gathered, Readers, ReadPlan, gather, read_plan, readiness_only
from specserve.switching.learning import Learned, drift_message, learning_round
from specserve.switching.pools import converging
from specserve.switching.record import became_unavailable
from specserve.switching.state import resume

log = logging.getLogger(__name__)
JSON = dict[str, Any]
# A round over hundreds of SpecServes is pure CPU between its writes (1-2 ms each, evaluations that write
# nothing never await): it lets the event loop run every this many, so a failover's watch event and urgent
# reconcile never wait for a whole round (at 1000 SpecServes on a busy machine, seconds).
_YIELD_EVERY = 20
_WRITERS = 16  # evaluations of one round whose writes may be in flight at once
# MetricsAvailable's reason when one SpecServe's evaluation raised: its load is unknown, it holds, and the round
# goes on for the others (an OverflowError on a hostile gauge ended every round for every SpecServe).


class LoopKube(Protocol):
    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]: ...
    async def apply_status(
        self, kind: Kind, namespace: str, name: str, status_body: JSON, field_manager: str
    ) -> JSON: ...
    async def post_event(self, involved: JSON, *, reason: str, message: str, type_: str = "Normal") -> None: ...


Trigger = Callable[[ObjectState], Awaitable[None]]


def next_due(now: float, interval: float) -> float:
    """The next multiple of the interval on the clock: SpecServes with the same interval fall due in the same
    round whenever they were created, so they share its queries and Deployment lists."""
    return (math.floor(now / interval) + 1) * interval


@dataclass(frozen=True)
class LoopConfig:
    prometheus_url: str | None = None  # the operator's --prometheus-url
    tick_seconds: float = 1.0


@dataclass
class RoundReport:
    evaluated: int = 0
    written: int = 0
    changed: int = 0
    seconds: float = 0.0


class SwitchingLoop:
    def __init__(
        self,
        objects: Objects,
        kube: LoopKube,
        readers: Readers,
        decide: Decide,
        trigger: Trigger,
        config: LoopConfig,
        clock: Callable[[], float] = time.time,
    ) -> None:
        # What the loop remembers of each SpecServe between rounds is in its ObjectState (state.loop): it goes with
        # the object's one forget, so the loop has nothing of its own to clean up.
        self.objects, self.kube, self.readers, self.decide = objects, kube, readers, decide
        self.trigger, self.config, self.clock = trigger, config, clock
        self._realising: set[asyncio.Task[None]] = set()  # reconciles of decided targets, in flight

    @staticmethod
    def _curves_of(state: ObjectState, obj: SpecServe) -> ModeCurves | None:
        cached = state.loop.curves  # building curves is pure but not free: once per spec change
        if cached is None or cached[0] is not obj.spec.switching:
            cached = state.loop.curves = (obj.spec.switching, curves_from_spec(obj.spec.switching))
        return cached[1]

    async def _due_now(self, now: float) -> list[tuple[ObjectState, SpecServe, ReadPlan]]:
        due = []
        for state in self.objects:
            if now < state.loop.due:
                continue
            try:
                obj = parse_object(state.body)
            except (InvalidSpecServe, ValidationError):
                continue  # the reconcile reports it; the last good target keeps serving
            try:
                status = read_status(state.body)
                mode = resume(obj, status, now).mode
                due.append((state, obj, read_plan(obj, mode, self.config.prometheus_url)))
            except Exception:  # this SpecServe only; it is tried again next tick
                log.exception("switching %s/%s: cannot plan its evaluation", *state.key)
                continue
            if len(due) % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
        return due

    async def run_round(self) -> RoundReport:
        started, now = time.perf_counter(), self.clock()
        due = await self._due_now(now)
        report = RoundReport()
        if not due:
            return report
        gathered = await gather(self.kube, self.readers, [p for _, _, p in due], now)
        # Evaluations overlap their writes (status, Events), _WRITERS at a time: one after another, each write's
        # round trip through a busy event loop made a round over 200 SpecServes take 10-30 s instead of 2 s.
        writers = asyncio.Semaphore(_WRITERS)

        async def one(state: ObjectState, obj: SpecServe, p: ReadPlan) -> Evaluation | None:
            async with writers:
                state.loop.due = next_due(now, obj.spec.switching.evaluation_interval_seconds)
                failure = Gathered(failed(now, reasons.EVALUATION_FAILED, "not read this round"), ())
                try:
                    return await self._evaluate(state, obj, p, gathered.get(p.key) or failure, now)
                except KubeError as exc:
                    log.warning("switching %s/%s: status write failed, retried next round: %s", *p.key, exc)
                except Exception:  # even the unknown-load evaluation failed: this SpecServe only, logged
                    log.exception("switching %s/%s: evaluation failed", *p.key)
                    telemetry.METRIC_ERRORS.labels(*p.key, reasons.EVALUATION_FAILED).inc()
                return None

        for done in await asyncio.gather(*(one(*d) for d in due)):
            if done is not None:
                report.evaluated += 1
                report.written += done.written
                report.changed += done.changed
        report.seconds = time.perf_counter() - started
        telemetry.EVALUATION_SECONDS.observe(report.seconds)
        return report

    async def _evaluate(self, state: ObjectState, obj: SpecServe, p: ReadPlan, got: Gathered, now: float) -> Evaluation:
        try:
            done, learned = await self._decide(state, obj, p, got, now, learn=True)
        except KubeError:
            raise
        except Exception as exc:  # this SpecServe's data broke its evaluation: its load is unknown, it holds
            log.exception("switching %s/%s: evaluation failed; holding on unknown load", *p.key)
            message = (
                f"the evaluation failed unexpectedly ({type(exc).__name__}) on the load read: treated as unknown; "
                "the operator's log has the details"
            )
            unknown = Reading(readiness_only(replace(got.reading.sample, time=now), message), reasons.EVALUATION_FAILED)
            got = Gathered(unknown, got.pools, got.startup_seconds)
            done, learned = await self._decide(state, obj, p, got, now, learn=False)
        state.loop.policy = Memory(persisted=done.persisted, live=done.state)
        body = state.body
        if learned is not None:
            written = done.after.learning
            state.loop.learning = Remembered(learned.round.learning, written.last_update if written else None)
            for drift in learned.round.drifts:
                await self.kube.post_event(body, reason=CURVE_DRIFT, message=drift_message(drift), type_="Warning")
                log.warning("switching %s/%s: %s", *p.key, drift_message(drift))
        if done.server is not None:
            # The server's answer: the reconcile triggered below, and the next round, start from it, unless the
            # watch delivered a newer body during the write (the staleness guard in ObjectState.observe).
            state.observe(done.server)
        await self._tell(state, obj, done, got)
        if done.changed:
            self._realise(state)  # the new target now, not at the next resync
        return done

    def _realise(self, state: ObjectState) -> None:
        """The reconcile that realises a decided target, beside the round rather than inside it: awaited here, each
        changed SpecServe held every one after it behind its whole reconcile (at 200 SpecServes on a real API
        server, rounds of 16-72 s instead of 2 s: a hostile gauge went unnamed for a minute). The trigger is an
        urgent reconcile: one pass per object at a time, a second trigger while one is queued is dropped."""
        task = asyncio.create_task(self._trigger(state), name=f"realise {state.key[0]}/{state.key[1]}")
        self._realising.add(task)
        task.add_done_callback(self._realising.discard)

    async def _trigger(self, state: ObjectState) -> None:
        try:
            await self.trigger(state)
        except KubeError as exc:  # the next resync realises it
            log.warning("switching %s/%s: the reconcile realising the decision failed: %s", *state.key, exc)
        except Exception:
            log.exception("switching %s/%s: the reconcile realising the decision failed", *state.key)

    async def realised(self) -> None:
        """Wait for the reconciles this loop has started (tests; and the loop's end)."""
        while self._realising:
            await asyncio.gather(*self._realising, return_exceptions=True)

    async def _decide(
        self, state: ObjectState, obj: SpecServe, p: ReadPlan, got: Gathered, now: float, learn: bool
    ) -> tuple[Evaluation, Learned | None]:
        """The verdict and the loop's status write; nothing else is changed until it returns."""
        knobs: Knobs = knobs_from_spec(obj, startup_seconds=got.startup_seconds)
        paused = is_paused(obj.metadata.annotations)  # kubectl specserve pause: hold all but failover
        decide: Decide = PausedDecide(self.decide) if paused else self.decide
        learned = self._learn(state, obj, got, now) if learn else None
        inputs = (decide, knobs, learned.curves if learned is not None else self._curves_of(state, obj))
        memory = state.loop.policy
        add = learned.apply if learned is not None else None
        done = await evaluate(self.kube, state.body, obj, inputs, got.reading, got.pools, p.source, memory, now, add)
        return done, learned

    def _learn(self, state: ObjectState, obj: SpecServe, got: Gathered, now: float) -> Learned | None:
        """This round's live curves (policy.learning), learned from the calibrated curves, or from the crossover
        model once the pools' readings have given it units (policy.units; until then it decides as it is)."""
        curves = self._curves_of(state, obj)
        if curves is None:
            return None
        status = read_status(state.body)
        settled = got.reading.reason is None and converging(obj, status, got.pools) is None
        sample = replace(got.reading.sample, time=now)
        interval = obj.spec.switching.evaluation_interval_seconds
        memory = state.loop.learning
        strategy, shared = obj.spec.strategy, shares_gpus(obj)
        return learning_round(memory, status.learning, curves, sample, strategy, settled, interval, shared)

    async def _tell(self, state: ObjectState, obj: SpecServe, done: Evaluation, got: Gathered) -> None:
        ns, name = obj.metadata.namespace, obj.metadata.name
        verdict, reading = done.verdict, got.reading
        telemetry.EVALUATIONS.labels(ns, name, "unknown" if reading.reason else "known").inc()
        telemetry.DEMAND.labels(ns, name).set(reading.sample.demand if reading.sample.demand is not None else math.nan)
        if reading.reason:
            telemetry.METRIC_ERRORS.labels(ns, name, reading.reason).inc()
        curves = self._curves_of(state, obj)
        cross = obj.spec.switching.crossover_concurrency or (crossover(curves) if curves is not None else None)
        telemetry.observe_spec(ns, name, obj, cross, is_paused(obj.metadata.annotations))
        if done.persisted is not None and done.persisted.weights is not None:
            telemetry.TARGET_WEIGHT.labels(ns, name, "speculative").set(done.persisted.weights.speculative)
            telemetry.TARGET_WEIGHT.labels(ns, name, "baseline").set(done.persisted.weights.baseline)
        if verdict.action is not Action.HOLD:
            applied = str(verdict.applied).lower()
            telemetry.DECISIONS.labels(ns, name, verdict.action.value, verdict.rule.value, applied).inc()
        if done.changed:
            telemetry.SWITCHES.labels(ns, name, verdict.action.value).inc()
            message = f"{done.from_mode.value if done.from_mode else '-'} -> {verdict.mode.value}"
            if verdict.weights is not None:
                message += f" (weights {verdict.weights.speculative}/{verdict.weights.baseline})"
            # A rollback is the loop undoing its own change that failed: a Warning, as the roll's failure is.
            kind = "Warning" if verdict.action is Action.ROLLBACK else "Normal"
            await self.kube.post_event(
                state.body, reason=verdict.action.value, message=f"{message}: {verdict.reason}", type_=kind
            )
            log.info("switching %s/%s: %s", ns, name, message)
        unavailable = became_unavailable(done.before, done.after)
        if unavailable is not None:
            await self.kube.post_event(
                state.body, reason=reasons.METRICS_UNAVAILABLE, message=unavailable, type_="Warning"
            )
            log.warning("switching %s/%s: load unknown: %s", ns, name, unavailable)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.run_round()
            except Exception:  # one bad round must not end switching for every SpecServe
                log.exception("switching round failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.config.tick_seconds)
        # Stopped (leadership lost, or shutdown): the reconciles it started stop too; the next start repairs.
        for task in list(self._realising):
            task.cancel()
        await asyncio.gather(*self._realising, return_exceptions=True)

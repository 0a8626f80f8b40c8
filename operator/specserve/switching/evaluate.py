"""One SpecServe's evaluation: state from status, the policy's verdict, the status to write (pure), and the
write itself: a server-side apply of the loop's own status fields under its own field manager.

The loop owns status.switching, load, lastDecision, history and the MetricsAvailable and Switching conditions
(conditions are a list map keyed by type), and applies all of them, and only them, every time it writes: the
reconcile's fields (activeMode, weights, pools, its conditions) are never in its body, so neither writer can undo
the other with an older copy, and there is no diff base or write memo to share. It writes when its fields, as
the live object holds them, differ from what it means them to be."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from specserve.api.models import Action, Mode, SpecServe, SpecServeStatus
from specserve.kube.kinds import SPECSERVE, Kind
from specserve.metrics.signal import Reading
from specserve.objects import Memory
from specserve.policy.curves import ModeCurves
from specserve.policy.pause import is_paused
from specserve.policy.rollback import converged, rollback
from specserve.policy.types import Knobs, PolicyState, Sample, Verdict
from specserve.status import SWITCHING_LOOP, read_status
from specserve.switching.pools import PoolState, converging, switching_wait
from specserve.switching.record import (
    Source,
    decision,
    is_new,
    load_due,
    load_snapshot,
    metrics_condition,
    named,
    switching_condition,
    with_decision,
    with_state,
)
from specserve.switching.rollback import failed_change
from specserve.switching.state import material, resume, status_time, worth_writing

JSON = dict[str, Any]


class Decide(Protocol):
    def __call__(
        self, knobs: Knobs, curves: ModeCurves | None, state: PolicyState, sample: Sample, *, converging: bool = False
    ) -> Verdict: ...


class StatusWriter(Protocol):
    async def apply_status(
        self, kind: Kind, namespace: str, name: str, status_body: JSON, field_manager: str
    ) -> JSON: ...


@dataclass(frozen=True)
class Evaluation:
    verdict: Verdict
    before: SpecServeStatus
    after: SpecServeStatus
    state: PolicyState  # the live state after this round
    persisted: PolicyState | None  # what status.switching holds after this round (None: nothing yet)
    written: bool = False  # a status write was made
    from_mode: Mode | None = None  # the mode before this verdict
    server: JSON | None = None  # the object as the server returned it after the write (None: no write)

    @property
    def changed(self) -> bool:
        """The target moved: the reconcile must realise it now."""
        return self.verdict.action is not Action.HOLD and self.verdict.applied


def starting_state(obj: SpecServe, status: SpecServeStatus, memory: Memory | None, now: float) -> PolicyState:
    """The state the policy continues from: status's, unless memory holds a newer view of the same state."""
    if memory is not None and memory.persisted is None and status.switching is None:
        return memory.live  # seen before, nothing worth writing yet: the streak goes on in memory
    saved = resume(obj, status, now)
    if memory is not None and memory.persisted is not None and material(memory.persisted) == material(saved):
        return memory.live
    return saved  # a first sight, an operator restart, or someone else changed status.switching


def first_write(verdict: Verdict, reading: Reading) -> bool:
    """Whether a SpecServe without status.switching gets it now: once the load was read, a change was decided,
    or the metrics are declared unavailable. Until then the loop writes nothing (a SpecServe with no metrics
    yet costs no API writes)."""
    return reading.reason is None or verdict.action is not Action.HOLD or named(reading, verdict.state.unknown_streak)


def next_status(
    obj: SpecServe,
    status: SpecServeStatus,
    saved: PolicyState,
    verdict: Verdict,
    reading: Reading,
    pools: tuple[PoolState, ...],
    source: Source,
    now: float,
) -> tuple[SpecServeStatus, PolicyState | None]:
    """The status after this verdict (pure) and the state it persists (None: nothing yet)."""
    generation = obj.metadata.generation
    stamp = status_time(now)
    new: SpecServeStatus = status
    persisted: PolicyState | None = saved if status.switching is not None else None
    first = status.switching is None
    if first_write(verdict, reading) if first else worth_writing(saved, verdict.state):
        new, persisted = with_state(new, verdict.state), verdict.state
    if persisted is None:
        return new, None  # nothing recorded yet
    recorded = is_new(verdict, status.last_decision)
    if recorded:
        new = with_decision(new, decision(verdict, saved.mode, now))
    load = load_snapshot(reading, now)
    is_named = named(reading, verdict.state.unknown_streak)  # the unknown load is named in MetricsAvailable
    if recorded or new.switching != status.switching or load_due(status.load, load, is_named):
        new = new.model_copy(update={"load": load})
    new = metrics_condition(new, reading, verdict.state.unknown_streak, source, generation, stamp)
    paused = is_paused(obj.metadata.annotations)
    new = switching_condition(new, switching_wait(obj, status, new), persisted, generation, stamp, paused=paused)
    return new, persisted


def verdict_of(
    obj: SpecServe,
    status: SpecServeStatus,
    state: PolicyState,
    inputs: tuple[Decide, Knobs, ModeCurves | None],
    reading: Reading,
    pools: tuple[PoolState, ...],
    now: float,
) -> Verdict:
    """This round's verdict: the rollback of the loop's own change that failed to roll out, whatever else; else
    the policy's, told whether a change in flight forbids a new one (a converged change lifts expired bars)."""
    decide, knobs, curves = inputs
    failure = failed_change(obj, status, pools)
    if failure is not None and not knobs.advisory:
        return rollback(state, failure, now)
    waiting = converging(obj, status, pools)
    if waiting is None:
        state = converged(state, now)
    return decide(knobs, curves, state, replace(reading.sample, time=now), converging=waiting is not None)


# Adds the live curves' status (status.learning, CurveDrift) to the round's status: switching.learning.Learned.
AddLearning = Callable[[SpecServeStatus, int | None, float], SpecServeStatus]


def legacy(body: Mapping[str, Any]) -> bool:
    """Whether the live status.switching still has the untyped pending move of earlier releases (read typed, see
    api.models.legacy_pending): written back typed on the first round, so the stored object matches the CRD."""
    raw = (body.get("status") or {}).get("switching")
    return isinstance(raw, dict) and ("pendingSince" in raw or isinstance(raw.get("pending"), str))


async def write_status(kube: StatusWriter, obj: SpecServe, body: JSON) -> JSON:
    """Every status write of the loop goes through here (one place for the leadership fence); returns the object
    as the server holds it after the write."""
    meta = obj.metadata
    return await kube.apply_status(SPECSERVE, meta.namespace, meta.name, body, SWITCHING_LOOP.manager)


async def evaluate(
    kube: StatusWriter,
    body: Mapping[str, Any],
    obj: SpecServe,
    inputs: tuple[Decide, Knobs, ModeCurves | None],
    reading: Reading,
    pools: tuple[PoolState, ...],
    source: Source,
    memory: Memory | None,
    now: float,
    learned: AddLearning | None = None,
) -> Evaluation:
    """Decide, and apply the loop's fields when they differ from the live ones."""
    status = read_status(body)
    state = starting_state(obj, status, memory, now)
    saved = resume(obj, status, now)
    verdict = verdict_of(obj, status, state, inputs, reading, pools, now)
    after, persisted = next_status(obj, status, saved, verdict, reading, pools, source, now)
    if learned is not None and persisted is not None:  # rides on the loop's own writes, never starts them
        after = learned(after, obj.metadata.generation, now)
    server: JSON | None = None
    if SWITCHING_LOOP.differs(status, after) or legacy(body):
        server = await write_status(kube, obj, SWITCHING_LOOP.body(after))
    return Evaluation(verdict, status, after, verdict.state, persisted, server is not None, state.mode, server)

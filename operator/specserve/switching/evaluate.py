"""One SpecServe's evaluation: state from status, the policy's verdict, the status to write (pure), and the
write itself under the object's lock so the reconcile never undoes it with an older body."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from specserve.api.models import Mode, SpecServe, SpecServeStatus
from specserve.kube.kinds import SPECSERVE, Kind
from specserve.metrics.signal import Reading
from specserve.policy.curves import ModeCurves
from specserve.policy.pause import is_paused
from specserve.policy.types import Action, Knobs, PolicyState, Sample, Verdict
from specserve.reconcile import StatusWrite, current_status, previous_status
from specserve.status import merge_patch, same_status, status_body
from specserve.switching.pools import PoolState, converging, pending_change
from specserve.switching.record import (
    FAILURE_THRESHOLD,
    Source,
    decision,
    is_new,
    load_moved,
    metrics_condition,
    snapshot,
    switching_condition,
    with_decision,
    with_state,
)
from specserve.switching.state import material, resume, rfc3339, worth_writing

JSON = dict[str, Any]


class Decide(Protocol):
    def __call__(
        self, knobs: Knobs, curves: ModeCurves | None, state: PolicyState, sample: Sample, *, converging: bool = False
    ) -> Verdict: ...


class StatusWriter(Protocol):
    async def patch_status(self, kind: Kind, namespace: str, name: str, status_body: JSON) -> None: ...


@dataclass
class Memory:
    """Between rounds, in memory: the state as status has it and the latest one (volatile fields: evaluation
    time, unknown streak, regret not yet worth a write)."""

    persisted: PolicyState | None  # None: status.switching not written yet (see `first_write`)
    live: PolicyState


@dataclass(frozen=True)
class Evaluation:
    verdict: Verdict
    before: SpecServeStatus
    after: SpecServeStatus
    state: PolicyState  # the live state after this round
    persisted: PolicyState | None  # what status.switching holds after this round (None: nothing yet)
    written: bool = False  # a status write was made
    from_mode: Mode | None = None  # the mode before this verdict

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
    yet costs no API writes, and the reconcile's NotEvaluated conditions stand)."""
    return (
        reading.reason is None or verdict.action is not Action.HOLD or verdict.state.unknown_streak >= FAILURE_THRESHOLD
    )


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
    stamp = rfc3339(now)
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
    load = snapshot(reading, now)
    if recorded or new.switching != status.switching or load_moved(status.load, load):
        new = new.model_copy(update={"load": load})
    new = metrics_condition(new, reading, verdict.state.unknown_streak, source, generation, stamp)
    paused = is_paused(obj.metadata.annotations)
    new = switching_condition(new, pending_change(obj, new), persisted, generation, stamp, paused=paused)
    return new, persisted


def server_body(body: Mapping[str, Any], last_write: StatusWrite | None) -> JSON:
    """The status body the server holds: our last write when the body handed to us predates it."""
    if last_write is not None and same_status(previous_status(body), last_write.before):
        return status_body(last_write.after)
    raw = body.get("status")
    return dict(raw) if isinstance(raw, dict) else {}


async def evaluate(
    kube: StatusWriter,
    body: Mapping[str, Any],
    memo: MutableMapping[str, Any],
    obj: SpecServe,
    inputs: tuple[Decide, Knobs, ModeCurves | None],
    reading: Reading,
    pools: tuple[PoolState, ...],
    source: Source,
    memory: Memory | None,
    now: float,
) -> Evaluation:
    """Decide and write, holding the lock the reconcile holds (handlers.py), and leave the write in the
    `last_write` memo so a reconcile handed an older body reads this status instead."""
    decide, knobs, curves = inputs
    lock: asyncio.Lock = memo.setdefault("lock", asyncio.Lock())
    async with lock:
        status = current_status(body, memo.get("last_write"))
        state = starting_state(obj, status, memory, now)
        saved = resume(obj, status, now)
        waiting = converging(obj, status, pools)
        verdict = decide(knobs, curves, state, replace(reading.sample, time=now), converging=waiting is not None)
        after, persisted = next_status(obj, status, saved, verdict, reading, pools, source, now)
        # A merge patch against what the server holds: fields the loop cleared (e.g. pending) become null.
        patch = merge_patch(server_body(body, memo.get("last_write")), status_body(after))
        # Compared as models too: a server that drops empty lists must not make every round a write.
        written = bool(patch) and not same_status(after, status)
        if written:
            meta = obj.metadata
            await kube.patch_status(SPECSERVE, meta.namespace, meta.name, patch)
            memo["last_write"] = StatusWrite(before=previous_status(body), after=after)
    return Evaluation(verdict, status, after, verdict.state, persisted, written, state.mode)

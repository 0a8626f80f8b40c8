"""The live curves in the switching loop: status.learning <-> policy.learning (pure), one round of learning,
the CurveDrift condition, and when the learned state is worth an API write.

The learned state costs no query (it reads the sample the loop already has) and few writes: status.learning
is written at most every `persist_seconds` (PERSIST_EVALUATIONS evaluations, within PERSIST_RANGE), or at once
when the drift test fires; between writes it lives in the loop's memory. An operator restart resumes from status,
losing at most that much evidence (a few percent of the evidence half-life)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from specserve.api import reasons
from specserve.api.conditions import CURVE_DRIFT
from specserve.api.models import (
    ConditionStatus,
    CurveDriftRecord,
    LearnedCrossover,
    LearnedMode,
    LearnedPoint,
    LearningStatus,
    Mode,
    SpecServeStatus,
    Strategy,
)
from specserve.clock import epoch
from specserve.objects import Remembered
from specserve.policy.curves import ModeCurves, crossover, with_units
from specserve.policy.drift import Cusum
from specserve.policy.learning import (
    ACCEPT_OUTLIER,
    Drift,
    Learning,
    ModeLearning,
    Point,
    accept_in_use,
    coverage,
    decision_curves,
    effective,
    fits,
    learned_points,
    observations,
    observe,
    start,
)
from specserve.policy.types import Sample
from specserve.policy.units import confirm, readings
from specserve.status import set_condition
from specserve.switching.state import status_time

PERSIST_EVALUATIONS = 20
PERSIST_RANGE = (10.0, 300.0)  # the default 15 s evaluation interval writes every 300 s


def persist_seconds(evaluation_interval: float) -> float:
    lo, hi = PERSIST_RANGE
    return min(hi, max(lo, PERSIST_EVALUATIONS * evaluation_interval))


MODES = (Mode.SPECULATIVE, Mode.BASELINE)


def _mode_out(curves: ModeCurves, learning: Learning, mode: Mode) -> LearnedMode:
    learned = learning.of(mode)
    rows = learned_points(curves, learning, mode)
    covered = coverage(learning, mode)
    return LearnedMode(
        points=[
            LearnedPoint(
                concurrency=x,
                calibrated=round(cal, 2),
                learned=round(value, 2),
                confidence=round(conf, 3),
                weight=round(p.weight, 4),
                ratio=round(p.ratio, 5),
                applied=round(p.applied, 5),
            )
            for (x, cal, value, conf), p in zip(rows, learned.points, strict=True)
        ],
        coverage=list(covered) if covered is not None else [],
        last_observed=status_time(learned.last_observed) if learned.last_observed is not None else None,
        cusum_up=round(learned.cusum.up, 5),
        cusum_down=round(learned.cusum.down, 5),
        recent_residuals=[round(r, 5) for r in learned.cusum.recent],
    )


def to_status(curves: ModeCurves, learning: Learning, now: float) -> LearningStatus:
    drift = learning.last_drift
    return LearningStatus(
        last_update=status_time(now),
        speculative=_mode_out(curves, learning, Mode.SPECULATIVE),
        baseline=_mode_out(curves, learning, Mode.BASELINE),
        accept_length_reference=learning.accept_reference,
        accept_length=learning.accept_recent,
        model_scale=learning.scale,
        last_drift=CurveDriftRecord(mode=drift.mode, time=status_time(drift.time), shift=round(drift.shift, 4))
        if drift is not None
        else None,
        crossover=LearnedCrossover(calibrated=crossover(curves), effective=crossover(effective(curves, learning))),
    )


def _mode_in(saved: LearnedMode) -> ModeLearning:
    return ModeLearning(
        points=tuple(Point(p.weight, p.ratio, p.applied) for p in saved.points),
        cusum=Cusum(saved.cusum_up, saved.cusum_down, tuple(saved.recent_residuals)),
        last_observed=epoch(saved.last_observed) if saved.last_observed is not None else None,
    )


def from_status(saved: LearningStatus | None, curves: ModeCurves) -> Learning:
    """The learning status holds, when it was learned on these calibrated curves; else a fresh start. Curves
    modelled on the crossover resume their scale too; learning saved for measured curves does not fit them, nor
    the other way round."""
    if saved is None or (saved.model_scale is not None) != curves.modelled:
        return start(curves)
    drift = saved.last_drift
    learning = Learning(
        grid=tuple(p.concurrency for p in saved.speculative.points),
        speculative=_mode_in(saved.speculative),
        baseline=_mode_in(saved.baseline),
        updated=epoch(saved.last_update),
        accept_reference=saved.accept_length_reference,
        accept_recent=saved.accept_length,
        scale=saved.model_scale,
        last_drift=Drift(drift.mode, epoch(drift.time), drift.shift) if drift is not None else None,
    )
    ok = fits(learning, curves) and len(saved.baseline.points) == len(learning.grid)
    return learning if ok else start(curves)


@dataclass(frozen=True)
class Round:
    learning: Learning
    effective: ModeCurves  # what the policy decides with this round
    drifts: tuple[Drift, ...]


def learn(
    learning: Learning, curves: ModeCurves, sample: Sample, strategy: Strategy, settled: bool, shared_gpus: bool = False
) -> Round:
    """One round. Only a settled SpecServe (no roll in flight, load known) teaches anything: a pool half rolled
    into the other mode serves neither curve."""
    seen = observations(sample, strategy, shared_gpus) if settled and sample.demand is not None else ()
    update = observe(learning, curves, seen, sample.time)
    return Round(update.learning, decision_curves(curves, update.learning, strategy), update.drifts)


def worth_writing(saved: LearningStatus | None, drifts: tuple[Drift, ...], now: float, interval: float) -> bool:
    return saved is None or bool(drifts) or now - epoch(saved.last_update) >= persist_seconds(interval)


def drift_condition(status: SpecServeStatus, learning: Learning, generation: int | None, now: float) -> SpecServeStatus:
    """CurveDrift: True from a drift until the drifted mode's curve is confident somewhere again; True too while
    the accept length in use (the recent readings' mean, relaxed as it ages) is more than ACCEPT_OUTLIER from the
    reference (the whole speculative curve is scaled with it: a prompt-mix change, not a residual the drift test
    sees). The message holds no live numbers, so that the condition is written on a transition only (the values
    are in status.learning)."""
    drift = learning.last_drift
    cond: tuple[ConditionStatus, str, str]
    relearning = drift is not None and coverage(learning, drift.mode) is None
    if not relearning and abs(accept_in_use(learning) - 1) > ACCEPT_OUTLIER:
        cond = (
            ConditionStatus.TRUE,
            reasons.ACCEPT_LENGTH_MOVED,
            f"the speculative pools' accept length moved more than {ACCEPT_OUTLIER:.0%} from the one the curves "
            "were measured at (status.learning.acceptLength, acceptLengthReference): the speculative curve is "
            "scaled with it",
        )
    elif drift is None:
        cond = (ConditionStatus.FALSE, reasons.NO_DRIFT, "The pools serve what the learned curves predict.")
    else:
        moved = f"{drift.mode.value} curve moved {drift.shift:+.0%} at {status_time(drift.time)}"
        if coverage(learning, drift.mode) is None:
            cond = (
                ConditionStatus.TRUE,
                reasons.RELEARNING,
                f"{moved}; its evidence was reset, the calibrated curve is used meanwhile.",
            )
        else:
            cond = (ConditionStatus.FALSE, reasons.RELEARNED, f"{moved}; re-learned since.")
    conditions = set_condition(status.conditions, CURVE_DRIFT, *cond, generation, status_time(now))
    return status.model_copy(update={"conditions": conditions})


def drift_message(drift: Drift) -> str:
    return (
        f"the {drift.mode.value.lower()} pools serve {drift.shift:+.0%} against the learned curve: "
        "its evidence is reset and re-learned from the calibrated curve"
    )


def resume_learning(memory: Remembered | None, saved: LearningStatus | None, curves: ModeCurves) -> Learning:
    """Memory while status still holds what this loop last wrote; else status (an operator restart, or another
    writer changed it)."""
    stamp = saved.last_update if saved is not None else None
    if memory is not None and memory.stamp == stamp and fits(memory.learning, curves):
        return memory.learning
    return from_status(saved, curves)


@dataclass(frozen=True)
class Learned:
    """One round's learning, ready for the loop: the curves to decide with, and the status it adds."""

    round: Round
    curves: ModeCurves  # what the policy decides with: the learned, slew-bounded effective curves (decision_curves)
    write: LearningStatus | None  # None: status.learning stays as it is this round

    def apply(self, status: SpecServeStatus, generation: int | None, now: float) -> SpecServeStatus:
        if self.curves.unitless:  # modelled curves waiting for their units: nothing learned, nothing to say
            return status
        if self.write is not None:
            status = status.model_copy(update={"learning": self.write})
        return drift_condition(status, self.round.learning, generation, now)


def learning_round(
    memory: Remembered | None,
    saved: LearningStatus | None,
    curves: ModeCurves,
    sample: Sample,
    strategy: Strategy,
    settled: bool,
    interval: float,
    shared_gpus: bool = False,
) -> Learned:
    """One SpecServe's learning round, from the previous state (memory, else status) and this round's sample to
    the curves the policy decides with: the switching loop's and simulate's learned policy's one path."""
    learning = resume_learning(memory, saved, curves)
    prior = curves
    if curves.modelled:
        learning = _units(learning, curves, sample, strategy, settled, shared_gpus)
        if learning.scale is None:  # relative units until confirmed: the model as it is, nothing learned
            return Learned(Round(learning, curves, ()), curves, None)
        prior = with_units(curves, learning.scale)
    done = learn(learning, prior, sample, strategy, settled, shared_gpus)
    now = sample.time
    write = to_status(prior, done.learning, now) if worth_writing(saved, done.drifts, now, interval) else None
    return Learned(done, done.effective, write)


def _units(
    learning: Learning, curves: ModeCurves, sample: Sample, strategy: Strategy, settled: bool, shared_gpus: bool
) -> Learning:
    """Modelled curves: this round's readings of the scale (policy.units), from what learning would learn from (a
    settled round with its load known), until one is confirmed; then it stays."""
    if learning.scale is not None:
        return learning
    seen = observations(sample, strategy, shared_gpus) if settled and sample.demand is not None else ()
    scale, pending = confirm(learning.scale_pending, readings(curves, seen))
    return replace(learning, scale=scale, scale_pending=pending)

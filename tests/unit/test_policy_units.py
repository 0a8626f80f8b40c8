"""Curves modelled on the crossover learn their units from the pools (policy.units, docs/learning.md): a scale
confirmed robustly from settled readings, baseline first, resumed from status; then the TPOT goal applies and
learning corrects the model's shape, as for calibrated curves."""

from __future__ import annotations

import random

import pytest

from specserve.api.models import Mode, Strategy
from specserve.objects import Remembered
from specserve.policy.curves import model_from_crossover, with_units
from specserve.policy.learning import Measurement
from specserve.policy.restart import capacity, over_slo
from specserve.policy.traffic import UNITLESS_SLO, objective
from specserve.policy.types import PoolSignal, Sample, Verdict
from specserve.policy.units import AGREE, SPREAD, Reading, confirm, readings
from specserve.switching.learning import Learned, learning_round
from tests.unit.policy_helpers import knobs
from tests.unit.test_policy_closed_loop import moves_off_the_loaded_pool

MODEL = model_from_crossover(24.0)
SCALE = 50.0  # tokens/s per model unit the pools serve at (the baseline's single-stream rate)


def pool(per_replica_in_flight: float, tokens_per_replica: float | None, ready: int = 2) -> PoolSignal:
    tokens = tokens_per_replica * ready if tokens_per_replica is not None else None
    return PoolSignal(ready_replicas=ready, running=per_replica_in_flight * ready, tokens_per_second=tokens)


def served(mode: Mode, x: float, factor: float = 1.0) -> float:
    return SCALE * MODEL.rate(mode, x) * factor


def plain(t: float, x: float = 6.0, factor: float = 1.0) -> Sample:
    """Both pools serving (a split); the plain one at `factor` x the scaled model."""
    spec = pool(x, served(Mode.SPECULATIVE, x, 1.3))  # the speculative level also carries the accept length
    return Sample(t, 4 * x, speculative=spec, baseline=pool(x, served(Mode.BASELINE, x, factor)))


def rounds(
    samples: list[Sample], settled: bool = True, memory: Remembered | None = None
) -> tuple[Learned, Remembered | None, list[Learned]]:
    """The loop's rounds: memory between them, status.learning as last written."""
    saved, every = None, []
    done: Learned | None = None
    for s in samples:
        done = learning_round(memory, saved, MODEL, s, Strategy.TRAFFIC_SPLIT, settled, interval=15.0)
        if done.write is not None:
            saved = done.write
        memory = Remembered(done.round.learning, saved.last_update if saved is not None else None)
        every.append(done)
    assert done is not None
    return done, memory, every


def test_a_reading_is_tokens_per_model_unit_where_the_pool_serves() -> None:
    seen = [Measurement(Mode.BASELINE, 6.0, served(Mode.BASELINE, 6.0)), Measurement(Mode.SPECULATIVE, 3.0, 0.0)]
    # a pool holding requests while serving nothing is a broken series, not a scale
    ((mode, scale),) = readings(MODEL, seen)
    assert mode is Mode.BASELINE and scale == pytest.approx(SCALE)


def test_noisy_readings_confirm_their_median_and_a_wild_one_moves_nothing() -> None:
    rng = random.Random(3)
    noisy: list[Reading] = [(Mode.BASELINE, SCALE * rng.uniform(0.9, 1.1)) for _ in range(AGREE - 1)]
    wild: Reading = (Mode.BASELINE, SCALE * 20)
    scale, pending = confirm((), [*noisy[:3], wild, *noisy[3:]])
    assert scale is None and len(pending) == AGREE  # the wild one is in the window: five agree, not six
    scale, pending = confirm(pending, [(Mode.BASELINE, SCALE * 1.05)])
    assert scale == pytest.approx(SCALE, rel=0.1) and pending == ()
    # readings that scatter beyond SPREAD never confirm (an unsettled level is no unit)
    scatter: list[Reading] = [(Mode.BASELINE, SCALE * (1 + 3 * SPREAD) ** (i % 2)) for i in range(20)]
    assert confirm((), scatter)[0] is None


def test_baseline_readings_come_first() -> None:
    spec: list[Reading] = [(Mode.SPECULATIVE, 80.0)] * (AGREE - 1)
    scale, pending = confirm((), spec)
    assert scale is None
    scale, pending = confirm(pending, [(Mode.BASELINE, SCALE)])  # a plain reading drops the speculative ones
    assert scale is None and pending == ((Mode.BASELINE, SCALE),)
    # in one round, both pools' readings agreeing: the baseline's confirm
    both: list[Reading] = [(Mode.SPECULATIVE, 80.0), (Mode.BASELINE, SCALE)]
    assert confirm((), both * AGREE)[0] == pytest.approx(SCALE)
    # a pool that serves plain no longer (rolled into speculation) is given units from the speculative readings
    # taken since
    for _ in range(AGREE - 1):
        scale, pending = confirm(pending, [(Mode.SPECULATIVE, 80.0)])
        assert scale is None
    assert confirm(pending, [(Mode.SPECULATIVE, 80.0)])[0] == pytest.approx(80.0)


def test_until_confirmed_the_round_is_the_model_as_it_is_and_writes_nothing() -> None:
    done, _, every = rounds([plain(15.0 * i) for i in range(AGREE - 1)])
    assert all(d.curves is MODEL and d.write is None for d in every)
    assert done.curves.unitless and done.round.learning.scale is None


def test_a_partial_reading_teaches_no_unit() -> None:
    # the plain pool's tokens unread: unknown, not zero; the speculative pool's reading waits behind nothing
    partial = [Sample(15.0 * i, 12.0, baseline=pool(6.0, None)) for i in range(3 * AGREE)]
    done, _, _ = rounds(partial)
    assert done.round.learning.scale is None and done.round.learning.scale_pending == ()


def test_a_roll_in_flight_teaches_no_unit() -> None:
    done, _, _ = rounds([plain(15.0 * i) for i in range(3 * AGREE)], settled=False)
    assert done.round.learning.scale is None and done.round.learning.scale_pending == ()


def test_once_confirmed_the_curves_have_units_and_status_says_the_scale() -> None:
    done, _, every = rounds([plain(15.0 * i, factor=0.7) for i in range(AGREE + 2)])
    confirmed = next(i for i, d in enumerate(every) if d.round.learning.scale is not None)
    assert confirmed == AGREE - 1
    first = every[confirmed]
    assert first.write is not None and first.write.model_scale == pytest.approx(SCALE * 0.7, rel=1e-6)
    assert not done.curves.unitless and done.curves.scale == pytest.approx(SCALE * 0.7)
    # the calibrated column is the model times the scale: what learning's ratios are against
    x = first.write.baseline.points[3].concurrency
    assert first.write.baseline.points[3].calibrated == pytest.approx(SCALE * 0.7 * MODEL.rate(Mode.BASELINE, x), 0.01)


def test_an_operator_restart_resumes_the_scale_from_status() -> None:
    _, _, every = rounds([plain(15.0 * i, factor=0.7) for i in range(AGREE + 2)])
    saved = next(d.write for d in reversed(every) if d.write is not None)
    # the restarted loop has no memory; the plain pool now reads 2x: the scale stays, learning takes the rest
    after = learning_round(None, saved, MODEL, plain(200.0, factor=1.4), Strategy.TRAFFIC_SPLIT, True, 15.0)
    assert after.round.learning.scale == pytest.approx(SCALE * 0.7)
    assert not after.curves.unitless
    # a new crossover is a new model: its units are read afresh
    other = learning_round(None, saved, model_from_crossover(40.0), plain(200.0), Strategy.TRAFFIC_SPLIT, True, 15.0)
    assert other.round.learning.scale is None and other.curves.unitless


def test_learning_corrects_the_scaled_model() -> None:
    samples = [plain(15.0 * i, factor=0.7) for i in range(AGREE)]  # confirmed at the model's shape x 0.7 ...
    samples += [plain(15.0 * (AGREE + i), factor=0.5) for i in range(720)]  # ... then the pool serves less: 3 h
    done, _, _ = rounds(samples)
    got = done.curves.rate(Mode.BASELINE, 6.0) / (SCALE * MODEL.rate(Mode.BASELINE, 6.0))
    assert done.round.learning.scale == pytest.approx(SCALE * 0.7)
    assert got == pytest.approx(0.5, abs=0.05)


def test_traffic_split_applies_the_tpot_goal_once_the_curves_have_units() -> None:
    k = knobs(crossover=24.0, tpot_slo=0.02)
    scaled = with_units(MODEL, SCALE)
    assert objective(k, MODEL).tpot_slo is None and objective(k, scaled).tpot_slo == 0.02
    unitless = moves_off_the_loaded_pool(k, MODEL)
    goal = moves_off_the_loaded_pool(k, scaled)
    assert UNITLESS_SLO in unitless[0].notes and all(UNITLESS_SLO not in v.notes for v in goal)
    assert all(UNITLESS_SLO not in v.reason for v in goal)

    def weights(verdicts: list[Verdict]) -> list[int]:
        return [v.weights.speculative for v in verdicts if v.weights is not None]

    # the scale alone changes no decision (ratios are the model's); the goal it lets apply does
    assert weights(moves_off_the_loaded_pool(knobs(crossover=24.0), scaled)) == weights(unitless)
    assert weights(goal) != weights(unitless)


def test_restart_applies_the_tpot_goal_once_the_curves_have_units() -> None:
    scaled = with_units(MODEL, SCALE)
    # 40 in flight on one plain replica: SCALE / (1 + 39/48) ~ 28 tok/s per stream, 36 ms a token; on four,
    # 10 each: SCALE / (1 + 9/48) ~ 42 tok/s, 24 ms
    slo = 0.03
    assert not over_slo(MODEL, Mode.BASELINE, 40.0, 1, slo)  # relative units: never
    assert over_slo(scaled, Mode.BASELINE, 40.0, 1, slo)
    assert not over_slo(scaled, Mode.BASELINE, 40.0, 4, slo)
    assert capacity(MODEL, Mode.BASELINE, slo) == max(MODEL.baseline.ys)
    assert capacity(scaled, Mode.BASELINE, slo) < SCALE * max(MODEL.baseline.ys)

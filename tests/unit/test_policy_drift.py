"""The drift test: fires on a step change of the curve, stays quiet on noise, and resets the learning."""

from __future__ import annotations

import random

import pytest

from specserve.api.models import Mode
from specserve.policy.drift import Cusum, step
from specserve.policy.learning import CONFIDENT, Drift, Measurement, learned_points, observe, start
from tests.unit.test_policy_learning import CALIBRATED, true_spec


def feed(residuals: list[float]) -> list[int]:
    state, fired = Cusum(), []
    for i, r in enumerate(residuals):
        s = step(state, r)
        state = s.state
        if s.fired:
            fired.append(i)
    return fired


def test_quiet_on_noise() -> None:
    rng = random.Random(7)
    assert feed([rng.gauss(0.0, 0.08) for _ in range(5000)]) == []


def test_fires_on_a_step_change_soon_after_it() -> None:
    rng = random.Random(8)
    noise = [rng.gauss(0.0, 0.08) for _ in range(300)]
    shifted = [r - 0.3 for r in noise[150:]]
    fired = feed(noise[:150] + shifted)
    assert fired and 150 <= fired[0] <= 160


def test_a_single_wild_reading_does_not_fire() -> None:
    rng = random.Random(9)
    residuals = [rng.gauss(0.0, 0.05) for _ in range(200)]
    for i in range(10, 200, 20):
        residuals[i] = 9.0
    assert feed(residuals) == []


def test_drift_resets_the_weighting_and_the_curve_relearns() -> None:
    rng = random.Random(10)
    learning, t = start(CALIBRATED), 0.0
    for _ in range(200):  # learn the calibrated curve: confident
        x = rng.choice([2.0, 4.0, 8.0])
        learning = observe(
            learning, CALIBRATED, [Measurement(Mode.SPECULATIVE, x, CALIBRATED.speculative.at(x))], t
        ).learning
        t += 15
    drifts: list[Drift] = []
    for _ in range(200):  # the curve drops 30 %
        x = rng.choice([2.0, 4.0, 8.0])
        update = observe(learning, CALIBRATED, [Measurement(Mode.SPECULATIVE, x, true_spec(x) * rng.gauss(1, 0.05))], t)
        learning, t = update.learning, t + 15
        drifts += update.drifts
    assert len(drifts) == 1 and drifts[0].mode is Mode.SPECULATIVE and drifts[0].shift < 0
    row = next(r for r in learned_points(CALIBRATED, learning, Mode.SPECULATIVE) if r[0] == 4.0)
    assert row[2] == pytest.approx(true_spec(4.0), rel=0.05)
    assert row[3] >= CONFIDENT

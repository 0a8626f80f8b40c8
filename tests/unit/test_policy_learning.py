"""The live-curve estimator: recovers a known curve from noisy samples, ignores a burst of outliers, falls back
to the calibrated curve without evidence, keeps a physical shape, and bounds how fast decisions can move."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import pytest

from specserve.api.curves import Curve
from specserve.api.models import Mode, Strategy
from specserve.policy.curves import ModeCurves, crossover
from specserve.policy.learning import (
    ACCEPT_WINDOW,
    CONFIDENT,
    HALF_LIFE_SECONDS,
    SLEW_PER_HOUR,
    Drift,
    Learning,
    Measurement,
    accept_in_use,
    accept_scale,
    coverage,
    effective,
    learned_points,
    nondecreasing,
    observations,
    observe,
    start,
)
from specserve.policy.types import PoolSignal, Sample

XS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
CALIBRATED = ModeCurves(
    speculative=Curve.from_points([(x, 100 * x / (1 + x / 12)) for x in XS]),
    baseline=Curve.from_points([(x, 60 * x / (1 + x / 40)) for x in XS]),
)


def true_spec(x: float) -> float:  # the pool now serves 30 % less than calibrated (a harder prompt mix)
    return 0.7 * 100 * x / (1 + x / 12)


def run(
    samples: list[Measurement], step: float = 15.0, learning: Learning | None = None
) -> tuple[Learning, list[Drift]]:
    learning = learning or start(CALIBRATED)
    drifts: list[Drift] = []
    for i, o in enumerate(samples):
        update = observe(learning, CALIBRATED, [o], 1000.0 + i * step)
        learning = update.learning
        drifts += update.drifts
    return learning, drifts


def noisy(n: int, seed: int = 1, f: Callable[[float], float] = true_spec) -> list[Measurement]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = rng.choice([2.0, 4.0, 8.0, 16.0])  # grid points: the test compares at them
        out.append(Measurement(Mode.SPECULATIVE, x, f(x) * rng.gauss(1.0, 0.08)))
    return out


def learned_at(learning: Learning, mode: Mode, x: float) -> tuple[float, float]:
    row = next(r for r in learned_points(CALIBRATED, learning, mode) if r[0] == x)
    return row[2], row[3]


def test_recovers_a_known_curve_from_noisy_samples() -> None:
    learning, _ = run(noisy(300))
    for x in (2.0, 4.0, 8.0):
        value, conf = learned_at(learning, Mode.SPECULATIVE, x)
        assert value == pytest.approx(true_spec(x), rel=0.06)
        assert conf >= CONFIDENT
    # Never observed: the calibrated prior, with no confidence.
    value, conf = learned_at(learning, Mode.SPECULATIVE, 64.0)
    assert conf < CONFIDENT
    assert coverage(learning, Mode.SPECULATIVE) == (2.0, 16.0)
    assert coverage(learning, Mode.BASELINE) is None
    _, base_conf = learned_at(learning, Mode.BASELINE, 8.0)
    assert base_conf == 0.0


def test_ignores_a_burst_of_outliers() -> None:
    learning, _ = run(noisy(200))
    before, _ = learned_at(learning, Mode.SPECULATIVE, 4.0)
    burst = [Measurement(Mode.SPECULATIVE, 4.0, true_spec(4.0) * 10) for _ in range(2)]
    burst += [Measurement(Mode.SPECULATIVE, 4.0, 0.0) for _ in range(2)]
    mixed = noisy(40, seed=2)
    mixed[5:5] = burst[:2]
    mixed[20:20] = burst[2:]
    after_learning, drifts = run(mixed, learning=learning)
    after, _ = learned_at(after_learning, Mode.SPECULATIVE, 4.0)
    assert after == pytest.approx(before, rel=0.05)
    assert drifts == []


def test_falls_back_to_calibrated_with_no_evidence() -> None:
    learning = observe(start(CALIBRATED), CALIBRATED, [], 0.0).learning
    eff = effective(CALIBRATED, learning)
    assert eff.speculative == CALIBRATED.speculative
    assert eff.baseline == CALIBRATED.baseline
    for _, cal, value, conf in learned_points(CALIBRATED, learning, Mode.BASELINE):
        assert value == pytest.approx(cal)
        assert conf == 0.0


def test_effective_moves_the_crossover_but_no_faster_than_the_slew_bound() -> None:
    learning = start(CALIBRATED)
    for i in range(40):  # 10 minutes of plentiful evidence: confident within a round or two
        learning = observe(learning, CALIBRATED, noisy(10, seed=i), i * 15.0).learning
    eff = effective(CALIBRATED, learning)
    ratio = eff.speculative.at(4.0) / CALIBRATED.speculative.at(4.0)
    bound = SLEW_PER_HOUR * 39 * 15.0 / 3600
    assert 1 - bound - 1e-9 <= ratio < 1 - bound / 2  # the bound holds, and binds
    learning, _ = run(noisy(400), step=15.0)  # 100 minutes: the policy now uses the learned curve
    eff = effective(CALIBRATED, learning)
    assert eff.speculative.at(4.0) == pytest.approx(true_spec(4.0), rel=0.06)
    old, new = crossover(CALIBRATED), crossover(eff)
    assert old is not None and new is not None and new < old


def test_accept_length_scales_the_whole_speculative_curve() -> None:
    learning = start(CALIBRATED)
    for i in range(60):
        seen = [Measurement(Mode.SPECULATIVE, 4.0, CALIBRATED.speculative.at(4.0), accept_length=3.2)]
        learning = observe(learning, CALIBRATED, seen, i * 15.0).learning
    for i in range(60, 120):  # accept length falls to 2.0; the pool serves 2.0/3.2 of what it did
        seen = [Measurement(Mode.SPECULATIVE, 4.0, CALIBRATED.speculative.at(4.0) * 2.0 / 3.2, accept_length=2.0)]
        learning = observe(learning, CALIBRATED, seen, i * 15.0).learning
    # Never observed at 32, yet scaled with the accept length.
    value, _ = learned_at(learning, Mode.SPECULATIVE, 32.0)
    assert value == pytest.approx(CALIBRATED.speculative.at(32.0) * 2.0 / 3.2, rel=0.05)


def test_a_confirmed_accept_length_drop_moves_the_curve_the_policy_decides_with_at_once() -> None:
    # The H200's drift: half of the requests sampled halved the accept length within a minute; slewed at 25 % an
    # hour the curve moved 1 % in the 100 s the drift lasted, and the weights stayed on speculation.
    learning = start(CALIBRATED)
    t = 0.0
    for _ in range(8):
        seen = [Measurement(Mode.SPECULATIVE, 4.0, CALIBRATED.speculative.at(4.0), accept_length=3.2)]
        learning = observe(learning, CALIBRATED, seen, t).learning
        t += 15.0
    for _ in range(ACCEPT_WINDOW - 1):  # the trimmed mean of the window is all new readings after five, 75 s
        seen = [Measurement(Mode.SPECULATIVE, 4.0, CALIBRATED.speculative.at(4.0) * 0.5, accept_length=1.6)]
        learning = observe(learning, CALIBRATED, seen, t).learning
        t += 15.0
    eff = effective(CALIBRATED, learning)
    for x in (1.0, 4.0, 32.0):
        assert eff.speculative.at(x) == pytest.approx(CALIBRATED.speculative.at(x) * 0.5, rel=0.02)
    assert eff.baseline == CALIBRATED.baseline


def test_a_low_accept_length_relaxes_as_it_ages_while_no_speculative_pool_serves() -> None:
    # On the H200 a sampled half confirmed an accept length of a third, the weights went to the plain pool, and a
    # greedy ramp after it was served plain throughout (NGRAM served 2.7x at one in flight): held for ever, the
    # low reading was never renewed, because only a pool that serves renews it.
    learning = start(CALIBRATED)
    t = 0.0
    for accept in (3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0):  # the reference, then a third of it (the window's mean)
        seen = [Measurement(Mode.SPECULATIVE, 4.0, CALIBRATED.speculative.at(4.0) * accept / 3.0, accept)]
        learning = observe(learning, CALIBRATED, seen, t).learning
        t += 15.0
    assert accept_in_use(learning) == pytest.approx(1 / 3)
    low = CALIBRATED.speculative.at(1.0)
    quiet = [Measurement(Mode.BASELINE, 4.0, CALIBRATED.baseline.at(4.0))]  # only the plain pool serves
    last = t - 15.0
    for hours, expected in ((0.5, 1 - (2 / 3) / 2), (1.0, 1 - (2 / 3) / 4), (3.0, 1 - (2 / 3) / 64)):
        while t < last + hours * 3600:
            learning = observe(learning, CALIBRATED, quiet, t).learning
            t += 60.0
        age = learning.updated - last  # type: ignore[operator]
        want = 1 + (1 / 3 - 1) * 0.5 ** (age / HALF_LIFE_SECONDS)
        assert accept_in_use(learning) == pytest.approx(want) and want == pytest.approx(expected, abs=0.02)
        assert effective(CALIBRATED, learning).speculative.at(1.0) == pytest.approx(low * want, rel=0.02)
    assert accept_scale(learning) == pytest.approx(1 / 3)  # the reading itself is kept: evidence is normalised by it
    # The pool serves again and reads the low accept length afresh: in use at once, no relaxation.
    seen = [Measurement(Mode.SPECULATIVE, 4.0, CALIBRATED.speculative.at(4.0) / 3.0, 1.0)]
    learning = observe(learning, CALIBRATED, seen, t).learning
    assert accept_in_use(learning) == pytest.approx(1 / 3)


def test_shape_is_non_decreasing() -> None:
    assert nondecreasing([1.0, 3.0, 2.0, 4.0]) == [1.0, 2.5, 2.5, 4.0]
    rng = random.Random(3)
    wild = [Measurement(Mode.BASELINE, rng.choice(XS), rng.uniform(0, 3000)) for _ in range(200)]
    learning, _ = run(wild)
    values = [r[2] for r in learned_points(CALIBRATED, learning, Mode.BASELINE)]
    assert values == sorted(values)


def test_observations_per_replica_and_adaptive_drafting_off() -> None:
    sample = Sample(
        0.0,
        12.0,
        speculative=PoolSignal(ready_replicas=2, running=8.0, tokens_per_second=800.0, accept_length=3.0),
        baseline=PoolSignal(ready_replicas=1, running=0.1, tokens_per_second=5.0),
    )
    (seen,) = observations(sample, Strategy.TRAFFIC_SPLIT)
    assert seen == Measurement(Mode.SPECULATIVE, 4.0, 400.0, 3.0)
    off = Sample(
        0.0, 4.0, speculative=PoolSignal(ready_replicas=1, running=4.0, tokens_per_second=300.0, spec_num_steps=0.0)
    )
    (seen,) = observations(off, Strategy.ADAPTIVE)
    assert seen.mode is Mode.BASELINE
    # The decode tokens counted every step are preferred (what the pool sustains); then the decode throughput gauge
    # (a decode-phase rate: on the H200 it read up to 3x what the pool sustained); the bursty finished-token rate last.
    every = PoolSignal(
        ready_replicas=2, running=8.0, tokens_per_second=0.0, gen_throughput=900.0, decode_tokens_per_second=600.0
    )
    for signal, expected in (
        (every, 300.0),
        (replace(every, decode_tokens_per_second=None), 450.0),
        (replace(every, decode_tokens_per_second=None, gen_throughput=None), 0.0),
    ):
        (seen,) = observations(Sample(0.0, 8.0, baseline=signal), Strategy.TRAFFIC_SPLIT)
        assert (seen.mode, seen.concurrency, seen.tokens_per_second) == (Mode.BASELINE, 4.0, expected)
    # at the requests in flight the finished requests' latency counts, where the running gauge caught fewer
    (seen,) = observations(Sample(0.0, 16.0, baseline=replace(every, latency_in_flight=16.0)), Strategy.TRAFFIC_SPLIT)
    assert seen.concurrency == 8.0
    unknown = Sample(0.0, None, speculative=PoolSignal(ready_replicas=1, running=None, tokens_per_second=1.0))
    assert observations(unknown, Strategy.RESTART) == ()

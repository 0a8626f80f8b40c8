"""The accept-length rule of the learned speculative curve: the evidence is normalised to the accept length the
curves were measured at (spec.switching.calibratedAcceptLength), else to the first accept length confirmed, and the
accept length in use is the trimmed mean of the recent readings: one broken scrape moves nothing, a real move is
followed within the window, and a mix of prompts that reads as alternating values is served at its mean."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from specserve.api.models import Mode
from specserve.api.validation import parse_object
from specserve.policy.curves import ModeCurves, curves_from_spec
from specserve.policy.learning import (
    ACCEPT_WINDOW,
    Learning,
    Measurement,
    accept_in_use,
    effective,
    learned_points,
    observe,
    start,
)
from tests.unit.test_policy_learning import CALIBRATED

AT = 4.0  # where the pool serves
FAR = 32.0  # never observed: only the accept length moves the curve there
MEASURED_AT = 3.2


def rounds(curves: ModeCurves, accepts: list[float], factor: float = 1.0, learning: Learning | None = None) -> Learning:
    """One speculative observation per round at AT, 15 s apart: the pool serves factor x calibrated x the accept
    length of the round relative to MEASURED_AT (tokens/s is proportional to the accepted tokens per step)."""
    learning = learning or start(curves)
    t0 = learning.updated or 0.0
    for i, accept in enumerate(accepts):
        tokens = curves.speculative.at(AT) * factor * accept / MEASURED_AT
        seen = [Measurement(Mode.SPECULATIVE, AT, tokens, accept_length=accept)]
        learning = observe(learning, curves, seen, t0 + (i + 1) * 15.0).learning
    return learning


def learned(curves: ModeCurves, learning: Learning, x: float) -> float:
    return next(r[2] for r in learned_points(curves, learning, Mode.SPECULATIVE) if r[0] == x)


def test_one_low_first_reading_does_not_scale_the_whole_curve() -> None:
    # No calibratedAcceptLength: the first reading is a broken scrape (1.0), then the real 3.2 for an hour.
    learning = rounds(CALIBRATED, [1.0] + [MEASURED_AT] * 240)
    assert learning.accept_reference == pytest.approx(MEASURED_AT)
    assert learned(CALIBRATED, learning, FAR) == pytest.approx(CALIBRATED.speculative.at(FAR), rel=0.02)
    assert learned(CALIBRATED, learning, AT) == pytest.approx(CALIBRATED.speculative.at(AT), rel=0.03)
    eff = effective(CALIBRATED, learning)
    assert eff.speculative.at(FAR) == pytest.approx(CALIBRATED.speculative.at(FAR), rel=0.02)


def test_the_calibrated_accept_length_is_the_reference() -> None:
    """Measured at 3.2, served at 2.0 from the first reading: the whole speculative curve is 2.0/3.2 of calibrated,
    where it was never observed too, and the evidence ratio where it was is 1 (it does not absorb the accept
    length, so a real move of the curve still reads as one)."""
    curves = replace(CALIBRATED, accept_length=MEASURED_AT)
    learning = rounds(curves, [2.0] * 240)
    assert learning.accept_reference == MEASURED_AT
    scale = 2.0 / MEASURED_AT
    assert learned(curves, learning, FAR) == pytest.approx(CALIBRATED.speculative.at(FAR) * scale, rel=0.02)
    assert learned(curves, learning, AT) == pytest.approx(CALIBRATED.speculative.at(AT) * scale, rel=0.03)
    ratios = [p.ratio for x, p in zip(learning.grid, learning.speculative.points, strict=True) if x == AT]
    assert ratios[0] == pytest.approx(1.0, abs=0.03)


def test_a_wild_reading_waits_for_confirmation_and_teaches_nothing() -> None:
    learning = rounds(CALIBRATED, [MEASURED_AT] * 40)
    weight = sum(p.weight for p in learning.speculative.points)
    wild = rounds(CALIBRATED, [0.8], learning=learning)
    assert wild.accept_recent == pytest.approx(MEASURED_AT)  # held
    assert sum(p.weight for p in wild.speculative.points) < weight  # decayed, nothing added
    assert learned(CALIBRATED, wild, FAR) == pytest.approx(learned(CALIBRATED, learning, FAR), rel=0.01)
    back = rounds(CALIBRATED, [MEASURED_AT], learning=wild)
    assert back.accept_recent == pytest.approx(MEASURED_AT)
    assert sum(p.weight for p in back.speculative.points) > sum(p.weight for p in wild.speculative.points)
    # A real move: followed as it fills the window (the trimmed mean), taught from once the readings agree.
    moving = rounds(CALIBRATED, [2.0] * 3, learning=learning)
    assert 2.0 < (moving.accept_recent or 0) < MEASURED_AT
    assert learned(CALIBRATED, moving, AT) < learned(CALIBRATED, learning, AT)
    moved = rounds(CALIBRATED, [2.0] * (ACCEPT_WINDOW - 1), learning=learning)
    assert moved.accept_recent == pytest.approx(2.0)
    assert learned(CALIBRATED, moved, FAR) == pytest.approx(
        CALIBRATED.speculative.at(FAR) * 2.0 / MEASURED_AT, rel=0.02
    )


def test_a_mix_that_reads_as_alternating_values_is_served_at_its_mean() -> None:
    """On the H100 at one request in flight, half of the requests sampled: the gauge read 1.0 and 3.0 by turns
    (each reading about one request), and three low ones in a row once sent every request to the plain pool for the
    rest of the run although NGRAM still served more at 1 and 8 in flight. The mean is what tokens/s follows."""
    curves = replace(CALIBRATED, accept_length=3.0)
    learning = rounds(curves, [3.0] * 40)
    weight = sum(p.weight for p in learning.speculative.points)
    mix = [1.0, 3.0, 1.0, 1.0, 1.0, 3.0, 3.0, 1.0, 3.0, 3.0, 1.0, 3.0]
    for i in range(len(mix)):
        step = rounds(curves, mix[: i + 1], learning=learning)
        if i >= 2:
            assert 1.5 <= (step.accept_recent or 0) <= 2.5, mix[: i + 1]
    mixed = rounds(curves, mix + [1.0, 3.0] * 60, learning=learning)  # half an hour of it
    assert accept_in_use(mixed) == pytest.approx(2.0 / 3.0)  # renewed while the pool serves: it does not relax
    assert sum(p.weight for p in mixed.speculative.points) < weight  # readings that disagree teach nothing


def test_evidence_saved_against_a_first_reading_is_rebased_to_the_calibrated_accept_length() -> None:
    """Status written by a release that took the first reading (1.0) as the reference: its ratios compensate the
    clamped 2x scale. Once calibratedAcceptLength is known the evidence is rebased: the learned curve where it was
    observed stays, and the unobserved part is no longer doubled."""
    old = replace(rounds(CALIBRATED, [MEASURED_AT] * 240), accept_reference=None)
    assert old.accept_recent == pytest.approx(MEASURED_AT)
    halved = tuple(replace(p, ratio=p.ratio / 2) for p in old.speculative.points)
    saved = replace(old.with_mode(Mode.SPECULATIVE, replace(old.speculative, points=halved)), accept_reference=1.0)
    assert learned(CALIBRATED, saved, FAR) == pytest.approx(2 * CALIBRATED.speculative.at(FAR), rel=0.02)
    before = learned(CALIBRATED, saved, AT)
    curves = replace(CALIBRATED, accept_length=MEASURED_AT)
    rebased = observe(saved, curves, [], (saved.updated or 0.0) + 15.0).learning
    assert rebased.accept_reference == MEASURED_AT
    # (within the prior's share: the prior is the calibrated curve at the reference, which moved)
    assert learned(curves, rebased, AT) == pytest.approx(before, rel=0.03)
    assert learned(curves, rebased, FAR) == pytest.approx(CALIBRATED.speculative.at(FAR), rel=0.02)


def test_measured_curves_carry_the_calibrated_accept_length(kimi_doc: dict[str, Any]) -> None:
    doc = copy.deepcopy(kimi_doc)
    doc["spec"]["switching"]["curves"] = {
        "speculative": [{"concurrency": 1, "tokensPerSecond": 100}, {"concurrency": 8, "tokensPerSecond": 500}],
        "baseline": [{"concurrency": 1, "tokensPerSecond": 60}, {"concurrency": 8, "tokensPerSecond": 450}],
    }
    doc["spec"]["switching"]["calibratedAcceptLength"] = 3.2
    curves = curves_from_spec(parse_object(doc).spec.switching)
    assert curves is not None and curves.accept_length == 3.2
    assert effective(curves, start(curves)).accept_length == 3.2

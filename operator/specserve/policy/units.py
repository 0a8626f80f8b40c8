"""Units for curves modelled on the crossover (pure): the tokens/s per model unit, read off what the pools serve.

`model_from_crossover` is in relative units (the baseline's single-stream rate is 1). A pool's measured point
(policy.learning.observations: tokens/s and requests in flight per Ready replica) divided by the model's rate at
that concurrency is one reading of the scale. The scale is confirmed once, then fixed (docs/learning.md says why):
- baseline readings first: the speculative model's level also carries the guessed speed-up and the accept length
  of the moment; a round with a baseline reading drops the speculative readings waiting, and the baseline's are
  weighed first. Speculative readings taken since the last baseline one confirm a scale too, so that a pool that
  serves plain no longer (a split held at 100/0, Restart rolled into speculation) is still given units;
- robust: the last WINDOW readings of one mode are kept, and the scale is confirmed when AGREE of them lie within
  SPREAD of their median, as that median: one wild or partial reading neither confirms nor moves it;
- unknown is not zero: a pool with no reading of its tokens or requests gives no reading, and one that holds
  requests while serving nothing is a broken series, not a scale; a roll in flight gives none (the caller passes
  only a settled round's observations, as to learning).
Once confirmed, the ordinary learning (ratios against the model times the scale) corrects the model's shape and
level: moving the scale too would let the two estimates absorb the same evidence twice.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from specserve.api.models import Mode
from specserve.policy.curves import ModeCurves, rate
from specserve.policy.learning import Measurement

WINDOW = 8
AGREE = 6
SPREAD = 0.2  # relative distance from the window's median within which a reading agrees
Reading = tuple[Mode, float]  # (the pool's mode, tokens/s per model unit)


def readings(curves: ModeCurves, seen: Iterable[Measurement]) -> tuple[Reading, ...]:
    """One reading per measured pool: tokens/s over the model's rate at the pool's concurrency."""
    out: list[Reading] = []
    for o in seen:
        model = rate(curves.curve(o.mode), o.concurrency)
        if model > 0 and o.tokens_per_second > 0:
            out.append((o.mode, o.tokens_per_second / model))
    return tuple(out)


def confirm(pending: tuple[Reading, ...], new: Iterable[Reading]) -> tuple[float | None, tuple[Reading, ...]]:
    """The scale if this round confirms one (else None), and the readings still waiting: the baseline's first, then
    the speculative readings taken since the last baseline one."""
    new = tuple(new)
    fresh_plain = tuple(r for r in new if r[0] is Mode.BASELINE)
    plain = (*(r for r in pending if r[0] is Mode.BASELINE), *fresh_plain)[-WINDOW:]
    spec: tuple[Reading, ...] = ()
    if not fresh_plain:
        spec = (*(r for r in pending if r[0] is Mode.SPECULATIVE), *(r for r in new if r[0] is Mode.SPECULATIVE))
    spec = spec[-WINDOW:]
    for group in (plain, spec):
        scale = _agreed([v for _, v in group])
        if scale is not None:
            return scale, ()
    return None, plain + spec


def _agreed(values: list[float]) -> float | None:
    """The median of the readings within SPREAD of the window's median, when AGREE of them are."""
    if len(values) < AGREE:
        return None
    middle = statistics.median(values)
    agree = [v for v in values if abs(v / middle - 1) <= SPREAD]
    return statistics.median(agree) if len(agree) >= AGREE else None

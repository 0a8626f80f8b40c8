"""Live throughput curves (pure): what each mode's pools actually serve, learned round by round from the series
the switching loop already reads, with the calibrated curve as the prior.

The model (docs/learning.md says why each choice):
- A grid of at most MAX_GRID concurrencies per replica (the calibrated curves' own points). Each grid point
  keeps the decayed weight of its evidence and the weighted mean of observed / calibrated tokens/s (a ratio:
  an observation between grid points is compared with the calibrated curve where it was made, and shared by
  its two neighbours in proportion to log-distance).
- Evidence decays with HALF_LIFE_SECONDS; the calibrated curve counts as PRIOR_WEIGHT rounds at every point, so
  the estimate is (PRIOR_WEIGHT x 1 + w x mean) / (PRIOR_WEIGHT + w) and the confidence w / (w + PRIOR_WEIGHT).
- Robust: a residual beyond OUTLIER (relative to the current estimate) weighs OUTLIER/|r| and counts as
  +-OUTLIER (Huber), so a burst of wild readings barely moves the curve, while a real move keeps pulling.
- Physical shape: the curve the policy and status see is made non-decreasing in concurrency (weighted pool-
  adjacent-violators) wherever the calibrated curve is, and flat beyond its last point (saturating); it never
  extrapolates a trend, and with no evidence it is exactly the calibrated curve.
- Speculative evidence is stored per unit of accept length relative to a reference accept length: at a fixed draft
  configuration tokens/s is proportional to the accepted tokens per step, so when the accept length moves the
  whole speculative curve (observed and unobserved concurrencies alike) is scaled by recent / reference at once.
  The reference is the accept length the curve was measured at (spec.switching.calibratedAcceptLength), else
  the first one confirmed. The accept length in use is the trimmed mean of the last ACCEPT_WINDOW readings (the
  lowest and highest dropped: a broken scrape moves nothing): the mean, because a mix of prompts reads as
  alternating values (on the H100 at one request in flight, half of the requests sampled read 1.0 and 3.0 by
  turns, and tokens/s follows the mean), and a round teaches the speculative curve only while the readings
  agree (all but one within ACCEPT_OUTLIER of that mean) and its own reading does.
- Drift (policy.drift): a CUSUM on the residuals at confident points; when it fires, that mode's evidence is
  forgotten (weights to zero) and learning starts again from the calibrated prior.
- The accept length in use ages like the rest of the evidence: while no speculative pool is observed, the scale
  the policy decides with relaxes towards the reference with HALF_LIFE_SECONDS (accept_in_use).
- The policy decides with `effective`: the learned ratio only where confidence >= CONFIDENT, 1 elsewhere, and
  the ratio it uses moves at most SLEW_PER_HOUR (of the calibrated value) per hour: the bound on how far
  learned evidence alone can move a decision.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from specserve.api.curves import Curve
from specserve.api.models import Mode, Strategy
from specserve.policy.curves import ModeCurves, rate
from specserve.policy.drift import Cusum, step
from specserve.policy.types import PoolSignal, Sample

HALF_LIFE_SECONDS = 1800.0
PRIOR_WEIGHT = 2.0
CONFIDENT = 0.75  # w >= 3 x PRIOR_WEIGHT: six recent rounds of evidence at the point
OUTLIER = 0.3
SLEW_PER_HOUR = 0.25
ACCEPT_SCALE_RANGE = (0.25, 2.0)  # a reading outside is a broken series, not a prompt mix
ACCEPT_OUTLIER = 0.25  # relative distance from the accept length in use within which readings agree
ACCEPT_CONFIRM = 3  # readings that must agree before a first accept length is taken (the reference, if none given)
ACCEPT_WINDOW = 6  # the recent readings the accept length in use is the trimmed mean of
MAX_GRID = 12
MIN_RUNNING = 0.5  # requests per replica below which a pool's tokens/s says nothing about its curve


@dataclass(frozen=True)
class Point:
    weight: float = 0.0  # decayed evidence (rounds)
    ratio: float = 1.0  # evidence mean of observed / calibrated (speculative: per unit accept scale)
    applied: float = 1.0  # the learned ratio the policy decides with (confident, slew-bounded; per unit accept scale)


@dataclass(frozen=True)
class ModeLearning:
    points: tuple[Point, ...]
    cusum: Cusum = field(default_factory=Cusum)
    last_observed: float | None = None


@dataclass(frozen=True)
class Drift:
    mode: Mode
    time: float
    shift: float  # the median relative residual that fired the test


@dataclass(frozen=True)
class Learning:
    grid: tuple[float, ...]  # concurrencies per replica
    speculative: ModeLearning
    baseline: ModeLearning
    updated: float | None = None
    accept_reference: float | None = None  # the accept length speculative evidence is normalised to
    accept_recent: float | None = None  # the accept length in use (held while no speculative pool serves)
    last_drift: Drift | None = None
    # The last ACCEPT_WINDOW readings accept_recent is made of. Memory only (not in status): after an operator
    # restart accept_recent stands until ACCEPT_CONFIRM new readings are in, a few evaluations.
    accept_readings: tuple[float, ...] = ()
    # Curves modelled on the crossover (policy.units): the tokens/s per model unit once confirmed (in status), and
    # the readings waiting to confirm it (memory only, as accept_readings). None: relative units, nothing learned.
    scale: float | None = None
    scale_pending: tuple[tuple[Mode, float], ...] = ()

    def of(self, mode: Mode) -> ModeLearning:
        return self.speculative if mode is Mode.SPECULATIVE else self.baseline

    def with_mode(self, mode: Mode, learned: ModeLearning) -> Learning:
        return replace(self, speculative=learned) if mode is Mode.SPECULATIVE else replace(self, baseline=learned)


@dataclass(frozen=True)
class Measurement:
    """One pool's measured point on its mode's curve, per Ready replica (what the learning learns from)."""

    mode: Mode
    concurrency: float  # requests in flight per Ready replica (PoolSignal.in_flight)
    tokens_per_second: float  # per Ready replica
    accept_length: float | None = None


def grid_of(curves: ModeCurves) -> tuple[float, ...]:
    """The calibrated points of both modes, thinned evenly to MAX_GRID (status stays small)."""
    xs = sorted(set(curves.speculative.xs) | set(curves.baseline.xs))
    if len(xs) <= MAX_GRID:
        return tuple(xs)
    picks = {round(i * (len(xs) - 1) / (MAX_GRID - 1)) for i in range(MAX_GRID)}
    return tuple(xs[i] for i in sorted(picks))


def start(curves: ModeCurves) -> Learning:
    grid = grid_of(curves)
    empty = ModeLearning(tuple(Point() for _ in grid))
    return Learning(grid, empty, empty)


def fits(learning: Learning, curves: ModeCurves) -> bool:
    """Whether saved learning belongs to these calibrated curves (a new calibration starts learning afresh)."""
    return learning.grid == grid_of(curves) and len(learning.speculative.points) == len(learning.grid)


def estimate(point: Point) -> float:
    return (PRIOR_WEIGHT + point.weight * point.ratio) / (PRIOR_WEIGHT + point.weight)


def confidence(point: Point) -> float:
    return point.weight / (point.weight + PRIOR_WEIGHT)


def accept_scale(learning: Learning) -> float:
    """The accept length in use over the reference: what speculative evidence is normalised by."""
    if learning.accept_reference is None or learning.accept_recent is None or learning.accept_reference <= 0:
        return 1.0
    lo, hi = ACCEPT_SCALE_RANGE
    return max(lo, min(hi, learning.accept_recent / learning.accept_reference))


def accept_in_use(learning: Learning) -> float:
    """The accept scale the speculative curve is decided with: the one in use, relaxed towards the reference
    (1) with HALF_LIFE_SECONDS since the speculative pools were last observed, as all evidence decays. The accept
    length is renewed only while a speculative pool serves, and a low one sends the weights away from it:
    held for ever, one sampled half-hour kept every request on the plain pool whatever came after (on the H200, a
    greedy ramp right after a sampled one served all of it plain, NGRAM serving 2.7x at one in flight). Relaxed,
    the curve comes back to where the policy sends the pool traffic again, reads the accept length afresh, and
    keeps or drops it on those readings."""
    scale = accept_scale(learning)
    seen, now = learning.speculative.last_observed, learning.updated
    if seen is None or now is None or now <= seen:
        return scale
    decay: float = 0.5 ** ((now - seen) / HALF_LIFE_SECONDS)
    return 1.0 + (scale - 1.0) * decay


def _kernel(grid: Sequence[float], x: float) -> list[tuple[int, float]]:
    """The grid points an observation at x informs, with shares summing to 1 (linear in log concurrency)."""
    if x <= grid[0]:
        return [(0, 1.0)]
    if x >= grid[-1]:
        return [(len(grid) - 1, 1.0)]
    i = bisect.bisect_right(grid, x)
    span = math.log(grid[i] / grid[i - 1])
    right = math.log(x / grid[i - 1]) / span
    return [(j, s) for j, s in ((i - 1, 1.0 - right), (i, right)) if s > 0]


def _at(values: Sequence[float], shares: list[tuple[int, float]]) -> float:
    return sum(values[i] * s for i, s in shares)


def observations(sample: Sample, strategy: Strategy, shared_gpus: bool = False) -> tuple[Measurement, ...]:
    """What a sample says about the curves: per pool, tokens/s and running requests per Ready replica. Adaptive's
    one pool serves the baseline curve while its drafting is off (spec_num_steps == 0). Pools on shared GPUs: a
    pool teaches its curve only while the other one is idle (each serves less while both run, which neither curve
    describes)."""
    out: list[Measurement] = []
    pairs = (
        (sample.speculative, sample.baseline, Mode.SPECULATIVE),
        (sample.baseline, sample.speculative, Mode.BASELINE),
    )
    for signal, other, pool in pairs:
        if signal is None or (shared_gpus and busy(other)):
            continue
        drafting_off = strategy is Strategy.ADAPTIVE and signal.spec_num_steps == 0
        seen = _observation(signal, Mode.BASELINE if drafting_off else pool)
        if seen is not None:
            out.append(seen)
    return tuple(out)


def busy(signal: PoolSignal | None) -> bool:
    """Whether a pool may be serving: running requests read at MIN_RUNNING per Ready replica or more, or unread."""
    if signal is None or signal.ready_replicas <= 0:
        return False
    return signal.running is None or signal.running >= MIN_RUNNING * signal.ready_replicas


def _observation(signal: PoolSignal, mode: Mode) -> Measurement | None:
    """The pool's requests in flight and tokens decoded per second, in the units `specserve bench` measures the
    curves in. The decode tokens counted every step (Signal.DECODE_TOKENS) where the engines export them; else the
    scheduler's decode throughput gauge; else the rate of generated tokens (counted as requests finish: noisy over
    a short window, the robust fit absorbs it). The gauge is last because it is a decode-phase rate: on the H200 it
    swung between 3,200 and 21,600 tok/s on a plain pool sustaining 7,000 at 128 in flight, and curves learned from
    it read +50 % with nothing changed (docs/real-engine.md, fourth session)."""
    rates = (signal.decode_tokens_per_second, signal.gen_throughput, signal.tokens_per_second)
    tokens = next((t for t in rates if t is not None), None)
    in_flight = signal.in_flight()
    if signal.ready_replicas <= 0 or in_flight is None or tokens is None:
        return None
    per = in_flight / signal.ready_replicas
    if per < MIN_RUNNING or not math.isfinite(tokens) or tokens < 0:
        return None
    accept = signal.accept_length if mode is Mode.SPECULATIVE else None
    return Measurement(mode, per, tokens / signal.ready_replicas, accept)


@dataclass(frozen=True)
class Update:
    learning: Learning
    drifts: tuple[Drift, ...] = ()


def _decay(learned: ModeLearning, factor: float) -> ModeLearning:
    return replace(learned, points=tuple(replace(p, weight=p.weight * factor) for p in learned.points))


def _accept(learning: Learning, seen: Iterable[Measurement]) -> tuple[Learning, bool]:
    """This round's accept length (already a rate over the query window) joins the recent readings, and the accept
    length in use becomes their trimmed mean; whether the round may teach the speculative curve: the readings agree
    and so does this one. Too few readings yet (a start, an operator restart): the one in use stands, and a round
    teaches if its reading agrees with it. No reading: the one in use stands (no speculative pool serves)."""
    values = [o.accept_length for o in seen if o.accept_length is not None and math.isfinite(o.accept_length)]
    values = [v for v in values if v > 0]
    if not values:
        return learning, True
    value = sum(values) / len(values)
    readings = (*learning.accept_readings, value)[-ACCEPT_WINDOW:]
    learning = replace(learning, accept_readings=readings)
    current = learning.accept_recent
    if len(readings) < ACCEPT_CONFIRM:
        return learning, current is not None and _agree(value, current)
    middle = _trimmed_mean(readings)
    agreeing = sum(_agree(v, middle) for v in readings)
    settled = agreeing >= ACCEPT_CONFIRM and agreeing >= len(readings) - 1
    if current is None and not settled:  # the first accept length (the reference, if the spec gives none) waits
        return learning, False
    return replace(learning, accept_recent=middle), settled and _agree(value, middle)


def _agree(value: float, middle: float) -> bool:
    return abs(value / middle - 1) <= ACCEPT_OUTLIER


def _trimmed_mean(values: Sequence[float]) -> float:
    """The mean of three or more values without the lowest and the highest (the median of three)."""
    return statistics.fmean(sorted(values)[1:-1])


def _reference(learning: Learning, curves: ModeCurves) -> Learning:
    """The accept length speculative evidence is normalised to: the calibrated one where the spec gives it, else
    the first confirmed one (kept until a drift resets it). When it changes (calibratedAcceptLength set or
    edited, or status saved by a release that took the first reading) the stored ratios are rebased, so that the
    curve the evidence describes stays where it was."""
    reference = curves.accept_length or learning.accept_reference or learning.accept_recent
    if reference == learning.accept_reference:
        return learning
    before = accept_scale(learning)
    learning = replace(learning, accept_reference=reference)
    factor = before / accept_scale(learning)
    if factor == 1.0:
        return learning
    points = tuple(replace(p, ratio=p.ratio * factor) for p in learning.speculative.points)
    return learning.with_mode(Mode.SPECULATIVE, replace(learning.speculative, points=points))


def _learn_one(learning: Learning, curves: ModeCurves, seen: Measurement) -> tuple[Learning, Drift | None]:
    calibrated = rate(curves.curve(seen.mode), seen.concurrency)
    if calibrated <= 0:
        return learning, None
    scale = accept_scale(learning) if seen.mode is Mode.SPECULATIVE else 1.0
    observed = seen.tokens_per_second / calibrated / scale
    learned = learning.of(seen.mode)
    shares = _kernel(learning.grid, seen.concurrency)
    # Compared with the evidence where there is some (the prior's pull would read as a residual and fire
    # the drift test while the curve is still being learned), else with the prior.
    evidence = sum(learned.points[i].weight * s for i, s in shares)
    if evidence >= 1.0:
        predicted = sum(learned.points[i].weight * s * learned.points[i].ratio for i, s in shares) / evidence
    else:
        predicted = _at([estimate(p) for p in learned.points], shares)
    residual = observed / predicted - 1 if predicted > 0 else 0.0
    weight = 1.0 if abs(residual) <= OUTLIER else OUTLIER / abs(residual)
    value = predicted * (1 + max(-OUTLIER, min(OUTLIER, residual)))
    points = list(learned.points)
    for i, share in shares:
        p = points[i]
        w = p.weight + share * weight
        points[i] = replace(p, weight=w, ratio=(p.weight * p.ratio + share * weight * value) / w)
    cusum, drift = learned.cusum, None
    if _at([confidence(p) for p in learned.points], shares) >= CONFIDENT:
        tested = step(learned.cusum, residual)
        cusum = tested.state
        if tested.fired:
            drift = Drift(seen.mode, 0.0, tested.shift)
            points = [replace(p, weight=0.0, ratio=1.0) for p in points]  # forget: re-learn from the prior
    updated = ModeLearning(tuple(points), cusum, learned.last_observed)
    learning = learning.with_mode(seen.mode, updated)
    if drift is not None and seen.mode is Mode.SPECULATIVE and curves.accept_length is None:
        # No calibrated accept length: the evidence restarts from the curve as the accept length is now.
        learning = replace(learning, accept_reference=learning.accept_recent or learning.accept_reference)
    return learning, drift


def _slew(learning: Learning, dt: float) -> Learning:
    """Moves the applied ratios towards the learned ones, bounded: learned throughput is noisy evidence. The accept
    scale is not slewed (`effective` applies it at once): the accept length is measured directly, and on
    the H200 a prompt-mix change halved it within a minute while the bound let the curve move 1 % (docs/learning.md)."""
    bound = SLEW_PER_HOUR * dt / 3600.0
    out = learning
    for mode in (Mode.SPECULATIVE, Mode.BASELINE):
        learned = learning.of(mode)
        points = []
        for p in learned.points:
            target = estimate(p) if confidence(p) >= CONFIDENT else 1.0
            applied = p.applied + max(-bound, min(bound, target - p.applied))
            points.append(replace(p, applied=applied))
        out = out.with_mode(mode, replace(learned, points=tuple(points)))
    return out


def observe(learning: Learning, curves: ModeCurves, seen: Iterable[Measurement], now: float) -> Update:
    """One round: decay, learn from each observation, test for drift, move the applied ratios."""
    seen = tuple(seen)
    dt = max(0.0, now - learning.updated) if learning.updated is not None else 0.0
    factor = 0.5 ** (dt / HALF_LIFE_SECONDS)
    learning = replace(
        learning,
        speculative=_decay(learning.speculative, factor),
        baseline=_decay(learning.baseline, factor),
    )
    learning, teaches = _accept(learning, seen)
    learning = _reference(learning, curves)
    for mode in {o.mode for o in seen}:  # observed (the accept length in use is renewed) even where not taught
        learning = learning.with_mode(mode, replace(learning.of(mode), last_observed=now))
    if not teaches:  # readings that disagree: no speculative evidence this round
        seen = tuple(o for o in seen if o.mode is not Mode.SPECULATIVE or o.accept_length is None)
    drifts: list[Drift] = []
    for o in seen:
        learning, drift = _learn_one(learning, curves, o)
        if drift is not None:
            drifts.append(replace(drift, time=now))
    learning = _slew(learning, dt)
    last = drifts[-1] if drifts else learning.last_drift
    return Update(replace(learning, updated=now, last_drift=last), tuple(drifts))


def nondecreasing(values: Sequence[float], weights: Sequence[float] | None = None) -> list[float]:
    """The weighted least-squares non-decreasing fit (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, w in zip(values, weights or [1.0] * len(values), strict=True):
        blocks.append([v, max(w, 1e-9), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, n2 = blocks.pop()
            m1, w1, n1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    out: list[float] = []
    for mean, _, count in blocks:
        out += [mean] * int(count)
    return out


def _physical(
    calibrated: Sequence[float], values: Sequence[float], weights: Sequence[float] | None = None
) -> list[float]:
    """Non-decreasing where the calibrated curve is: a measured curve that falls (a real saturation artefact,
    or a profile's shape) is the prior's own shape, and evidence never makes it less physical than it was."""
    if all(a <= b for a, b in itertools.pairwise(calibrated)):
        return nondecreasing(values, weights)
    return list(values)


def _curve(base: Curve, grid: Sequence[float], ratios: Sequence[float], what: str) -> Curve:
    """The calibrated curve's own points scaled by the ratios (interpolated on the grid), kept physical."""
    ys = [y * _at(ratios, _kernel(grid, x)) for x, y in zip(base.xs, base.ys, strict=True)]
    return Curve.from_points(zip(base.xs, _physical(base.ys, ys), strict=True), what)


def effective(curves: ModeCurves, learning: Learning) -> ModeCurves:
    """The curves the policy decides with: calibrated, scaled where learning is confident (slew-bounded), the
    speculative curve also by the accept length's scale (at once; relaxed as it ages: accept_in_use)."""
    scale = accept_in_use(learning)
    spec = [p.applied * scale for p in learning.speculative.points]
    base = [p.applied for p in learning.baseline.points]
    return ModeCurves(
        speculative=_curve(curves.speculative, learning.grid, spec, "effective speculative"),
        baseline=_curve(curves.baseline, learning.grid, base, "effective baseline"),
        modelled=curves.modelled,
        accept_length=curves.accept_length,
        scale=curves.scale,
    )


def decision_curves(curves: ModeCurves, learning: Learning, strategy: Strategy) -> ModeCurves:
    """The curves the policy decides with. Adaptive keeps the calibrated ones: each move of its crossover
    re-renders the config and rolls the pool, and on the drifting-acceptance day (docs/learning.md) following
    the moving crossover cost more than it gained even with the true curves; its learned curves are reported
    (status, advisory) but do not drive re-renders."""
    return curves if strategy is Strategy.ADAPTIVE else effective(curves, learning)


def learned_points(curves: ModeCurves, learning: Learning, mode: Mode) -> list[tuple[float, float, float, float]]:
    """(concurrency, calibrated, learned, confidence) per grid point, the learned values non-decreasing."""
    learned = learning.of(mode)
    scale = accept_in_use(learning) if mode is Mode.SPECULATIVE else 1.0
    cal = [rate(curves.curve(mode), x) for x in learning.grid]
    raw = [c * estimate(p) * scale for c, p in zip(cal, learned.points, strict=True)]
    fitted = _physical(cal, raw, [p.weight + PRIOR_WEIGHT for p in learned.points])
    return [(x, c, y, confidence(p)) for x, c, y, p in zip(learning.grid, cal, fitted, learned.points, strict=True)]


def coverage(learning: Learning, mode: Mode) -> tuple[float, float] | None:
    """The concurrency range over which the learned curve is confident (None: nowhere yet)."""
    xs = [x for x, p in zip(learning.grid, learning.of(mode).points, strict=True) if confidence(p) >= CONFIDENT]
    return (xs[0], xs[-1]) if xs else None

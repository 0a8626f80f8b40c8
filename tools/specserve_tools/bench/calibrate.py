"""Calibration math: from a speculative and a baseline throughput curve to switching thresholds.

Pure functions, no I/O (scipy does the fitting, see fit.py).

Measured curves are noisy: one level where the two modes swap by a few percent is not a crossover (the first
real-engine run put one at 1.27 in flight because C=2 crossed, although speculation won by 4-43 % from C=4 to
64). So each mode's curve is first fitted to its shape (fit.py: never falls, never grows faster than
proportionally), and each level is called for a mode only where the fitted difference exceeds that level's
noise (the 95 % confidence intervals of the two modes, combined); otherwise the level is "within the noise".

- crossover: called only where speculation wins beyond the noise at some level and the baseline wins beyond
  the noise at a higher level with no speculative win above it (one contiguous baseline region at the top).
  It lies between the last such speculative level and the first such baseline level; the point is the crossing
  of the fitted curves there, exact on clean curves (piecewise linear, see api/curves.py). A baseline win
  below a speculative one is an outlier, reported, not a crossover. A crossover the spec already has is kept
  unless the data contradict it (see _keep_current): re-measuring within the noise rolls nothing.
- when the data cannot decide (no level beyond the noise) the verdict says so and `--write` changes nothing.
  Conservative means: keep what the spec has; with nothing there, serve baseline: the mode whose high-load
  throughput is known not to collapse (speculation's can: the seed data lost 56 % at high load), without a
  draft model's memory, for a gain nobody measured. The same rule calls a low-confidence crossover where the
  fitted curves cross above the last speculative win and the baseline stays ahead up to the highest level, but
  only within the noise: baseline at high load.
- hysteresis: the relative half-width of the widest symmetric band around the crossover in which the two
  curves stay within `tolerance` (default 5%, about a bench's run-to-run noise) of each other: inside it, being
  in the "wrong" mode costs at most that much, so switching there gains nothing worth a switch.
- adaptive config: SGLang's adaptive speculation picks the largest batch-size key <= the (padded) batch size,
  so drafting goes off at the first CUDA-graph capture size >= the crossover.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from specserve.api.curves import Curve, crossings, interpolate
from specserve.api.models import LearningStatus, Mode
from specserve.policy.learning import nondecreasing
from specserve.render.adaptive import steps_for_crossover
from specserve_tools.bench.fit import saturating_fit

MIN_HYSTERESIS = 0.05
MAX_HYSTERESIS = 0.5
# The relative 95 % CI half-width assumed for a level measured in one window (old result files, --repeats 1):
# about what repeated bench runs differ by (docs/bench.md, Noise).
DEFAULT_NOISE = 0.05
# The least relative half-width a repeated level gets: its windows come from one run of one server, so they do
# not see what differs between runs (a restart, the other server's run, clocks).
MIN_NOISE = 0.01


class Verdict(StrEnum):
    CROSSOVER = "crossover"  # speculation wins below the crossover, baseline above
    BASELINE_ONLY = "baseline-only"  # speculation never wins beyond the noise at any measured concurrency
    SPECULATIVE_ONLY = "speculative-only"  # speculation wins, and the baseline never wins beyond the noise above
    UNDECIDED = "undecided"  # no level beyond the noise: keep what the spec has


class Winner(StrEnum):
    SPECULATIVE = "speculative"
    BASELINE = "baseline"
    NEITHER = "within the noise"


@dataclass(frozen=True)
class Measured:
    """One mode's measured curve with each level's relative 95 % CI half-width (0: exact, e.g. a profile)."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]
    noise: tuple[float, ...]

    @classmethod
    def exact(cls, curve: Curve) -> Measured:
        return cls(curve.xs, curve.ys, tuple(0.0 for _ in curve.xs))

    @classmethod
    def from_levels(cls, levels: Sequence[tuple[float, float, float | None]], default_noise: float) -> Measured:
        """(concurrency, tok/s, CI half-width or None) per level; None: `default_noise` of the value."""
        curve = Curve.from_points([(x, y) for x, y, _ in levels])  # validates and sorts
        by_x = {float(x): (y, h) for x, y, h in levels}
        noise = []
        for x, y in curve.points():
            half = by_x[x][1]
            noise.append(default_noise if half is None or y <= 0 else max(MIN_NOISE, half / y))
        return cls(curve.xs, curve.ys, tuple(noise))

    def fitted(self) -> Curve:
        return Curve.from_points(zip(self.xs, saturating_fit(self.xs, self.ys, self.noise), strict=True))

    def noise_at(self, x: float) -> float:
        return interpolate(self.xs, self.noise, x)


@dataclass(frozen=True)
class LevelCall:
    """One concurrency of the union grid: the fitted curves and who wins beyond the noise."""

    concurrency: float
    speculative: float
    baseline: float
    noise: float  # the difference's 95 % half-width, in tok/s
    winner: Winner

    @property
    def margin(self) -> float:
        """Speculation's advantage as a fraction of the baseline."""
        return (self.speculative - self.baseline) / self.baseline if self.baseline > 0 else math.inf


@dataclass(frozen=True)
class Calibration:
    verdict: Verdict
    crossover: float | None
    hysteresis: float
    initial_mode: str  # "Speculative" or "Baseline", as the API's Mode values
    speculative: list[tuple[float, float]]  # the curves to write: fitted, levels contradicting the verdict left out
    baseline: list[tuple[float, float]]
    adaptive_config: dict[str, list[int]] | None
    notes: list[str] = field(default_factory=list)
    confidence: str = "high"  # "high": the verdict rests on levels beyond the noise; "low": it does not
    crossover_range: tuple[float, float] | None = None  # where the crossover lies, given the noise
    levels: list[LevelCall] = field(default_factory=list)
    # The speculative pods' accept length while the curves were measured (bench's, the median over its levels):
    # the reference the operator scales the speculative curve from (spec.switching.calibratedAcceptLength).
    accept_length: float | None = None


def hysteresis_band(spec: Curve, base: Curve, crossover: float, tolerance: float = 0.05) -> float:
    """Relative half-width h of the widest band [c(1-h), c(1+h)] around the crossover c in which
    |spec - base| <= tolerance * max(spec, base), clamped to [MIN_HYSTERESIS, MAX_HYSTERESIS]. Sampled on a fine
    geometric grid on each side (the curves are cheap)."""
    lo_x = min(spec.xs[0], base.xs[0])
    hi_x = max(spec.xs[-1], base.xs[-1])

    def close(x: float) -> bool:
        s, b = spec.at(x), base.at(x)
        top = max(s, b)
        return top == 0 or abs(s - b) <= tolerance * top

    steps = 400
    lo = crossover
    ratio_down = (lo_x / crossover) ** (1 / steps) if crossover > lo_x else 1.0
    x = crossover
    for _ in range(steps):
        x *= ratio_down
        if x < lo_x or not close(x):
            break
        lo = x
    hi = crossover
    ratio_up = (hi_x / crossover) ** (1 / steps) if hi_x > crossover else 1.0
    x = crossover
    for _ in range(steps):
        x *= ratio_up
        if x > hi_x or not close(x):
            break
        hi = x
    # symmetric band (the API's hysteresis is one fraction): the narrower side, so that inside the band being
    # in the "wrong" mode never costs more than `tolerance`
    width = min((crossover - lo) / crossover, (hi - crossover) / crossover)
    return round(min(MAX_HYSTERESIS, max(MIN_HYSTERESIS, width)), 2)


def adaptive_config_for(crossover: float | None, verdict: Verdict, num_steps: int) -> dict[str, list[int]] | None:
    """Our list form of --speculative-adaptive-config: batch-size key -> candidate steps (0 = drafting off)."""
    if verdict is Verdict.BASELINE_ONLY:
        return {"1": [0]}
    if verdict is Verdict.UNDECIDED:
        return None
    if verdict is Verdict.SPECULATIVE_ONLY or crossover is None:
        return {"1": [num_steps]}
    return steps_for_crossover(crossover, num_steps)


def call_levels(spec: Measured, base: Measured) -> tuple[Curve, Curve, list[LevelCall]]:
    """The fitted curves and, on the union of their concurrencies, who wins beyond the noise."""
    fs, fb = spec.fitted(), base.fitted()
    calls = []
    for x in sorted(set(fs.xs) | set(fb.xs)):
        s, b = fs.at(x), fb.at(x)
        half = math.hypot(spec.noise_at(x) * s, base.noise_at(x) * b)
        winner = Winner.SPECULATIVE if s - b > half else Winner.BASELINE if b - s > half else Winner.NEITHER
        if half == 0 and s == b:
            winner = Winner.BASELINE  # exact curves that touch: the baseline is not beaten there
        calls.append(LevelCall(x, s, b, half, winner))
    return fs, fb, calls


def _enough_left(points: list[tuple[float, float]], other: list[tuple[float, float]], keep: set[float]) -> bool:
    return len([x for x, _ in points if x in keep]) >= 2 and len([x for x, _ in other if x in keep]) >= 2


def _written(
    fs: Curve, fb: Curve, calls: list[LevelCall], crossover: float | None, verdict: Verdict
) -> tuple[list[tuple[float, float]], list[tuple[float, float]], list[float]]:
    """The fitted curves, less the levels (measured in both) whose fitted difference contradicts the verdict:
    they are within the noise or outliers, and the operator's policy reads the written curves' own crossing."""

    def expected_spec_wins(x: float) -> bool:
        if verdict is Verdict.SPECULATIVE_ONLY:
            return True
        if verdict is Verdict.BASELINE_ONLY:
            return False
        return crossover is not None and x < crossover

    common = set(fs.xs) & set(fb.xs)
    dropped = [
        c.concurrency
        for c in calls
        if c.concurrency in common and (c.speculative > c.baseline) != expected_spec_wins(c.concurrency)
    ]
    if verdict is Verdict.UNDECIDED or not dropped:
        return fs.points(), fb.points(), []
    keep = set(fs.xs) | set(fb.xs)
    keep -= set(dropped)
    if not _enough_left(fs.points(), fb.points(), keep):
        return fs.points(), fb.points(), []
    return [p for p in fs.points() if p[0] in keep], [p for p in fb.points() if p[0] in keep], dropped


def _speculation_wins(
    fs: Curve, fb: Curve, calls: list[LevelCall], notes: list[str]
) -> tuple[Verdict, float | None, tuple[float, float] | None, str]:
    """The verdict when speculation wins beyond the noise somewhere: a crossover where the baseline wins beyond
    the noise above the last speculative win (or, with low confidence, where the fitted curves cross above it),
    else speculative only. Appends what it found to `notes`."""
    xs = [c.concurrency for c in calls]
    spec_at = [i for i, c in enumerate(calls) if c.winner is Winner.SPECULATIVE]
    base_at = [i for i, c in enumerate(calls) if c.winner is Winner.BASELINE]
    p = spec_at[-1]
    q = next((i for i in base_at if i > p), None)
    outliers = [xs[i] for i in base_at if i < p]
    if outliers:
        notes.append(
            "The baseline won beyond the noise at concurrency "
            + ", ".join(f"{x:g}" for x in outliers)
            + f", but speculation wins again above (up to {xs[p]:g}): an outlier, not a crossover. "
            "Re-measure that level with more repeats."
        )
    after = [(x, d) for x, d in crossings(fs, fb) if x > xs[p]]
    down = [x for x, d in after if d < 0]
    if q is not None:
        crossover = round(next((x for x in down if x <= xs[q]), xs[q]), 2)
        notes.append(
            f"Speculation wins below concurrency {crossover:g}; the baseline wins above it (beyond the noise "
            f"at {xs[p]:g} and {xs[q]:g}: the crossover lies between them)."
        )
        return Verdict.CROSSOVER, crossover, (xs[p], xs[q]), "high"
    if after and after[-1][1] < 0:  # the fitted baseline stays ahead from its last crossing to the top
        crossover = round(after[-1][0], 2)
        notes.append(
            f"Speculation wins beyond the noise up to concurrency {xs[p]:g}; above it the fitted curves cross "
            f"at {crossover:g}, but the baseline's lead there is within the noise. Conservative: baseline "
            "at high load, so the crossover is set there (low confidence; measure higher or repeat)."
        )
        return Verdict.CROSSOVER, crossover, (xs[p], xs[-1]), "low"
    where = (
        f"at every measured concurrency ({xs[0]:g} to {xs[-1]:g})"
        if len(spec_at) == len(calls)
        else "beyond the noise at concurrency "
        + ", ".join(f"{xs[i]:g}" for i in spec_at)
        + f", and the baseline nowhere above them (measured up to {xs[-1]:g})"
    )
    notes.append(
        f"Speculation wins {where}: no crossover. Recommendation: serve speculative; "
        "measure higher concurrency to find a crossover."
    )
    return Verdict.SPECULATIVE_ONLY, None, None, "high" if p == len(calls) - 1 else "low"


def _keep_current(current: float, fitted: float | None, calls: list[LevelCall]) -> str | None:
    """Why the spec's current crossover stays (None: the data contradict it, or it is what they give). The data
    contradict a crossover c where speculation wins beyond the noise above c, or the baseline wins beyond it
    below c (except outliers: baseline wins below speculation's last win)."""
    if fitted is not None and math.isclose(current, fitted, rel_tol=1e-9):
        return None
    spec_x = [c.concurrency for c in calls if c.winner is Winner.SPECULATIVE]
    last_spec = spec_x[-1] if spec_x else -math.inf
    base_x = [c.concurrency for c in calls if c.winner is Winner.BASELINE and c.concurrency > last_spec]
    if any(x > current for x in spec_x) or any(x < current for x in base_x) or current <= calls[0].concurrency:
        return None
    found = f"the fitted crossing is {fitted:g}" if fitted is not None else "they give no crossover"
    return (
        f"The spec's current crossover {current:g} is kept: the data do not contradict it within the noise "
        f"({found}; moving it would roll the Adaptive pods for noise)."
    )


def calibrate(
    spec: Curve | Measured,
    base: Curve | Measured,
    num_steps: int = 3,
    tolerance: float = 0.05,
    current_crossover: float | None = None,
) -> Calibration:
    """Curves are taken as exact (no noise); Measured curves carry each level's noise."""
    if not (0 <= tolerance < 1) or math.isnan(tolerance):
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    ms = spec if isinstance(spec, Measured) else Measured.exact(spec)
    mb = base if isinstance(base, Measured) else Measured.exact(base)
    fs, fb, calls = call_levels(ms, mb)
    xs = [c.concurrency for c in calls]
    spec_at = [i for i, c in enumerate(calls) if c.winner is Winner.SPECULATIVE]
    base_at = [i for i, c in enumerate(calls) if c.winner is Winner.BASELINE]
    notes: list[str] = []
    crossover: float | None = None
    span: tuple[float, float] | None = None
    confidence = "high"
    if not spec_at and not base_at:
        verdict, initial, confidence = Verdict.UNDECIDED, "Baseline", "low"
        notes.append(
            f"The data cannot decide: at every measured concurrency ({xs[0]:g} to {xs[-1]:g}) the two modes are "
            "within the noise of each other. Keep the current settings (--write changes nothing); with none, "
            "serve baseline. Re-measure with more repeats (specserve bench --repeats, --ci-target)."
        )
    elif not spec_at:
        verdict, initial = Verdict.BASELINE_ONLY, "Baseline"
        confidence = "high" if calls[0].winner is Winner.BASELINE else "low"
        notes.append(
            "Speculation never wins: the baseline serves more tokens/s at every measured concurrency "
            f"({xs[0]:g} to {xs[-1]:g})"
            + ("" if len(base_at) == len(calls) else ", or the two are within the noise of each other")
            + ". Recommendation: serve baseline only (no speculative pool)."
        )
    else:
        verdict, crossover, span, confidence = _speculation_wins(fs, fb, calls, notes)
        initial = "Speculative"
    if current_crossover is not None and verdict is not Verdict.UNDECIDED:
        kept = _keep_current(current_crossover, crossover, calls)
        if kept is not None:
            notes.append(kept)
            if verdict is not Verdict.CROSSOVER:
                verdict, initial, confidence = Verdict.CROSSOVER, "Speculative", "low"
            crossover = current_crossover
    written_s, written_b, dropped = _written(fs, fb, calls, crossover, verdict)
    if dropped:
        notes.append(
            "Left out of the written curves, where the measured difference is within the noise (or an outlier) "
            "and contradicts the verdict: concurrency " + ", ".join(f"{x:g}" for x in dropped) + "."
        )
    curve_s, curve_b = Curve.from_points(written_s), Curve.from_points(written_b)
    hysteresis = hysteresis_band(curve_s, curve_b, crossover, tolerance) if crossover is not None else 0.1
    return Calibration(
        verdict=verdict,
        crossover=crossover,
        hysteresis=hysteresis,
        initial_mode=initial,
        speculative=written_s,
        baseline=written_b,
        adaptive_config=adaptive_config_for(crossover, verdict, num_steps),
        notes=notes,
        confidence=confidence,
        crossover_range=span,
        levels=calls,
    )


MAX_CURVE_POINTS = 64  # SwitchingSpec.curves lists hold at most 64 points


def curve_points(points: list[tuple[float, float]]) -> list[dict[str, float]]:
    """Curve points as the API stores them (spec.switching.curves.*)."""
    return [{"concurrency": x, "tokensPerSecond": round(y, 2)} for x, y in points[:MAX_CURVE_POINTS]]


def switching_fields(cal: Calibration) -> dict[str, object]:
    """The spec.switching fields calibrate sets (camelCase, as in YAML). crossoverConcurrency is None when there
    is no crossover: the caller removes the key."""
    fields: dict[str, object] = {
        "crossoverConcurrency": cal.crossover,
        "hysteresis": cal.hysteresis,
        "initialMode": cal.initial_mode,
        "curves": {"speculative": curve_points(cal.speculative), "baseline": curve_points(cal.baseline)},
    }
    if cal.accept_length is not None:  # a sweep without the gauge leaves a hand-set value alone
        fields["calibratedAcceptLength"] = round(cal.accept_length, 3)
    return fields


# ------------------------------------------------------------------ write-back of the operator's learned curves


@dataclass(frozen=True)
class LearnedWriteBack:
    speculative: list[tuple[float, float]]
    baseline: list[tuple[float, float]]
    crossover: float | None
    notes: list[str]


def learned_write_back(learning: LearningStatus, min_confidence: float) -> LearnedWriteBack:
    """status.learning -> the curves to write into spec.switching.curves: at each grid concurrency the learned
    tokens/s where its confidence reaches `min_confidence`, the calibrated one elsewhere (made non-decreasing,
    as the operator uses them); and their crossover."""
    notes: list[str] = []
    out: dict[Mode, list[tuple[float, float]]] = {}
    for mode, learned in ((Mode.SPECULATIVE, learning.speculative), (Mode.BASELINE, learning.baseline)):
        if not learned.points:
            raise ValueError(f"status.learning.{mode.value.lower()} has no points: nothing was learned yet")
        confident = [p for p in learned.points if p.confidence >= min_confidence]
        ys = [p.learned if p.confidence >= min_confidence else p.calibrated for p in learned.points]
        out[mode] = list(zip((p.concurrency for p in learned.points), nondecreasing(ys), strict=True))
        if confident:
            span = f"{confident[0].concurrency:g}..{confident[-1].concurrency:g}"
            notes.append(
                f"{mode.value.lower()}: learned values at {len(confident)} points ({span}), calibrated elsewhere"
            )
        else:
            notes.append(f"{mode.value.lower()}: no point reaches confidence {min_confidence:g}: calibrated kept")
    spec = Curve.from_points(out[Mode.SPECULATIVE], "learned speculative")
    base = Curve.from_points(out[Mode.BASELINE], "learned baseline")
    cross = next((x for x, direction in crossings(spec, base) if direction < 0), None)
    return LearnedWriteBack(out[Mode.SPECULATIVE], out[Mode.BASELINE], cross, notes)

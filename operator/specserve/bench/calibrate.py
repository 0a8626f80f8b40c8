"""Calibration math: from a speculative and a baseline throughput curve to switching thresholds.

Pure functions, no I/O, so the operator can import them (e.g. to learn the crossover from live data later).

- crossover: the first concurrency at which the baseline curve catches up with the speculative one. Both curves
  are piecewise linear between measured points (see curves.py), so on the union of their measured concurrencies
  the difference is linear on every segment and the crossing is solved exactly on that segment.
- hysteresis: the relative half-width of the widest symmetric band around the crossover in which the two curves
  stay within `tolerance` (default 5%, about a bench's run-to-run noise) of each other: inside it, being in the
  "wrong" mode costs at most that much, so switching there gains nothing worth a switch.
- adaptive config: SGLang's adaptive speculation picks the largest batch-size key <= the (padded) batch size,
  so drafting goes off at the first CUDA-graph capture size >= the crossover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from specserve.api.curves import Curve, crossings
from specserve.render.adaptive import steps_for_crossover

MIN_HYSTERESIS = 0.05
MAX_HYSTERESIS = 0.5


class Verdict(StrEnum):
    CROSSOVER = "crossover"  # speculation wins below the crossover, baseline above
    BASELINE_ONLY = "baseline-only"  # speculation never wins at any measured concurrency
    SPECULATIVE_ONLY = "speculative-only"  # speculation wins at every measured concurrency


@dataclass(frozen=True)
class Calibration:
    verdict: Verdict
    crossover: float | None
    hysteresis: float
    initial_mode: str  # "Speculative" or "Baseline", as the API's Mode values
    speculative: list[tuple[float, float]]
    baseline: list[tuple[float, float]]
    adaptive_config: dict[str, list[int]] | None
    notes: list[str] = field(default_factory=list)


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
    if verdict is Verdict.SPECULATIVE_ONLY or crossover is None:
        return {"1": [num_steps]}
    return steps_for_crossover(crossover, num_steps)


def calibrate(spec: Curve, base: Curve, num_steps: int = 3, tolerance: float = 0.05) -> Calibration:
    if not (0 <= tolerance < 1) or math.isnan(tolerance):
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    found = crossings(spec, base)
    downs = [x for x, direction in found if direction < 0]
    grid = sorted(set(spec.xs) | set(base.xs))
    spec_wins = [x for x in grid if spec.at(x) > base.at(x)]
    notes: list[str] = []
    if not spec_wins:
        verdict, crossover, initial = Verdict.BASELINE_ONLY, None, "Baseline"
        notes.append(
            "Speculation never wins: the baseline serves more tokens/s at every measured concurrency "
            f"({grid[0]:g} to {grid[-1]:g}). Recommendation: serve baseline only (no speculative pool)."
        )
    elif not downs:
        verdict, crossover, initial = Verdict.SPECULATIVE_ONLY, None, "Speculative"
        where = (
            f"at every measured concurrency ({grid[0]:g} to {grid[-1]:g})"
            if len(spec_wins) == len(grid)
            else f"from concurrency {spec_wins[0]:g} up to the highest measured ({grid[-1]:g})"
        )
        notes.append(
            f"Speculation wins {where}: no crossover. Recommendation: serve speculative; "
            "measure higher concurrency to find a crossover."
        )
    else:
        verdict, crossover, initial = Verdict.CROSSOVER, round(downs[0], 2), "Speculative"
        notes.append(f"Speculation wins below concurrency {crossover:g}; the baseline wins above it.")
        if len(found) > 1:
            notes.append(
                "The curves cross more than once (at "
                + ", ".join(f"{x:.1f}" for x, _ in found)
                + "); using the first crossing where speculation stops winning. Re-measure if this is noise."
            )
        if spec.at(grid[0]) <= base.at(grid[0]):
            notes.append(f"The baseline also wins at the lowest concurrency measured ({grid[0]:g}).")
    hysteresis = hysteresis_band(spec, base, crossover, tolerance) if crossover is not None else 0.1
    return Calibration(
        verdict=verdict,
        crossover=crossover,
        hysteresis=hysteresis,
        initial_mode=initial,
        speculative=spec.points(),
        baseline=base.points(),
        adaptive_config=adaptive_config_for(crossover, verdict, num_steps),
        notes=notes,
    )


MAX_CURVE_POINTS = 64  # SwitchingSpec.curves lists hold at most 64 points


def curve_points(points: list[tuple[float, float]]) -> list[dict[str, float]]:
    """Curve points as the API stores them (spec.switching.curves.*)."""
    return [{"concurrency": x, "tokensPerSecond": round(y, 2)} for x, y in points[:MAX_CURVE_POINTS]]


def switching_fields(cal: Calibration) -> dict[str, object]:
    """The spec.switching fields calibrate sets (camelCase, as in YAML). crossoverConcurrency is None when there
    is no crossover: the caller removes the key."""
    return {
        "crossoverConcurrency": cal.crossover,
        "hysteresis": cal.hysteresis,
        "initialMode": cal.initial_mode,
        "curves": {"speculative": curve_points(cal.speculative), "baseline": curve_points(cal.baseline)},
    }

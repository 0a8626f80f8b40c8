"""Per-replica throughput curves per mode: what the policy weighs the two modes with.

Two sources, in this order (docs/switching.md says what each lets the policy do):
- `spec.switching.curves`, what `specserve calibrate` writes: measured total output tokens/s of one replica
  against its concurrency, per mode;
- `spec.switching.crossoverConcurrency` alone: a model built from the crossover only (`model_from_crossover`),
  in units of the baseline's single-stream rate. Its absolute numbers mean nothing; its ratios (which mode
  wins, by how much, what a restart costs against the regret) are what the policy uses, until the pools' own
  readings give it units (`with_units`; policy.units, docs/learning.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from specserve.api.curves import Curve, CurveError, crossings
from specserve.api.models import Mode, SwitchingSpec


@dataclass(frozen=True)
class ModeCurves:
    """Total output tokens/s of one replica against its concurrency, per mode."""

    speculative: Curve
    baseline: Curve
    modelled: bool = False  # True: built from the crossover alone (model_from_crossover), not measured
    # spec.switching.calibratedAcceptLength: the accept length the speculative curve was measured at (None: not
    # given). Learning normalises the speculative evidence to it (policy.learning).
    accept_length: float | None = None
    # Modelled curves only: the tokens/s per model unit the pools' readings gave them (with_units); None: unknown,
    # the model is in relative units.
    scale: float | None = None

    @property
    def unitless(self) -> bool:
        """Modelled and not yet given units: a tokens/s or TPOT in seconds cannot be read off these curves."""
        return self.modelled and self.scale is None

    def curve(self, mode: Mode) -> Curve:
        return self.speculative if mode is Mode.SPECULATIVE else self.baseline

    def rate(self, mode: Mode, concurrency: float) -> float:
        """Tokens/s of one replica at `concurrency`. Below the first measured point the line runs to (0, 0)
        rather than flat: an idle replica serves nothing (Curve.at is flat there, which would make a sliver of
        load on a pool look free to the split). Flat beyond the last point (saturated)."""
        return rate(self.curve(mode), concurrency)


def rate(curve: Curve, concurrency: float) -> float:
    if concurrency <= 0:
        return 0.0
    if concurrency < curve.xs[0]:
        return curve.ys[0] * concurrency / curve.xs[0]
    return curve.at(concurrency)


@lru_cache(maxsize=256)  # evaluated every evaluation on curves that change only with the spec
def crossover(curves: ModeCurves) -> float | None:
    """The first concurrency per replica at which speculation stops winning (bench.calibrate's crossing, exact
    on the piecewise-linear curves); None when one mode wins everywhere (see `better_mode`)."""
    for x, direction in crossings(curves.speculative, curves.baseline):
        if direction < 0:
            return x
    return None


def better_mode(curves: ModeCurves) -> Mode:
    """With no crossover: the mode that serves more tokens/s summed over the measured concurrencies."""
    grid = sorted(set(curves.speculative.xs) | set(curves.baseline.xs))
    margin = sum(curves.speculative.at(x) - curves.baseline.at(x) for x in grid)
    return Mode.SPECULATIVE if margin > 0 else Mode.BASELINE


# The crossover-only model. Baseline: a saturating curve, per-stream rate 1 at concurrency 1, half of it at
# 2c + 1 (so it still grows through the crossover). Speculation: the baseline times a speed-up that falls
# linearly in concurrency from MODEL_LOW_SPEEDUP at 1 to 1.0 at the crossover and to MODEL_HIGH_SPEEDUP at 2c,
# flat beyond (the EAGLE-3 paper's ~2x at batch 1; llm-d's ~-13% past its crossover).
MODEL_LOW_SPEEDUP = 1.5
MODEL_HIGH_SPEEDUP = 0.87
MODEL_POINTS = 24


def model_from_crossover(crossover_concurrency: float) -> ModeCurves:
    c = max(float(crossover_concurrency), 1.01)  # the model needs room below the crossover
    top = 8 * c
    ratio = (top / 0.5) ** (1 / (MODEL_POINTS - 1))
    xs = sorted({round(0.5 * ratio**i, 6) for i in range(MODEL_POINTS)} | {1.0, c, 2 * c})

    def base(x: float) -> float:
        return x / (1 + (x - 1) / (2 * c)) if x >= 1 else x

    def speedup(x: float) -> float:
        if x <= 1:
            return MODEL_LOW_SPEEDUP
        if x <= c:
            return MODEL_LOW_SPEEDUP + (1 - MODEL_LOW_SPEEDUP) * (x - 1) / (c - 1)
        if x <= 2 * c:
            return 1 + (MODEL_HIGH_SPEEDUP - 1) * (x - c) / c
        return MODEL_HIGH_SPEEDUP

    return ModeCurves(
        speculative=Curve.from_points([(x, base(x) * speedup(x)) for x in xs], "modelled speculative"),
        baseline=Curve.from_points([(x, base(x)) for x in xs], "modelled baseline"),
        modelled=True,
    )


def with_units(curves: ModeCurves, scale: float) -> ModeCurves:
    """Modelled curves in tokens/s: every point times `scale` (tokens/s per model unit). The shape, and so every
    ratio the policy used in relative units, is unchanged."""
    return replace(
        curves,
        speculative=Curve.from_points([(x, y * scale) for x, y in curves.speculative.points()], "scaled speculative"),
        baseline=Curve.from_points([(x, y * scale) for x, y in curves.baseline.points()], "scaled baseline"),
        scale=scale,
    )


def curves_from_spec(switching: SwitchingSpec) -> ModeCurves | None:
    """Measured curves when both modes have points; else the crossover model; else None (the policy holds
    initialMode). Curves the API accepted but Curve rejects (duplicate concurrencies) count as absent."""
    measured = switching.curves
    if measured is not None and measured.speculative and measured.baseline:
        try:
            return ModeCurves(
                speculative=Curve.from_points(
                    [(p.concurrency, p.tokens_per_second) for p in measured.speculative], "curves.speculative"
                ),
                baseline=Curve.from_points(
                    [(p.concurrency, p.tokens_per_second) for p in measured.baseline], "curves.baseline"
                ),
                accept_length=switching.calibrated_accept_length,
            )
        except CurveError:
            pass
    if switching.crossover_concurrency is not None:
        return model_from_crossover(switching.crossover_concurrency)
    return None

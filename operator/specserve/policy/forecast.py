"""Forecast-ahead restarts: demand history as a prediction, and learning-augmented ski rental (pure, no clock).

A Restart pays a model load. The reactive rule (policy.restart) restarts once the regret of staying covers the
restart cost C: the deterministic ski-rental rule, never more than 2x the offline optimum. Prometheus already holds
the load of the same moment yesterday and last week; read through PromQL `offset`, it predicts whether the other
mode will stay better for long enough to repay a restart.

The rule (Purohit, Svitkina, Kumar, "Improving Online Algorithms via ML Predictions", NeurIPS 2018, deterministic
ski rental): let y be the predicted regret of never switching (the regret so far plus the forecast gain of the
other mode integrated over the horizon, start-up + min dwell) and lambda in [LAMBDA_MIN, 1] the trust. Restart once

    regret >= lambda * C      when y >= C  (the forecast says the other mode stays better long enough: go early)
    regret >= C / lambda      when y <  C  (the forecast says this is a short dip or bump: wait longer)

Bound: whatever the demand does, this pays at most (1 + 1/lambda) times the offline optimum (robustness), and at
most (1 + lambda) times it when the forecast is right (consistency). lambda = 1 is exactly the reactive rule (both
bounds 2). lambda adapts to the forecast's recent error: an exponentially weighted mean of the relative error of
the history's value for *now* against the demand read now (half-life ERROR_HALF_LIFE); lambda falls linearly from
1 at an error of ERROR_NO_TRUST or more to LAMBDA_MIN at no error. So a forecast that keeps being wrong runs the
reactive rule (2x), and the worst single episode after a run of good forecasts costs at most 1 + 1/LAMBDA_MIN = 3x.

Unknown is not zero: without history (a new deployment, retention shorter than a week, the Direct source, a
failed query) there is no forecast, lambda is 1 and the rule is the reactive one; a missing forecast never
causes a switch. The error starts at ERROR_START (no trust) and only earned accuracy lowers it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LAMBDA_MIN = 0.5  # the most trust: consistency 1.5, robustness 3
ERROR_NO_TRUST = 0.5  # relative error at or above which the forecast is not trusted at all (lambda = 1)
ERROR_START = 1.0  # the error before any forecast was scored
ERROR_HALF_LIFE = 3600.0  # seconds: the weight of an error halves every hour
DEMAND_FLOOR = 1.0  # requests: relative errors are taken against at least this (idle is not infinitely wrong)


@dataclass(frozen=True)
class History:
    """The demand Prometheus recorded one day and one week ago (requests in flight); None = not recorded."""

    now_day: float | None = None  # at this moment yesterday
    now_week: float | None = None  # at this moment last week
    ahead_day: float | None = None  # mean over the horizon ahead, yesterday
    ahead_week: float | None = None  # mean over the horizon ahead, last week
    horizon: float = 0.0  # seconds the ahead values cover


@dataclass(frozen=True)
class Forecast:
    """What the history predicts now."""

    now: float  # the demand the history predicted for this moment (scored against the demand read)
    ahead: float  # the mean demand predicted over the horizon
    source: str  # "yesterday" or "last week": the one closer to the demand read now


def _ok(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def forecast(history: History | None, demand: float) -> Forecast | None:
    """The forecast from whichever of yesterday and last week matches the demand read now more closely (a
    weekend follows last week's weekend, not Friday); None when neither has both its values."""
    if history is None:
        return None
    candidates = []
    for source, now, ahead in (
        ("yesterday", history.now_day, history.ahead_day),
        ("last week", history.now_week, history.ahead_week),
    ):
        now_v, ahead_v = _ok(now), _ok(ahead)
        if now_v is not None and ahead_v is not None:
            candidates.append((abs(now_v - demand), Forecast(now_v, ahead_v, source)))
    if not candidates:
        return None
    return min(candidates, key=lambda c: c[0])[1]


def relative_error(predicted: float, observed: float) -> float:
    """|predicted - observed| relative to the larger of the two (and DEMAND_FLOOR): in [0, 1]."""
    return min(1.0, abs(predicted - observed) / max(predicted, observed, DEMAND_FLOOR))


def update_error(error: float | None, predicted: float | None, observed: float, dt: float) -> float | None:
    """The recent error after one more reading `dt` seconds after the last: an exponentially weighted mean. No
    prediction: the error is held (None stays None: nothing was ever scored)."""
    if predicted is None:
        return error
    previous = ERROR_START if error is None else error
    weight = 1.0 - math.pow(0.5, max(dt, 0.0) / ERROR_HALF_LIFE)
    return previous + weight * (relative_error(predicted, observed) - previous)


def trust(error: float | None) -> float:
    """lambda from the recent error: 1 (the reactive rule) without a scored forecast or at ERROR_NO_TRUST or
    more, LAMBDA_MIN with no error, linear in between."""
    if error is None or not math.isfinite(error):
        return 1.0
    share = min(max(error / ERROR_NO_TRUST, 0.0), 1.0)
    return LAMBDA_MIN + (1.0 - LAMBDA_MIN) * share


def threshold(cost: float, predicted_regret: float | None, lam: float) -> float:
    """The regret at which to restart (module docstring). No prediction: the cost (the reactive rule)."""
    lam = min(max(lam, LAMBDA_MIN), 1.0)
    if predicted_regret is None:
        return cost
    return lam * cost if predicted_regret >= cost else cost / lam


def robustness(lam: float) -> float:
    """The worst-case factor over the offline optimum at trust lambda, whatever the forecast."""
    return 1.0 + 1.0 / lam


def consistency(lam: float) -> float:
    """The factor over the offline optimum at trust lambda when the forecast is right."""
    return 1.0 + lam

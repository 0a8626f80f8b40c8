"""Forecast-ahead restarts: the learning-augmented ski-rental bound (consistency and robustness), the trust earned
from the forecast's recent error, and the reactive rule whenever there is no history."""

from __future__ import annotations

import itertools

import pytest

from specserve.policy.forecast import (
    ERROR_HALF_LIFE,
    LAMBDA_MIN,
    History,
    consistency,
    forecast,
    relative_error,
    robustness,
    threshold,
    trust,
    update_error,
)

COST = 100.0
LAMBDAS = [LAMBDA_MIN, 0.6, 0.75, 0.9, 1.0]
# seasons (the regret of never switching) around and far from the cost, incl. the adversary's best points
SEASONS = [0.0, 1.0, 10.0, 49.9, 50.0, 50.1, 75.0, 99.9, 100.0, 100.1, 150.0, 199.9, 200.0, 200.1, 400.0, 1e4]


def ski_cost(season: float, bar: float) -> float:
    """Continuous ski rental: rent (regret) until it reaches `bar`, then buy (the restart)."""
    return season if season < bar else bar + COST


def optimum(season: float) -> float:
    return min(season, COST)


@pytest.mark.parametrize("lam", LAMBDAS)
def test_any_prediction_stays_within_the_robustness_bound(lam: float) -> None:
    for predicted, season in itertools.product([*SEASONS, None], SEASONS):
        if season == 0:
            continue
        cost = ski_cost(season, threshold(COST, predicted, lam))
        assert cost <= robustness(lam) * optimum(season) + 1e-9, (predicted, season)


@pytest.mark.parametrize("lam", LAMBDAS)
def test_a_right_prediction_stays_within_the_consistency_bound(lam: float) -> None:
    for season in SEASONS[1:]:
        cost = ski_cost(season, threshold(COST, season, lam))
        assert cost <= consistency(lam) * optimum(season) + 1e-9, season


def test_the_bound_is_tight_for_a_wrong_long_forecast() -> None:
    # the adversary: the forecast promises a long season, it ends just after the early restart
    lam = LAMBDA_MIN
    season = lam * COST
    cost = ski_cost(season, threshold(COST, 10 * COST, lam))
    assert cost / optimum(season) == pytest.approx(robustness(lam))  # 3x at the most trust
    assert robustness(LAMBDA_MIN) == 3.0 and consistency(LAMBDA_MIN) == 1.5


def test_no_prediction_is_the_reactive_rule() -> None:
    assert threshold(COST, None, LAMBDA_MIN) == COST
    assert threshold(COST, 10 * COST, 1.0) == COST == threshold(COST, 0.0, 1.0)
    assert max(ski_cost(s, COST) / optimum(s) for s in SEASONS[1:]) <= 2.0


def test_a_right_forecast_beats_the_reactive_rule_on_long_and_short_seasons() -> None:
    lam = LAMBDA_MIN
    long_season, short_season = 10 * COST, 1.5 * COST
    assert ski_cost(long_season, threshold(COST, long_season, lam)) < ski_cost(long_season, COST)
    assert ski_cost(short_season, threshold(COST, short_season, lam)) <= ski_cost(short_season, COST)
    # a season just over the cost, forecast short (not repaying within the horizon): wait it out
    assert ski_cost(1.5 * COST, threshold(COST, 0.5 * COST, lam)) < ski_cost(1.5 * COST, COST)


def test_trust_is_bounded_and_falls_with_the_error() -> None:
    assert trust(None) == 1.0
    assert trust(0.0) == LAMBDA_MIN
    assert trust(0.5) == trust(0.9) == 1.0
    assert LAMBDA_MIN < trust(0.1) < trust(0.3) < 1.0
    assert trust(float("nan")) == 1.0
    assert threshold(COST, 10 * COST, 0.01) == LAMBDA_MIN * COST  # never more trust than LAMBDA_MIN


def test_the_error_is_earned_over_hours_and_unscored_readings_hold_it() -> None:
    error = update_error(None, 10.0, 10.0, 0.0)
    assert error == 1.0  # the first reading weighs nothing: no trust yet
    for _ in range(4 * 60):  # four hours of right forecasts, a reading a minute
        error = update_error(error, 10.0, 10.0, 60.0)
    assert error == pytest.approx(0.5**4, rel=1e-6)
    assert update_error(error, None, 10.0, 60.0) == error
    assert update_error(None, None, 10.0, 60.0) is None
    wrong = update_error(0.0, 30.0, 10.0, ERROR_HALF_LIFE)
    assert wrong == pytest.approx(0.5 * relative_error(30.0, 10.0))


def test_relative_error_is_bounded_and_idle_is_not_infinitely_wrong() -> None:
    assert relative_error(0.0, 0.0) == 0.0
    assert relative_error(0.5, 0.0) == 0.5  # against the floor of one request
    assert relative_error(100.0, 0.0) == 1.0
    assert relative_error(12.0, 10.0) == pytest.approx(2 / 12)


def test_the_forecast_follows_the_history_that_matches_now() -> None:
    # a Saturday: yesterday (Friday) was busy, last Saturday was quiet like today
    h = History(now_day=80.0, now_week=11.0, ahead_day=90.0, ahead_week=9.0, horizon=1200.0)
    f = forecast(h, 10.0)
    assert f is not None and (f.source, f.ahead, f.now) == ("last week", 9.0, 11.0)
    assert forecast(History(now_day=80.0, ahead_day=90.0), 10.0) is not None
    # a half history (retention shorter than a week, a value missing or NaN) is no forecast from that source
    assert forecast(History(now_day=80.0, ahead_week=9.0), 10.0) is None
    assert forecast(History(now_day=float("nan"), ahead_day=3.0), 10.0) is None
    assert forecast(History(), 10.0) is None
    assert forecast(None, 10.0) is None

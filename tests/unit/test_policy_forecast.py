"""Forecast-ahead restarts: the learning-augmented ski-rental bound (consistency and robustness), the trust earned
from the forecast's recent error, and the reactive rule whenever there is no history."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import pytest

from specserve.policy.forecast import (
    ERROR_HALF_LIFE,
    LAMBDA_MIN,
    TREND_REACH_SECONDS,
    History,
    Ledger,
    Trend,
    account,
    clipped,
    consistency,
    follow,
    forecast,
    on_restart,
    projected,
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


def rent_seasons(
    seasons: Sequence[tuple[float, float | None, float]], step: float = 0.5
) -> list[tuple[float, float, float]]:
    """Ski rental with the 2x ledger (Ledger, account, on_restart), season after season: each (L, predicted, lam)
    runs the regret up by `step` per reading until the clipped threshold (then the restart, and staying's regret
    carried on to L) or to L (then the season ends). Returns (ALG, OPT, overshoot) per season and checks the bank
    never goes negative."""
    ledger, out = Ledger(), []
    for season, predicted, lam in seasons:
        regret, paid, bought = 0.0, None, 0.0
        while regret < season:
            regret = min(season, regret + step)
            bar = clipped(COST, threshold(COST, predicted, lam), ledger.bank)
            if regret >= bar:
                bought = max(bar, min(regret, COST))
                ledger = on_restart(account(ledger, regret, COST, 0.0, step), bar, regret, COST)
                paid = regret + COST
                break
            ledger = account(ledger, regret, COST, 0.0, 1.0)
        if paid is not None:  # staying's regret runs on to L, then the season ends (it falls back to 0)
            ledger = account(ledger, 0.0, COST, season - regret, 1.0)
            ledger = account(ledger, 0.0, COST, -2 * season, 1.0)
        else:
            ledger = account(ledger, 0.0, COST, 0.0, 1.0)  # the regret falls back: the season is over
        assert ledger.bank >= -1e-9 and ledger.rental is None
        out.append((paid if paid is not None else season, optimum(season), regret - bought if paid else 0.0))
    return out


def test_the_ledger_keeps_every_run_within_2x_of_the_optimum_whatever_the_forecast() -> None:
    """The theorem (policy.forecast): sum ALG <= 2 sum OPT + overshoots at every prefix, and each season within
    1 + 1/lambda; the adversary mixes right and wrong forecasts, short and long seasons, full and no trust."""
    rng = random.Random(7)
    for _ in range(40):
        seasons = []
        for _ in range(60):
            season = rng.choice([rng.uniform(1, 2 * COST), rng.uniform(0.4, 0.6) * COST, rng.uniform(2, 20) * COST])
            predicted = rng.choice([season, 0.0, 10 * COST, rng.uniform(0, 3 * COST), None])
            seasons.append((season, predicted, rng.choice(LAMBDAS)))
        alg = opt = over = 0.0
        for (paid, best, overshoot), (_, _, lam) in zip(rent_seasons(seasons), seasons, strict=True):
            alg, opt, over = alg + paid, opt + best, over + overshoot
            assert alg <= 2 * opt + over + 1e-6
            assert paid <= robustness(lam) * best + overshoot + 1e-6


def test_the_worst_adversary_for_the_plain_rule_costs_2x_at_most_with_the_ledger() -> None:
    """The plain rule at full trust pays 3x on every season that ends just after its early restart; with the ledger
    and nothing banked it restarts at C, 2x."""
    seasons = [(LAMBDA_MIN * COST, 10 * COST, LAMBDA_MIN)] * 20
    plain = sum(ski_cost(s, threshold(COST, p, lam)) for s, p, lam in seasons) / sum(optimum(s) for s, _, _ in seasons)
    assert plain == pytest.approx(robustness(LAMBDA_MIN))
    done = rent_seasons(seasons)
    assert sum(a for a, _, _ in done) <= 2 * sum(b for _, b, _ in done) + 1e-6


def test_right_forecasts_bank_the_slack_and_approach_the_consistency_bound() -> None:
    """Long seasons with right forecasts at full trust, each after a short one (noise around the crossover: its
    rent is slack against 2x): the first restart is at C less that slack, each confirmed early restart banks what
    it saved, and the run's ratio falls well below the reactive rule's 2. Without any short season nothing is
    ever banked: the rule stays the reactive one (the price of a 2x bound with no additive constant)."""
    seasons = [(0.2 * COST, 0.2 * COST, LAMBDA_MIN), (5 * COST, 5 * COST, LAMBDA_MIN)] * 15
    done = rent_seasons(seasons)
    long = [a / b for (a, b, _), (s, _, _) in zip(done, seasons, strict=True) if s > COST]
    assert long[0] == pytest.approx(1.8 + 0.005, abs=0.01)  # 0.2 C banked: restarted at 0.8 C
    assert long[-1] <= consistency(LAMBDA_MIN) + 0.01  # full trust reached after a few
    assert sum(a for a, _, _ in done) / sum(b for _, b, _ in done) < 1.6
    only_long = rent_seasons([(5 * COST, 5 * COST, LAMBDA_MIN)] * 10)
    assert all(a == pytest.approx(2 * COST, abs=1.0) for a, _, _ in only_long)


def test_the_trend_follows_a_steady_rise_and_projects_it_within_its_reach() -> None:
    """A demand rising 1 request per minute, read every 15 s, with its level noisy by +-2: after two hours the
    slope is within 10 % of the truth. The projection follows it at most TREND_REACH_SECONDS ahead and never below
    zero; without a reading there is no trend (the reading itself)."""
    assert projected(Trend(), 7.0, 600.0) == 7.0
    trend = Trend()
    for i in range(480):
        t = i * 15.0
        trend = follow(trend, 10.0 + t / 60.0 + (2.0 if i % 2 else -2.0), t)
    assert trend.slope == pytest.approx(1 / 60, rel=0.1)
    assert follow(trend, 1.0, trend.at) == trend  # a reading at the same moment changes nothing
    assert projected(trend, 100.0, 600.0) == pytest.approx(100.0 + 600.0 * trend.slope)
    assert projected(trend, 100.0, 10 * TREND_REACH_SECONDS) == projected(trend, 100.0, TREND_REACH_SECONDS)
    assert projected(Trend(level=5.0, slope=-1.0, at=0.0), 5.0, 600.0) == 0.0

"""Restart as ski rental, episode by episode (simulate.episodes), on the shipped weeks: the forecast-ahead rule pays
less than the reactive one where the history tells the truth (`week`), and where it lies (`week-adversarial`:
each day the opposite of yesterday) it earns no trust and stays the reactive rule, within 2x of the offline
optimum per episode up to one evaluation interval's regret (policy.forecast)."""

from __future__ import annotations

from functools import cache

from specserve.api.models import Mode, Strategy
from specserve.api.validation import parse_object
from specserve.policy.forecast import LAMBDA_MIN, robustness
from specserve.policy.restart import EARLY, pool_rate, switch_cost
from specserve_tools.emulator.profile import load_profile
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.episodes import Episode, episodes
from specserve_tools.simulate.scenario import DEFAULT_SPEC, Scenario, scenario, with_strategy
from specserve_tools.simulate.synthetic import shipped_trace
from tests.unit.policy_helpers import ILLUSTRATIVE, knobs, profile_curves

PROFILE = "illustrative-crossover-8b"


@cache
def _scenario() -> Scenario:
    obj = with_strategy(parse_object(DEFAULT_SPEC), Strategy.RESTART)
    return scenario(obj, load_profile(PROFILE), Slo(5.0, 0.1))


def demands(trace: str) -> list[float]:
    """The trace's clients at each evaluation (a closed loop: requests in flight = clients)."""
    t = shipped_trace(trace, 1)
    dt = _scenario().knobs.evaluation_interval
    out, j = [], 0
    for i in range(int(t.duration / dt)):
        while j + 1 < len(t.steps) and t.steps[j + 1][0] <= i * dt:
            j += 1
        out.append(t.steps[j][1])
    return out


@cache
def ran(trace: str, forecast: bool, regimes: bool = True) -> tuple[Episode, ...]:
    """`regimes` False: the demand's own regimes forgotten, so without `forecast` the reactive rule exactly."""
    s = _scenario()
    horizon = s.setup.forecast_horizon if forecast else None
    assert s.curves is not None and horizon != 0
    return tuple(episodes(s.knobs, s.curves, demands(trace), s.setup.initial_mode, horizon, regimes))


def paid(eps: tuple[Episode, ...]) -> float:
    return sum(e.paid for e in eps)


def overshoot(trace: str) -> float:
    """The most one evaluation interval's regret can add past the threshold, relative to the restart cost there:
    the discrete rule's excess over the continuous bound."""
    s = _scenario()
    k, curves = s.knobs, s.curves
    assert curves is not None
    worst = 0.0
    for d in set(demands(trace)):
        gap = abs(pool_rate(curves, Mode.SPECULATIVE, d, 1) - pool_rate(curves, Mode.BASELINE, d, 1))
        cost = min(switch_cost(curves, m, d, 1, k.startup_seconds, 0) for m in Mode)
        worst = max(worst, gap * k.evaluation_interval / cost)
    return worst


def test_premise_the_week_has_a_restart_into_each_mode_every_day() -> None:
    for trace in ("week", "week-adversarial"):
        assert sum(e.restart is not None for e in ran(trace, False)) >= 14, trace


def test_where_the_history_tells_the_truth_the_forecast_pays_less_than_the_reactive_rule() -> None:
    reactive, forecast = paid(ran("week", False, False)), paid(ran("week", True))
    assert forecast < 0.92 * reactive  # measured: 16% less (the first day has no history, Saturday follows Friday)
    early = [e for e in ran("week", True) if e.restart is not None and e.ratio < 1.9]
    assert len(early) >= 8  # the weekdays after the first: restarted early, near 1 + lambda


def test_where_the_history_lies_the_rule_earns_no_trust_and_stays_within_2x_per_episode() -> None:
    reactive, forecast = ran("week-adversarial", False, False), ran("week-adversarial", True)
    bound = 2.0 + overshoot("week-adversarial")
    assert max(e.ratio for e in forecast) <= bound
    assert max(e.ratio for e in forecast) < robustness(LAMBDA_MIN)
    assert paid(forecast) <= paid(reactive) * 1.01  # no worse than ignoring the history (measured -3.6%)


def test_a_lie_after_days_of_truth_costs_one_episode_within_1_plus_1_over_lambda_and_the_run_stays_within_2x() -> None:
    """Monday to Thursday as usual (trust earned, slack banked), then a day peaking at 03:30 instead of 15:30: the
    trusted forecast restarts early into a season that ends, one episode beyond 2x but within 1 + 1/lambda, and
    the ledger keeps the run as a whole within 2x (policy.forecast)."""
    s = _scenario()
    assert s.curves is not None and s.setup.forecast_horizon is not None
    per_day = round(86400 / s.knobs.evaluation_interval)
    lie = demands("week")[: 4 * per_day] + demands("week-adversarial")[per_day : 2 * per_day]
    eps = episodes(s.knobs, s.curves, lie, s.setup.initial_mode, s.setup.forecast_horizon)
    first_lie = min((e for e in eps if e.start >= 4 * 86400), key=lambda e: e.start)
    assert 2.0 < first_lie.ratio <= robustness(LAMBDA_MIN) + overshoot("week")  # measured 2.44
    reactive = episodes(s.knobs, s.curves, lie, s.setup.initial_mode, None, regimes=False)
    assert paid(tuple(eps)) / sum(e.optimum for e in eps) < 2.0  # measured 1.75 (reactive 2.00)
    assert paid(tuple(eps)) < paid(tuple(reactive))


def test_without_a_history_the_demands_own_regimes_pay_less_than_the_reactive_rule_within_the_proven_5x() -> None:
    """The regimes' early (EARLY x C) and late (WAIT x C) thresholds (policy.restart.regime_ahead) give up the
    reactive rule's 2x for 1 + 1/EARLY = 5x per episode (policy.restart's docstring: the proof); on the shipped
    weeks, whose regimes outlast the roll, they pay far less than the reactive rule."""
    for trace in ("week", "week-adversarial"):
        own, reactive = ran(trace, False), ran(trace, False, False)
        assert paid(own) < 1.4 * sum(e.optimum for e in own), trace  # measured 1.25 and 1.31
        assert paid(own) < 0.7 * paid(reactive), trace  # measured 0.64 and 0.66
        assert max(e.ratio for e in own) <= robustness(EARLY) + overshoot(trace), trace  # measured 1.28 and 1.98


def test_a_worst_case_built_against_the_regimes_reaches_near_the_proven_5x() -> None:
    """Built against the rule (illustrative curves, one replica, a 60 s roll): a first baseline bump, a regime that
    no past one says is short, is bought early, at EARLY x the cost, and ends right after (195 s). That episode
    costs near 1 + 1/EARLY = 5x its optimum (measured 4.90x: min(L, C) is the regret at the restart plus one
    interval's), the proven bound up to one evaluation interval's overshoot; the run as a whole is past 2x too
    (measured 3.00x), where the reactive rule stays within 2x per episode. The price of the early purchase, named in
    docs/switching.md. (Until issue 29's fifth round the construction was a third bump after two of 300 s, which the
    past ones said outlasted the roll: 4.55x. Now a regime must repay the roll over its expected remainder to be
    bought early, and the 300 s bumps' small advantage does not: that bump waits for WAIT x the cost.)"""
    curves = profile_curves(ILLUSTRATIVE)
    k = knobs(Strategy.RESTART)
    d = [10.0] * 8 + [100.0] * 13 + [10.0] * 60
    eps = episodes(k, curves, d, Mode.SPECULATIVE, None)
    worst = max(e.ratio for e in eps)
    assert 4.0 < worst <= robustness(EARLY) + 0.1  # one 15 s interval's overshoot: measured 4.90
    assert 2.0 < paid(tuple(eps)) / sum(e.optimum for e in eps) < robustness(EARLY)  # measured 3.00
    reactive = episodes(k, curves, d, Mode.SPECULATIVE, None, regimes=False)
    assert max(e.ratio for e in reactive) <= 2.05  # the reactive rule: 2x per episode

"""The Restart policy with a demand history, end to end through decide(): constructed quiet periods where the
forecast is right (it beats the reactive rule, within 1 + lambda of the optimum) and wrong (within 1 + 1/lambda;
within 2x once its error has cost it the trust), the reactive rule without history, the seed profile, and a fluid
multi-day trace whose history is its own yesterday."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from specserve.api.models import Mode, Rule, Strategy
from specserve.policy.forecast import LAMBDA_MIN, History, Ledger, Regimes, consistency, robustness, trust
from specserve.policy.restart import ahead, switch_cost
from specserve.policy.switching import decide, initial_state
from specserve.policy.types import Action, Knobs, PolicyState, Verdict
from tests.unit.policy_helpers import ILLUSTRATIVE, SEED, knobs, profile_curves, sample

CURVES = profile_curves(ILLUSTRATIVE)  # speculation wins below 64 per replica
DT = 15.0
QUIET = 10.0  # demand of the quiet period: speculation serves more
BUSY = 150.0
HORIZON = 600.0
K = knobs(Strategy.RESTART, evaluation_interval=DT, startup_seconds=60.0)
GAIN = CURVES.rate(Mode.SPECULATIVE, QUIET) - CURVES.rate(Mode.BASELINE, QUIET)  # tok/s the quiet period offers
COST = switch_cost(CURVES, Mode.BASELINE, QUIET, 1, K.startup_seconds, 0)


def start(error: float | None, bank: float | None = None) -> PolicyState:
    """Baseline, serving the busy hours, the forecast's recent error `error`; the clock ticking; `bank`: the slack
    banked against 2x (policy.forecast.Ledger), by default enough for any threshold (C: the per-episode bounds)."""
    ledger = Ledger(bank=COST if bank is None else bank)
    return PolicyState(
        mode=Mode.BASELINE, mode_since=-1e6, last_evaluation=-DT, forecast_error=error, forecast_ledger=ledger
    )


def quiet(seconds: float, state: PolicyState, history: History | None, k: Knobs = K) -> tuple[float, list[Verdict]]:
    """One quiet period of `seconds` at QUIET (the trace ends with it): the policy's cost as ski rental, the regret
    it ran up before restarting plus the restart; and its verdicts."""
    verdicts = []
    for i in range(math.ceil(seconds / DT)):
        v = decide(k, CURVES, state, sample(i * DT, QUIET, ready_base=None, history=history))
        verdicts.append(v)
        if v.action is Action.RESTART:
            return GAIN * DT * (i + 1) + COST, verdicts
        state = v.state
    return GAIN * math.ceil(seconds / DT) * DT, verdicts


def optimum(seconds: float) -> float:
    return min(GAIN * math.ceil(seconds / DT) * DT, COST)


STAYS = History(now_day=QUIET, ahead_day=QUIET, horizon=HORIZON)  # yesterday stayed quiet
ENDS = History(now_day=QUIET, ahead_day=BUSY, horizon=HORIZON)  # yesterday got busy again
LONG = 20 * COST / GAIN  # seconds of quiet: a restart pays off many times over


def test_premise_the_quiet_period_favours_speculation_and_the_horizon_repays_a_restart() -> None:
    assert GAIN > 0 and COST > 0 and GAIN * HORIZON > COST


def test_a_right_forecast_of_a_long_quiet_restarts_early_and_beats_the_reactive_rule() -> None:
    trusted, verdicts = quiet(LONG, start(0.0), STAYS)
    reactive, _ = quiet(LONG, start(0.0), None)
    assert trusted < reactive
    assert trusted <= consistency(LAMBDA_MIN) * optimum(LONG) + GAIN * DT  # within one evaluation's rent
    assert reactive / optimum(LONG) > 1.9  # the reactive rule pays about twice
    restart = verdicts[-1]
    assert restart.mode is Mode.SPECULATIVE
    assert "forecast (yesterday)" in restart.reason and "trust lambda 0.50" in restart.reason


def test_a_right_forecast_of_a_short_quiet_waits_it_out() -> None:
    seconds = 1.5 * COST / GAIN  # the reactive rule restarts at 1.0, then the quiet ends
    trusted, verdicts = quiet(seconds, start(0.0), ENDS)
    reactive, _ = quiet(seconds, start(0.0), None)
    assert all(v.action is Action.HOLD for v in verdicts)
    assert trusted < reactive
    assert "does not repay" in verdicts[-1].reason


@pytest.mark.parametrize("share", [0.2, 0.3, 0.5, 0.55, 0.75, 1.0, 1.5, 2.0, 3.0])
def test_a_wrong_forecast_stays_within_the_robustness_bound(share: float) -> None:
    """The adversary: the history promises the quiet lasts (or ends), the quiet ends just after the early restart
    (or lasts past the late one)."""
    seconds = share * COST / GAIN
    for history in (STAYS, ENDS):
        cost, _ = quiet(seconds, start(0.0), history)
        assert cost <= robustness(LAMBDA_MIN) * optimum(seconds) + 2 * GAIN * DT, (share, history)


@pytest.mark.parametrize("share", [0.5, 0.75, 1.0, 1.01, 1.5, 2.0, 3.0])
def test_a_forecast_that_keeps_being_wrong_gets_no_trust_and_stays_within_2x(share: float) -> None:
    """The history's value for now is far off what is read (error 75%): lambda stays 1, the reactive rule's 2x."""
    wrong = History(now_day=4 * QUIET, ahead_day=QUIET, horizon=HORIZON)
    seconds = share * COST / GAIN
    for error in (None, 0.75):
        cost, verdicts = quiet(seconds, start(error), wrong)
        assert cost <= 2 * optimum(seconds) + GAIN * DT
        assert all(trust(v.state.forecast_error) == 1.0 for v in verdicts)


def test_with_nothing_banked_a_trusted_forecast_cannot_move_the_threshold() -> None:
    """The 2x ledger: from an empty bank (a new deployment, an operator restart) the rule is the reactive one, so
    a lying history cannot cost more than 2x; it restarts earlier only once the bank holds the room."""
    _, reactive = quiet(LONG, start(0.0, bank=0.0), None)
    for history in (STAYS, ENDS):
        _, verdicts = quiet(LONG, start(0.0, bank=0.0), history)
        assert len(verdicts) == len(reactive), history
    half, verdicts = quiet(LONG, start(0.0, bank=COST / 4), STAYS)
    assert len(verdicts) < len(reactive)
    assert half <= GAIN * DT * len(verdicts) + COST
    assert "held to" in verdicts[-1].reason


def test_without_history_the_rule_is_the_reactive_one_and_never_switches_earlier() -> None:
    seconds = 5 * COST / GAIN
    _, reactive = quiet(seconds, start(0.0), None)
    for missing in (History(), History(now_week=QUIET, horizon=HORIZON), History(now_day=math.nan, ahead_day=1.0)):
        _, verdicts = quiet(seconds, start(0.0), missing)
        assert [v.action for v in verdicts] == [v.action for v in reactive]
        assert "no demand history" in verdicts[0].reason
        assert all(v.state.forecast_error == 0.0 for v in verdicts)  # unscored: the error is held


def test_the_seed_profile_never_restarts_into_speculation_whatever_the_forecast() -> None:
    seed = profile_curves(SEED)
    state = PolicyState(mode=Mode.BASELINE, mode_since=-1e6, forecast_error=0.0)
    history = History(now_day=2.0, ahead_day=2.0, now_week=2.0, ahead_week=2.0, horizon=HORIZON)
    for i in range(2000):
        d = [2.0, 20.0, 200.0][i % 3]
        v = decide(K, seed, state, sample(i * DT, d, ready_base=None, history=history))
        assert v.action is Action.HOLD
        state = v.state


def diurnal(days: int, peak: float, dt: float, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    out = []
    for i in range(int(days * 86400 / dt)):
        phase = (i * dt % 86400) / 86400
        level = 4 + (peak - 4) * (0.5 - 0.5 * math.cos(2 * math.pi * phase)) ** 2
        out.append(max(0.0, level * (1 + 0.1 * rng.gauss(0, 1))))
    return out


def served(demands: list[float], with_history: bool, dt: float = 60.0, forget: bool = False) -> float:
    """Tokens one replica serves on the fluid model (nothing while it restarts), the history being the trace's own
    yesterday (a perfect daily cycle under 10% noise). `forget`: the demand's own regimes are forgotten at every
    reading (their start unknown, as after an operator restart), so without history the rule is the reactive one."""
    k = replace(K, evaluation_interval=dt, startup_seconds=510.0, min_dwell=300.0)  # the seed hardware's load
    horizon = k.startup_seconds + k.min_dwell
    per_day, steps = int(86400 / dt), int(horizon / dt)
    state, total, down = initial_state(k, Mode.SPECULATIVE, 0.0), 0.0, -1.0
    for i, d in enumerate(demands):
        t, history = i * dt, None
        if with_history and i >= per_day:
            ahead = demands[i - per_day : i - per_day + steps]
            history = History(now_day=demands[i - per_day], ahead_day=sum(ahead) / len(ahead), horizon=horizon)
        v = decide(k, CURVES, state, sample(t, d, ready_base=None, history=history), converging=t < down)
        if v.action is Action.RESTART:
            down = t + k.startup_seconds
        state = replace(v.state, regimes=Regimes()) if forget else v.state
        total += CURVES.rate(state.mode, d) * (dt - max(0.0, min(dt, down - t)))
    return total


def test_on_a_daily_cycle_the_forecast_captures_more_of_the_gain_than_the_reactive_rule() -> None:
    demands = diurnal(3, 200.0, 60.0)
    static = max(sum(CURVES.rate(m, d) for d in demands) * 60.0 for m in Mode)
    reactive = served(demands, False, forget=True)
    forecast = served(demands, True, forget=True)
    assert forecast > reactive > static
    # measured: 1.1% more of the hindsight gain than the reactive rule (1.7% before rolls were priced at the demand
    # they may run into, which both rules pay; 3.2% before the 2x ledger: from an empty bank the first early
    # restarts are held back until short seasons and confirmed restarts have banked the slack)
    assert (forecast - static) / (reactive - static) > 1.005
    # the demand's own regimes (no history; issue 29) do better still on this cycle: its regimes outlast the roll
    # (measured 769.8 M tokens against the day/week forecast's 766.4 M; the forecast path is clipped to the 2x
    # ledger, the regimes' is not)
    assert served(demands, False) > served(demands, True) > reactive


def test_trust_is_earned_over_readings_not_over_a_gap_in_them() -> None:
    """An operator down for five hours resumes: its first reading, however right, weighs two intervals."""
    state = replace(start(1.0), last_evaluation=0.0)
    v = decide(K, CURVES, state, sample(5 * 3600.0, QUIET, ready_base=None, history=STAYS))
    assert v.state.forecast_error is not None and v.state.forecast_error > 0.99
    assert trust(v.state.forecast_error) == 1.0


def test_a_restart_names_its_rule() -> None:
    """Ski rental when the regret paid for staying exceeds the restart; a dominant mode restarts at once."""
    _, verdicts = quiet(HORIZON * 4, start(None), None)
    (restart,) = [v for v in verdicts if v.action is Action.RESTART]
    assert restart.rule in (Rule.SKI_RENTAL, Rule.DOMINANT)
    assert restart.rule is (Rule.DOMINANT if "at every measured concurrency" in restart.reason else Rule.SKI_RENTAL)
    assert all(v.rule is Rule.HOLD for v in verdicts if v.action is Action.HOLD)


def test_ahead_says_whether_the_history_forecast_the_demand() -> None:
    """decide_restart lets the demand's own regimes decide exactly when the day/week history forecast nothing:
    `Ahead.predicted` carries that (no second forecast() call), for a missing history, one without both values of
    a day or week, and one that forecasts."""
    state = start(0.0)
    for history, predicted in (
        (None, False),
        (History(), False),
        (History(now_week=QUIET, horizon=HORIZON), False),
        (History(now_day=math.nan, ahead_day=1.0), False),
        (STAYS, True),
        (ENDS, True),
    ):
        fore = ahead(K, CURVES, state, (QUIET, 0.0, 0.0), COST, history)
        assert fore.predicted is predicted
        assert (fore.why.startswith("forecast (")) is predicted

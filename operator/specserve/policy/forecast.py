"""Forecast-ahead restarts: demand history as a prediction, and learning-augmented ski rental (pure, no clock).

A Restart pays a model load. The reactive rule (policy.restart) restarts once the regret of staying covers the
restart cost C: the deterministic ski-rental rule, never more than 2x the offline optimum. Prometheus already holds
the load of the same moment yesterday and last week; read through PromQL `offset`, it predicts whether the other
mode will stay better for long enough to repay a restart.

The rule (Purohit, Svitkina, Kumar, "Improving Online Algorithms via ML Predictions", NeurIPS 2018, deterministic
ski rental, Algorithm 2 and Theorem 2.2): let y be the predicted regret of never switching (the regret so far plus
the forecast gain of the other mode integrated over the horizon, start-up + min dwell) and lambda in [LAMBDA_MIN, 1]
the trust. Restart once

    regret >= lambda * C      when y >= C  (the forecast says the other mode stays better long enough: go early)
    regret >= C / lambda      when y <  C  (the forecast says this is a short dip or bump: wait longer)

Per episode (a season in which the other mode is better; ALG the rule's cost, the regret it ran up plus C; OPT the
offline optimum's, min(L, C) with L the regret of staying all season): ALG <= (1 + 1/lambda) OPT whatever the
forecast (robustness) and ALG <= (1 + lambda) OPT when it is right (consistency). lambda = 1 is exactly the
reactive rule (both 2). No deterministic rule does better on both at once: Wei and Zhang ("Optimal
Robustness-Consistency Trade-offs for Learning-Augmented Online Algorithms", NeurIPS 2020) show that
(1 + lambda, 1 + 1/lambda) is the Pareto front. So a per-episode worst case of 2x leaves nothing for the forecast
to gain (lambda = 1), and a floor of LAMBDA_MIN = 0.5 gives 3x.

The trade: 2x over every run, 1 + 1/lambda per episode. A ledger (`Ledger`) banks the slack the rule has proven
against the 2x bound, B = sum over settled episodes of (2 OPT - ALG), and the threshold may move away from C only
by what is banked: it is clipped to [C - B, C + B] (`clipped`). The worst case of restarting at regret b (the
season ends right then: OPT = min(b, C)) exceeds 2 OPT by |C - b|, which is debited at the restart; once the
season is known (the regret of staying, carried on after the restart, reaches C: OPT = C; or falls back to 0)
the episode is settled: the debit comes back and the true slack 2 OPT - ALG (>= -debit) is added. A season that
ends without a restart adds 2 min(L, C) - L (= L below C; >= 0 as long as the threshold is <= 2C, which
LAMBDA_MIN = 0.5 guarantees).

Theorem. From the ledger's start (B = 0: a new deployment, an operator restart), at every moment

    sum of ALG over the episodes so far  <=  2 * sum of OPT  +  sum of overshoots  -  B,   B >= 0,

where an episode's overshoot is the regret run up past max(threshold, min(regret, C)) before the restart
happened: at most one evaluation interval's regret, or what min dwell, the restart budget or a bar held it back,
exactly as the reactive rule's own. Proof: by induction over evaluations. B starts at 0. A restart at regret b
within [C - B, C + B] debits |C - b| <= B, so B stays >= 0, and its excess over 2 OPT is at most |C - b| whatever
follows; settling replaces that debit by the true excess (<= the debit, so B never falls); a season without a
restart has ALG = L <= 2 min(L, C) (L <= threshold <= 2C) and adds its slack. Summing the per-episode identities
ALG_e - 2 OPT_e = -(its contribution to B) + overshoot_e gives the bound. Each single episode stays within
1 + 1/lambda (the clipped threshold lies between lambda C and C / lambda). So a forecast that is wrong costs at most
what right ones (or short seasons) have banked before it: on a trace where the history lies from the start, the
rule is the reactive one, 2x per episode.

lambda adapts to the forecast's recent error: an exponentially weighted mean of the relative error of
the history's value for *now* against the demand read now (half-life ERROR_HALF_LIFE); lambda falls linearly from
1 at an error of ERROR_NO_TRUST or more to LAMBDA_MIN at no error. So a forecast that keeps being wrong runs the
reactive rule (2x), whatever the bank.

The ledger lives in the policy state in memory (not in status): an operator restart starts it again at 0, which
keeps the theorem (it holds from any start) and only forgets earned slack.

Unknown is not zero: without history (a new deployment, retention shorter than a week, the Direct source, a
failed query) there is no forecast, lambda is 1 and the rule is the reactive one; a missing forecast never
causes a switch. The error starts at ERROR_START (no trust) and only earned accuracy lowers it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

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


@dataclass(frozen=True)
class Rental:
    """A restart whose episode is not settled yet: what it paid and the regret staying would have run up since."""

    bought: float  # the regret the restart is accounted at: max(threshold, min(regret, C)) (module docstring)
    cost: float  # C at the restart
    debit: float  # |C - bought|: the worst case's excess over 2 OPT, debited from the bank
    regret: float  # staying's regret, carried on after the restart (a CUSUM, as the policy's)
    peak: float  # its highest value: L so far


@dataclass(frozen=True)
class Ledger:
    """The slack banked against the 2x bound (module docstring); in memory only."""

    bank: float = 0.0  # tokens: sum of (2 OPT - ALG) over settled episodes, less open debits; never < 0
    peak: float = 0.0  # the highest regret of the current season without a restart (0: none under way)
    rental: Rental | None = None


def clipped(cost: float, wanted: float, bank: float) -> float:
    """The threshold the bank allows: `wanted` within [C - B, C + B]."""
    room = max(bank, 0.0)
    return min(max(wanted, cost - room), cost + room)


def settled(bank: float, rental: Rental) -> float:
    """The bank once `rental`'s season is known: its debit back, its true slack 2 min(L, C) - (bought + C) added."""
    return bank + rental.debit + 2.0 * min(rental.peak, rental.cost) - (rental.bought + rental.cost)


def account(ledger: Ledger, regret: float, cost: float, stayed_gain: float, dt: float) -> Ledger:
    """One evaluation without a restart. `regret`: the current mode's after this reading; `cost`: C now;
    `stayed_gain`: tokens/s the current mode serves more than the one the last restart left (the regret staying
    would have run up, per second)."""
    bank, peak = ledger.bank, max(ledger.peak, regret)
    if regret <= 0.0 < ledger.peak:  # a season ended without a restart: ALG = L, OPT = min(L, C)
        # negative only past 2C >= the threshold: a restart held back (dwell, budget, bar), an overshoot
        bank += max(0.0, 2.0 * min(ledger.peak, cost) - ledger.peak)
        peak = 0.0
    rental = ledger.rental
    if rental is not None:
        stayed = max(0.0, rental.regret + stayed_gain * max(dt, 0.0))
        rental = replace(rental, regret=stayed, peak=max(rental.peak, stayed))
        if rental.peak >= rental.cost or stayed <= 0.0:  # OPT known: C, or the season is over
            bank, rental = settled(bank, rental), None
    return Ledger(bank, peak, rental)


def on_restart(ledger: Ledger, threshold: float, regret: float, cost: float) -> Ledger:
    """A restart at `regret` whose threshold was `threshold`: settle the previous rental as it stands, debit this
    one's worst case."""
    bank = settled(ledger.bank, ledger.rental) if ledger.rental is not None else ledger.bank
    bought = max(threshold, min(regret, cost))
    debit = abs(cost - bought)
    rental = Rental(bought, cost, debit, regret, regret)
    if rental.peak >= cost:  # staying's regret already reached C: OPT = C
        return Ledger(settled(bank - debit, rental), 0.0, None)
    return Ledger(bank - debit, 0.0, rental)


# ------------------------------------------------------------------------------------- the demand's own regimes

REGIMES_KEPT = 8  # regimes remembered per deployment (in memory only: an operator restart forgets them)


@dataclass(frozen=True)
class Regimes:
    """The demand's own history, for days without a day/week history (a new deployment, short retention): which
    mode the demand favoured and for how long. A regime changes when the rival mode's advantage, summed since it
    began and floored at zero (a CUSUM, as the regret), reaches `flip` tokens: noise around the crossover trades
    small advantages back and forth and never flips it; the new regime is dated from when that sum left zero.
    In memory only, like the ledger."""

    better: bool | None = None  # speculation is the better mode in the current regime; None: nothing read yet
    since: float | None = None  # when the current regime began; None: before the first reading (unknown)
    rival: float = 0.0  # tokens: the rival mode's summed advantage since `rival_since`, floored at zero
    rival_since: float = 0.0
    lengths: tuple[tuple[bool, float], ...] = ()  # the last REGIMES_KEPT regimes that ended: (better, seconds)


def observe(regimes: Regimes, spec_gain: float, now: float, dt: float, flip: float) -> Regimes:
    """One more reading: speculation serves `spec_gain` tokens/s more than baseline (negative: less), `dt`
    seconds after the last reading."""
    if regimes.better is None:
        return Regimes(better=spec_gain > 0, rival_since=now)
    advantage = -spec_gain if regimes.better else spec_gain  # the rival's, tokens/s
    rival = max(0.0, regimes.rival + advantage * max(dt, 0.0))
    since = regimes.rival_since if regimes.rival > 0.0 else now - max(dt, 0.0)
    if rival <= 0.0:
        return replace(regimes, rival=0.0, rival_since=now)
    if rival < flip:
        return replace(regimes, rival=rival, rival_since=since)
    ended = () if regimes.since is None else ((regimes.better, max(0.0, since - regimes.since)),)
    lengths = (*regimes.lengths, *ended)[-REGIMES_KEPT:]
    return Regimes(better=not regimes.better, since=since, rival=0.0, rival_since=now, lengths=lengths)


def remainder(regimes: Regimes, now: float) -> float | None:
    """How much longer the current regime is expected to last: the mean remainder of the past regimes of the same
    mode that outlasted its age; without one (none ended yet, or it outlasted them all) nothing says it is short:
    infinity. (Lindy's rule, its age, was the fallback before: a young regime then always looked shorter than the
    roll and waited for WAIT x the cost, 15-80 minutes after the crossing on the suite's diurnal days.) None
    (unknown) for a regime that began before the first reading (a new deployment, an operator restart: the memory
    is not in status)."""
    if regimes.better is None or regimes.since is None:
        return None
    age = max(0.0, now - regimes.since)
    longer = [d - age for mode, d in regimes.lengths if mode == regimes.better and d > age]
    return sum(longer) / len(longer) if longer else math.inf


# ---------------------------------------------------------------------------------------------- the demand's trend

TREND_LEVEL_SECONDS = 120.0  # the level follows the readings with this time constant (they are smoothed already)
TREND_SLOPE_SECONDS = 900.0  # the slope follows the level's moves with this one: a burst's edge barely moves it
TREND_REACH_SECONDS = 1800.0  # the trend is followed at most this far ahead; beyond it the demand is held


@dataclass(frozen=True)
class Trend:
    """The demand's level and slope (Holt's linear exponential smoothing, for readings at any spacing): where the
    demand is heading over a roll. In memory only, like the regimes."""

    level: float | None = None  # requests in flight; None: nothing read yet
    slope: float = 0.0  # requests in flight per second
    at: float = 0.0  # the time of the last reading


def follow(trend: Trend, demand: float, now: float) -> Trend:
    """The trend after one more reading."""
    if trend.level is None:
        return Trend(demand, 0.0, now)
    dt = now - trend.at
    if dt <= 0.0:
        return trend
    guess = trend.level + trend.slope * dt
    level = guess + (1.0 - math.exp(-dt / TREND_LEVEL_SECONDS)) * (demand - guess)
    slope = trend.slope + (1.0 - math.exp(-dt / TREND_SLOPE_SECONDS)) * ((level - trend.level) / dt - trend.slope)
    return Trend(level, slope, now)


def projected(trend: Trend, demand: float, ahead: float) -> float:
    """The demand `ahead` seconds from now: the reading moved along the slope (at most TREND_REACH_SECONDS of it),
    never below zero. Without a trend, the reading."""
    if trend.level is None:
        return demand
    return max(0.0, demand + trend.slope * min(max(ahead, 0.0), TREND_REACH_SECONDS))

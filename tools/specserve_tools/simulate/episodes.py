"""Restart as ski rental, episode by episode: the operator's own `decide` replayed on a demand series (the fluid
model: each evaluation sees the true demand), and each rental episode's cost against the offline optimum's.

An episode opens when the other mode becomes better and the regret (policy.restart: the signed, floored sum of
(f_other - f_current) * dt) leaves zero. The rule pays the regret it ran up until it restarts plus the restart's
cost C (policy.restart.switch_cost at that moment); if it never restarts, the regret's peak. The offline optimum of
the episode pays min(L, C), L being the peak the regret would have reached had the pool stayed (the same sum,
carried on past the restart until it falls back to zero, the trace ends or the pool returns). The ratio of the two
is what the ski-rental bounds of policy.forecast speak about: 2 for the reactive rule, 1 + 1/lambda with trust
lambda. The demand history is the series' own: the same time a day and a week back, and the mean over the horizon
that followed, as Prometheus would answer the live loop's queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from specserve.api.models import Action, Mode
from specserve.policy.curves import ModeCurves
from specserve.policy.forecast import History, Regimes
from specserve.policy.restart import other, pool_rate, reach_of, restart_price, roll_seconds
from specserve.policy.switching import decide, initial_state
from specserve.policy.types import Knobs, PoolSignal, Sample

DAY = 86400.0
WEEK = 7 * DAY


@dataclass(frozen=True)
class Episode:
    start: float  # s: when the regret left zero
    restart: float | None  # s: when the rule restarted; None: it never did (the other mode stopped being better)
    paid: float  # tokens: the rule's cost
    optimum: float  # tokens: the offline optimum's, min(L, C)

    @property
    def ratio(self) -> float:
        return self.paid / self.optimum if self.optimum > 0 else 1.0


@dataclass
class _Open:
    start: float
    restart: float | None = None
    paid: float = 0.0
    cost: float = 0.0
    regret: float = 0.0  # the regret had the pool stayed
    peak: float = 0.0


def _history(demands: Sequence[float], prefix: Sequence[float], i: int, dt: float, horizon: float) -> History:
    steps = max(1, round(horizon / dt))

    def back(lookback: float) -> tuple[float | None, float | None]:
        j = i - round(lookback / dt)
        if j < 0:
            return None, None
        end = min(len(demands), j + steps)
        return demands[j], (prefix[end] - prefix[j]) / (end - j)

    now_day, ahead_day = back(DAY)
    now_week, ahead_week = back(WEEK)
    return History(now_day, now_week, ahead_day, ahead_week, horizon)


def episodes(
    knobs: Knobs,
    curves: ModeCurves,
    demands: Sequence[float],
    initial: Mode,
    horizon: float | None,
    regimes: bool = True,
) -> list[Episode]:
    """The rule's episodes on `demands` (one per evaluation interval); `horizon`: the forecast's (None: no history).
    `regimes`: False forgets the demand's own regimes at every evaluation (policy.forecast.Regimes: their start is
    then never seen), so without a history the rule is the reactive one exactly."""
    dt, n = knobs.evaluation_interval, knobs.speculative_replicas
    prefix = [0.0]
    for d in demands:
        prefix.append(prefix[-1] + d)
    state = initial_state(knobs, initial, 0.0)
    out: list[Episode] = []
    current: _Open | None = None  # the episode of the mode the pool is in
    after: _Open | None = None  # an episode past its restart, its counterfactual regret still running
    stayed_in = initial  # the mode `after` measures staying in
    down = -1.0

    def close(ep: _Open) -> None:
        paid = ep.paid if ep.restart is not None else ep.peak
        out.append(Episode(ep.start, ep.restart, paid, min(ep.peak, ep.cost)))

    for i, d in enumerate(demands):
        t = i * dt
        history = _history(demands, prefix, i, dt, horizon) if horizon is not None else None
        mode = state.mode
        if after is not None:  # staying in the old mode would have run up this
            after.regret = max(
                0.0, after.regret + (pool_rate(curves, mode, d, n) - pool_rate(curves, stayed_in, d, n)) * dt
            )
            after.peak = max(after.peak, after.regret)
            if after.regret <= 0.0 or mode is stayed_in:
                close(after)
                after = None
        sample = Sample(t, d, speculative=PoolSignal(ready_replicas=n), history=history)
        verdict = decide(knobs, curves, state, sample, converging=t < down)
        regret = verdict.state.regret if verdict.action is not Action.RESTART else state.regret
        if verdict.action is Action.RESTART:
            regret = max(
                0.0, state.regret + (pool_rate(curves, other(mode), d, n) - pool_rate(curves, mode, d, n)) * dt
            )
        if current is None and regret > 0.0:
            current = _Open(start=t)
        if current is not None:
            current.regret = regret
            current.peak = max(current.peak, regret)
            # priced as the rule prices it: at the highest demand the roll may run into (policy.restart.reach_of)
            reach = reach_of(verdict.state.demand_peaks, verdict.state.trend, d, roll_seconds(knobs))
            current.cost = restart_price(knobs, curves, mode, d, reach)[0]
            if verdict.action is Action.RESTART:
                current.restart = t
                current.paid = regret + current.cost
                if after is not None:
                    close(after)
                after, stayed_in, current = current, mode, None
                down = t + knobs.startup_seconds
            elif regret <= 0.0:
                close(current)
                current = None
        state = verdict.state if regimes else replace(verdict.state, regimes=Regimes())
    for ep in (current, after):
        if ep is not None:
            close(ep)
    return out

"""A simulated Prometheus: what the operator's queries would return, read into Samples by the operator's own
reader (metrics.signal.read), so the simulated policy sees what the real one would.

Each pool is scraped every `scrape_seconds` (the PodMonitor's interval); a pool with no Ready replica exposes no
series (its pods are restarting). A query at time t sees the scrapes in (t - window, t]: the gauges averaged over
the smoothing window and the token counter's rate over the rate window, the windows the operator's PromQL uses
(metrics.promql.Windows.of). Freshness is the newest scrape, so a pool that lost its series goes stale after two
scrape intervals exactly as in metrics.signal. Latency quantiles are not simulated (the policy does not need
them; they stay None, which the reader allows).

The whole history is kept (`history_seconds`, 8 days by default), so a query can carry PromQL's `offset`:
`results(now, offset)` is what the grouped queries return with `offset <offset>s` (the values of
`now - offset`), and `sample(now, roles, offset)` reads them with the operator's reader as of `now - offset`
(the same time yesterday: 86400; last week: 604800). A query before the start of the history finds no series,
as in Prometheus.

Restart's demand history (policy.forecast) is answered the same way: `history(now, roles, horizon)` is what the
live loop's four history queries (metrics.promql.history_queries: demand a day and a week ago, smoothed, and its
mean over the `horizon` that followed) return, read by the operator's own metrics.signal.read_history. Each scrape
carries the running sum of the demand it saw, so a mean over any window, a horizon of hours included, is two
look-ups (no re-scan of the window on every evaluation of a week)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from specserve.metrics.promql import HISTORY_SIGNALS, PoolKey, Query, Signal, Windows, grouped_queries, history_queries
from specserve.metrics.results import QueryResult
from specserve.metrics.signal import PoolTarget, ReadTarget, index, read, read_history
from specserve.policy.forecast import History
from specserve.policy.types import Sample
from specserve_tools.emulator.engine import Mode as EngineMode
from specserve_tools.emulator.engine import active_steps
from specserve_tools.simulate.cluster import Pool

NAMESPACE = "simulate"
NAME = "sim"


@dataclass(frozen=True)
class Scrape:
    time: float
    running: float
    queued: float
    tokens_total: float  # the generation_tokens counter
    spec_steps: float | None
    accept_length: float | None
    demand_sum: float = 0.0  # running + queued summed over this series' scrapes so far, this one included


DAY_SECONDS = 86400.0
WEEK_SECONDS = 7 * DAY_SECONDS


class Prometheus:
    def __init__(
        self,
        pools: dict[str, Pool],
        scrape_seconds: float,
        evaluation_seconds: float,
        history_seconds: float = WEEK_SECONDS + DAY_SECONDS,
    ) -> None:
        self.pools = pools
        self.scrape_seconds = scrape_seconds
        self.windows = Windows.of(evaluation_seconds, scrape_seconds)
        self.history_seconds = max(history_seconds, float(max(self.windows.smooth, self.windows.rate)) + scrape_seconds)
        self.series: dict[str, list[Scrape]] = {role: [] for role in pools}
        self.times: dict[str, list[float]] = {role: [] for role in pools}
        self.queries: dict[Signal, Query] = {q.signal: q for q in grouped_queries(self.windows)}
        self.history_query_sets: dict[int, list[Query]] = {}  # by horizon: the PromQL is built once
        self.next_scrape = 0.0
        self.last_scrape: dict[str, float] = {}  # by role: when it was last scraped (what _running averages over)

    def maybe_scrape(self, now: float) -> None:
        if now + 1e-9 < self.next_scrape:
            return
        self.next_scrape += self.scrape_seconds
        for role, pool in self.pools.items():
            modes = pool.modes(now)
            if not modes:
                self.last_scrape.pop(role, None)  # the series starts afresh when a pod is Ready again
                continue  # no Ready pod: no series
            steps: float | None = None
            accept: float | None = None
            drafting = [m for m in modes if m is not EngineMode.BASELINE]
            if drafting:
                ready = pool.ready(now)
                batch = pool.running / len(ready)
                replica = next(r for r in ready if r.mode is not EngineMode.BASELINE)
                steps = float(active_steps(pool.profile, replica.mode, replica.adaptive, batch))
                accept = pool.profile.accept_at(now) if steps > 0 else 1.0
            self._append(role, Scrape(now, self._running(role, pool, now), pool.queued, pool.stats.served_tokens,
                                      steps, accept))  # fmt: skip

    def _running(self, role: str, pool: Pool, now: float) -> float:
        """The running gauge as a scrape at a random instant since the previous one sees it on average: the
        requests run over the seconds served, idle time included. The pool's running count now (after this
        step's arrivals, before it serves them) is the peak of the step. A pool that finishes its requests
        within the step, such as a fast pool fed a small weight, then idles. Read at the peak, it looked like a
        pool serving 14-26 % below its curve. Learning took that at its word (suite seed 7 case 90:
        the weights moved off the speculative pool, -51 % of the tokens). The first scrape has no interval
        yet and reads the count."""
        served, pool.running_seconds = pool.running_seconds, 0.0
        previous = self.last_scrape.get(role)
        self.last_scrape[role] = now
        if previous is None or now <= previous:
            return pool.running
        return served / (now - previous)

    def _append(self, role: str, scrape: Scrape) -> None:
        series, times = self.series[role], self.times[role]
        previous = series[-1].demand_sum if series else 0.0
        scrape = replace(scrape, demand_sum=previous + scrape.running + scrape.queued)
        series.append(scrape)
        times.append(scrape.time)
        if times[0] < scrape.time - 2 * self.history_seconds:  # trim in batches: amortised O(1)
            cut = bisect.bisect_left(times, scrape.time - self.history_seconds)
            del series[:cut], times[:cut]

    def _window(self, role: str, now: float, seconds: float) -> list[Scrape]:
        """The scrapes in (now - seconds, now]."""
        times = self.times[role]
        lo = bisect.bisect_right(times, now - seconds)
        hi = bisect.bisect_right(times, now)
        return self.series[role][lo:hi]

    def _values(self, now: float) -> dict[Signal, dict[PoolKey, float]]:
        out: dict[Signal, dict[PoolKey, float]] = {s: {} for s in Signal}
        for role in self.series:
            key = PoolKey(NAMESPACE, NAME, role)
            smooth = self._window(role, now, self.windows.smooth)
            if smooth:
                out[Signal.RUNNING][key] = sum(s.running for s in smooth) / len(smooth)
                out[Signal.QUEUED][key] = sum(s.queued for s in smooth) / len(smooth)
                steps = [s.spec_steps for s in smooth if s.spec_steps is not None]
                if steps:
                    out[Signal.SPEC_STEPS][key] = sum(steps) / len(steps)
                accept = [s.accept_length for s in smooth if s.accept_length is not None]
                if accept:
                    out[Signal.ACCEPT_LENGTH][key] = sum(accept) / len(accept)
            # what a series with no new scrape still shows (Prometheus' lookback: the history kept)
            last = self._window(role, now, self.history_seconds)
            if last:
                out[Signal.FRESHNESS][key] = last[-1].time
            rated = self._window(role, now, self.windows.rate)
            if len(rated) >= 2 and rated[-1].time > rated[0].time:
                out[Signal.TOKENS][key] = (rated[-1].tokens_total - rated[0].tokens_total) / (
                    rated[-1].time - rated[0].time
                )
        return out

    def results(self, now: float, offset: float = 0.0) -> list[QueryResult]:
        """What the grouped queries return at `now` with `offset <offset>s`: the values as of `now - offset`, stamped
        with that time, so the reader judges their freshness as it would have then (a series that was fresh a day
        ago is not stale for being a day old)."""
        then = now - offset
        values = self._values(then)
        return [QueryResult(query, values.get(signal, {}), time=then) for signal, query in self.queries.items()]

    def sample(self, now: float, speculative_roles: dict[str, bool], offset: float = 0.0) -> Sample:
        """The Sample the operator would read at `now` (with `offset`: the one it read at `now - offset`, from the
        history); `speculative_roles` says which Sample field each pool goes in (TrafficSplit: by pool; one pool:
        speculative unless it serves baseline). Ready counts are today's: the history keeps the series only."""
        results = self.results(now, offset)
        pools = tuple(
            PoolTarget(role=role, ready=len(pool.ready(now)), speculative=speculative_roles[role])
            for role, pool in self.pools.items()
        )
        target = ReadTarget(NAMESPACE, NAME, pools, self.scrape_seconds)
        return read(target, index(results), now - offset).sample

    def _mean_demand(self, role: str, now: float, seconds: float) -> float | None:
        """avg_over_time(running) + avg_over_time(queued) over (now - seconds, now]; None: no scrape there (the
        series is absent from the result, as in Prometheus)."""
        times = self.times[role]
        lo = bisect.bisect_right(times, now - seconds)
        hi = bisect.bisect_right(times, now)
        if hi <= lo:
            return None
        series = self.series[role]
        before = series[lo - 1].demand_sum if lo > 0 else series[0].demand_sum - series[0].running - series[0].queued
        return (series[hi - 1].demand_sum - before) / (hi - lo)

    def history_results(self, now: float, horizon: int) -> list[QueryResult]:
        """What the live loop's history queries (metrics.promql.history_queries) return at `now`: per signal its
        lookback and window, `offset lookback` smoothed for now, `[horizon] offset lookback - horizon` ahead."""
        queries = self.history_query_sets.get(horizon)
        if queries is None:
            queries = self.history_query_sets[horizon] = history_queries(self.windows, horizon)
        out = []
        for query in queries:
            lookback, ahead = HISTORY_SIGNALS[query.signal]
            window, offset = (horizon, lookback - horizon) if ahead else (self.windows.smooth, lookback)
            values = {}
            for role in self.series:
                mean = self._mean_demand(role, now - offset, window)
                if mean is not None:
                    values[PoolKey(NAMESPACE, NAME, role)] = mean
            out.append(QueryResult(query, values, time=now))
        return out

    def history(self, now: float, speculative_roles: dict[str, bool], horizon: int) -> History:
        """Restart's demand history as the operator reads it at `now` (metrics.signal.read_history)."""
        pools = tuple(
            PoolTarget(role=role, ready=len(pool.ready(now)), speculative=speculative_roles[role])
            for role, pool in self.pools.items()
        )
        target = ReadTarget(NAMESPACE, NAME, pools, self.scrape_seconds)
        return read_history(target, index(self.history_results(now, horizon)), horizon)

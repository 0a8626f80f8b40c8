"""A simulated Prometheus: what the operator's queries would return, read into Samples by the operator's own
reader (metrics.signal.read), so the simulated policy sees what the real one would.

Each pool is scraped every `scrape_seconds` (the PodMonitor's interval); a pool with no Ready replica exposes no
series (its pods are restarting). A query at time t sees the scrapes in (t - window, t]: the gauges averaged over
the smoothing window and the token counter's rate over the rate window, the windows the operator's PromQL uses
(metrics.promql.Windows.of). Freshness is the newest scrape, so a pool that lost its series goes stale after two
scrape intervals exactly as in metrics.signal. Latency quantiles are not simulated (the policy does not need
them; they stay None, which the reader allows)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from specserve.emulator.engine import Mode as EngineMode
from specserve.emulator.engine import active_steps
from specserve.metrics.promql import PoolKey, Query, Signal, Windows, grouped_queries
from specserve.metrics.results import QueryResult
from specserve.metrics.signal import PoolTarget, Target, index, read
from specserve.policy.types import Sample
from specserve.simulate.cluster import Pool

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


class Prometheus:
    def __init__(self, pools: dict[str, Pool], scrape_seconds: float, evaluation_seconds: float) -> None:
        self.pools = pools
        self.scrape_seconds = scrape_seconds
        self.windows = Windows.of(evaluation_seconds, scrape_seconds)
        keep = int(max(self.windows.smooth, self.windows.rate) / scrape_seconds) + 2
        self.series: dict[str, deque[Scrape]] = {role: deque(maxlen=keep) for role in pools}
        self.queries: dict[Signal, Query] = {q.signal: q for q in grouped_queries(self.windows)}
        self.next_scrape = 0.0

    def maybe_scrape(self, now: float) -> None:
        if now + 1e-9 < self.next_scrape:
            return
        self.next_scrape += self.scrape_seconds
        for role, pool in self.pools.items():
            modes = pool.modes(now)
            if not modes:
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
            self.series[role].append(Scrape(now, pool.running, pool.queued, pool.stats.served_tokens, steps, accept))

    def _values(self, now: float) -> dict[Signal, dict[PoolKey, float]]:
        out: dict[Signal, dict[PoolKey, float]] = {s: {} for s in Signal}
        for role, scrapes in self.series.items():
            key = PoolKey(NAMESPACE, NAME, role)
            smooth = [s for s in scrapes if now - self.windows.smooth < s.time <= now]
            if smooth:
                out[Signal.RUNNING][key] = sum(s.running for s in smooth) / len(smooth)
                out[Signal.QUEUED][key] = sum(s.queued for s in smooth) / len(smooth)
                steps = [s.spec_steps for s in smooth if s.spec_steps is not None]
                if steps:
                    out[Signal.SPEC_STEPS][key] = sum(steps) / len(steps)
                accept = [s.accept_length for s in smooth if s.accept_length is not None]
                if accept:
                    out[Signal.ACCEPT_LENGTH][key] = sum(accept) / len(accept)
            if scrapes and scrapes[-1].time <= now:
                out[Signal.FRESHNESS][key] = scrapes[-1].time  # what a series with no new scrape still shows
            rated = [s for s in scrapes if now - self.windows.rate < s.time <= now]
            if len(rated) >= 2 and rated[-1].time > rated[0].time:
                out[Signal.TOKENS][key] = (rated[-1].tokens_total - rated[0].tokens_total) / (
                    rated[-1].time - rated[0].time
                )
        return out

    def sample(self, now: float, speculative_roles: dict[str, bool]) -> Sample:
        """The Sample the operator would read at `now`; `speculative_roles` says which Sample field each pool
        goes in (TrafficSplit: by pool; one pool: speculative unless it serves baseline)."""
        values = self._values(now)
        results = [QueryResult(query, values.get(signal, {}), time=now) for signal, query in self.queries.items()]
        pools = tuple(
            PoolTarget(role=role, ready=len(pool.ready(now)), speculative=speculative_roles[role])
            for role, pool in self.pools.items()
        )
        target = Target(NAMESPACE, NAME, pools, self.scrape_seconds)
        return read(target, index(results), now).sample

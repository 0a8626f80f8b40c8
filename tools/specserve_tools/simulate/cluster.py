"""Pools of replicas serving like a profile, as a fluid model at a fixed step.

A pool holds requests in flight: a FIFO queue (cohorts of requests that arrived in the same step) and the running
set, at most `max_running_requests` per Ready replica. Running requests share the replicas evenly (the Service
spreads them), so with n running on R Ready replicas each replica runs b = n / R and serves T_mode(b) tokens/s
(the emulator's own serving functions: emulator.engine.throughput, incl. Adaptive's in-engine switch). Every
running request gets T(b) / b tokens/s, so its time per output token is b / T(b). Requests finish in proportion to
the tokens served (served x requests / remaining tokens: exact for memoryless output lengths).

TTFT is exact for the fluid FIFO: queue wait + the profile's TTFT. A request is *good* (counts towards goodput)
when its TTFT met the SLO and the time per output token of the replicas serving it met the TPOT SLO in every
step it was served in; the tokens of late requests are tracked apart so goodput never counts them.

A restarting replica serves nothing for the profile's start-up time; when Ready replicas fall below what the
running set needs, the excess goes back to the head of the queue with its progress kept (SGLang retracts
requests the same way). A roll restarts one replica at a time (no surge)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from specserve_tools.emulator.engine import Mode as EngineMode
from specserve_tools.emulator.engine import active_steps, throughput
from specserve_tools.emulator.profile import Profile
from specserve_tools.simulate.histogram import Histogram

AdaptiveTable = dict[int, list[int]]
Route = Callable[[float, float, float], None]  # (time, requests, tokens): where a closed loop's next requests go
CLOSED_LOOP_REFILLS = 16  # per step: a stream faster than 16 requests per step is still capped (none drawn is)


def serving_function(profile: Profile, mode: EngineMode, adaptive: AdaptiveTable | None) -> Callable[[float], float]:
    """Per-replica tokens/s against its (fluid, fractional) batch. Below one running request the replica is idle
    part of the time, so it serves T(1) x batch: each request still gets the single-stream rate, never more."""
    scaled = scaled_serving_function(profile, mode, adaptive)
    return lambda batch: scaled(batch, 1.0)


def scaled_serving_function(profile: Profile, mode: EngineMode, adaptive: AdaptiveTable | None
                            ) -> Callable[[float, float], float]:  # fmt: skip
    """serving_function with the speculative curve times a scale (a drifting profile: Profile.speculative_scale);
    steps without drafting (baseline, Adaptive's off batches) are not scaled."""
    if mode is EngineMode.BASELINE:
        base = profile.baseline.at
        single = base(1.0)
        return lambda batch, _scale: base(batch) if batch >= 1.0 else single * batch

    def drafting(batch: float) -> bool:
        return mode is EngineMode.SPECULATIVE or active_steps(profile, mode, adaptive, batch) > 0

    def rate(batch: float, scale: float) -> float:
        b = max(batch, 1.0)
        tps = throughput(profile, mode, adaptive, b) * (scale if drafting(b) else 1.0)
        return tps if batch >= 1.0 else tps * batch

    return rate


@dataclass
class Replica:
    mode: EngineMode
    adaptive: AdaptiveTable | None = None
    down_until: float = 0.0  # restarting until then (serves nothing)


@dataclass
class Cohort:
    arrival: float
    count: float
    tokens: float  # remaining output tokens of the cohort
    late: bool | None = None  # None: never admitted; else retracted with its class kept


@dataclass
class Stats:
    """Totals over the run (request counts are fluid: fractions of requests)."""

    arrived: float = 0.0
    arrived_tokens: float = 0.0
    completed: float = 0.0
    served_tokens: float = 0.0
    good_tokens: float = 0.0
    capacity_tokens: float = 0.0  # what the Ready replicas could have served at their batch (>= served)
    down_replica_seconds: float = 0.0
    ttft: Histogram = field(default_factory=Histogram)  # seconds, weighted by requests admitted
    tpot: Histogram = field(default_factory=Histogram)  # seconds per token, weighted by requests completed
    tpot_token_seconds: float = 0.0  # sum over served tokens of their replicas' time per output token


@dataclass
class Slo:
    ttft: float
    tpot: float


class Pool:
    """One Service's replicas and the requests in flight on them."""

    def __init__(self, name: str, profile: Profile, replicas: list[Replica], slo: Slo) -> None:
        self.name = name
        self.profile = profile
        self.replicas = replicas
        self.slo = slo
        self.cap = profile.max_running_requests
        self.queue: deque[Cohort] = deque()
        self.queued = 0.0
        self.queued_tokens = 0.0
        # running requests in two classes: good (met TTFT so far) and late
        self.n_good = self.w_good = 0.0
        self.n_late = self.w_late = 0.0
        self.s_good = 0.0  # tokens served so far to the requests now in the good class
        self.stats = Stats()
        self.last_tps = 0.0  # tokens/s served in the last step
        # running requests x seconds served since the last scrape: a pool that finishes its requests within a step
        # idles for the rest of it, and a scrape at a random instant sees the average (observe.Prometheus)
        self.running_seconds = 0.0
        self.roll: deque[tuple[int, EngineMode, AdaptiveTable | None]] = deque()  # replicas still to restart
        self._serving_cache: tuple[int, list[tuple[int, Callable[[float, float], float]]]] | None = None
        self._serving_until = 0.0

    # ------------------------------------------------------------------ views
    @property
    def running(self) -> float:
        return self.n_good + self.n_late

    @property
    def in_flight(self) -> float:
        return self.running + self.queued

    def ready(self, now: float) -> list[Replica]:
        return [r for r in self.replicas if r.down_until <= now]

    def rolling(self, now: float) -> bool:
        return bool(self.roll) or any(r.down_until > now for r in self.replicas)

    def modes(self, now: float) -> dict[EngineMode, int]:
        out: dict[EngineMode, int] = {}
        for r in self.ready(now):
            out[r.mode] = out.get(r.mode, 0) + 1
        return out

    # ------------------------------------------------------------------ changes
    def arrive(self, now: float, count: float, tokens: float) -> None:
        if count <= 0:
            return
        self.queue.append(Cohort(now, count, tokens))
        self.queued += count
        self.queued_tokens += tokens
        self.stats.arrived += count
        self.stats.arrived_tokens += tokens

    def start_roll(self, mode: EngineMode, adaptive: AdaptiveTable | None) -> int:
        """Restart every replica not already serving (mode, adaptive config), one at a time; returns how many."""
        todo = [i for i, r in enumerate(self.replicas) if r.mode is not mode or r.adaptive != adaptive]
        self.roll.extend((i, mode, adaptive) for i in todo)
        return len(todo)

    def _advance_roll(self, now: float) -> None:
        if self.roll and not any(r.down_until > now for r in self.replicas):
            index, mode, adaptive = self.roll.popleft()
            replica = self.replicas[index]
            replica.mode, replica.adaptive = mode, adaptive
            replica.down_until = now + self.profile.startup_seconds
            self._serving_cache = None

    # ------------------------------------------------------------------ one step
    def _serving(self, now: float) -> tuple[int, list[tuple[int, Callable[[float, float], float]]]]:
        """(Ready replicas, [(count, per-replica tokens/s at a batch)] per mode and config); cached until the
        next replica comes up or a roll moves."""
        if now < self._serving_until and self._serving_cache is not None:
            return self._serving_cache
        ready = self.ready(now)
        groups: dict[tuple[EngineMode, int], list[Any]] = {}
        for r in ready:
            key = (r.mode, id(r.adaptive))
            if key in groups:
                groups[key][0] += 1
            else:
                groups[key] = [1, scaled_serving_function(self.profile, r.mode, r.adaptive)]
        later = [r.down_until for r in self.replicas if r.down_until > now]
        self._serving_until = min(later) if later else float("inf")
        self._serving_cache = (len(ready), [(int(c), f) for c, f in groups.values()])
        return self._serving_cache

    def step(self, now: float, dt: float) -> None:
        self.admit(now)
        self.serve(now, dt)

    def admit(self, now: float) -> None:
        """Restart the next replica of a roll when its turn comes, retract what no longer fits, admit from the queue."""
        if self.roll:
            self._advance_roll(now)
        n_ready, _ = self._serving(now)
        slots = n_ready * self.cap
        if self.n_good + self.n_late > slots:
            self._retract(self.n_good + self.n_late - slots)
        if self.queue:
            self._admit(now, slots - self.n_good - self.n_late)

    def serve_closed(self, now: float, dt: float, tokens_per_request: float, route: Route | None = None) -> None:
        """One step of a closed loop: a client whose request finishes sends the next one at once, not at the next
        step. With steps longer than a request (a fast stream's 512 tokens take ~1-4 s, the suite's step is 5)
        the pool would otherwise run out of work and idle for the rest of the step, capping a closed loop's
        throughput at clients x tokens per request / dt whatever the mode: both modes then serve the same at
        light load, and a restart gains nothing it was predicted to. At most CLOSED_LOOP_REFILLS refills.
        `route(time, requests, tokens)`: where the next requests go (TrafficSplit: the weights split them between
        the pools, as the route does a client's next request); None: back to this pool."""
        t, left = now, dt
        for i in range(CLOSED_LOOP_REFILLS):
            before = self.stats.completed
            used = self.serve(t, left, account=i == 0)
            done = self.stats.completed - before
            t, left = t + used, left - used
            if left <= 1e-9 or done <= 1e-12 or used <= 1e-12:
                return
            if route is None:
                self.arrive(t, done, done * tokens_per_request)
                self.admit(t)
            else:
                route(t, done, done * tokens_per_request)

    def serve(self, now: float, dt: float, account: bool = True) -> float:
        """One step of serving the running requests; returns the seconds of it the pool had work for (dt, or less
        when every running request finished before its end). `account`: count the step's down replica-seconds
        (False: the rest of a step already counted)."""
        n_ready, groups = self._serving(now)
        if n_ready < len(self.replicas) and account:
            self.stats.down_replica_seconds += (len(self.replicas) - n_ready) * dt
        n = self.n_good + self.n_late
        if n_ready == 0 or n <= 0:
            self.last_tps = 0.0
            return 0.0
        batch = n / n_ready
        ok_tps = 0.0  # tokens/s of the replicas whose TPOT meets the SLO
        total_tps = 0.0
        tpot_weighted = 0.0
        slo_tpot = self.slo.tpot
        scale = self.profile.speculative_scale(now)
        for count, rate in groups:
            tps = count * rate(batch, scale)
            if tps <= 0:
                continue
            total_tps += tps
            tpot = batch * count / tps
            tpot_weighted += tpot * tps
            if tpot <= slo_tpot:
                ok_tps += tps
        if total_tps > 0 and ok_tps < total_tps:
            self._demote(1.0 - ok_tps / total_tps)
        w = self.w_good + self.w_late
        served = min(total_tps * dt, w)
        used = served / total_tps if total_tps > 0 and served < total_tps * dt else dt
        self.running_seconds += n * used
        self.stats.capacity_tokens += total_tps * (dt if account else used)
        if served <= 0:
            self.last_tps = 0.0
            return 0.0
        # processor sharing: each class gets tokens in proportion to its requests, never more than it has left
        share_good = min(served * self.n_good / n, self.w_good)
        share_late = min(served - share_good, self.w_late)
        share_good = min(served - share_late, self.w_good)
        done_good = min(self.n_good, share_good * self.n_good / self.w_good) if self.w_good > 0 else 0.0
        done_late = min(self.n_late, share_late * self.n_late / self.w_late) if self.w_late > 0 else 0.0
        self.stats.good_tokens += share_good
        self.s_good += share_good
        if self.n_good > 0:
            self.s_good *= 1.0 - done_good / self.n_good  # completed requests keep their tokens counted
        self.w_good -= share_good
        self.w_late -= share_late
        self.n_good -= done_good
        self.n_late -= done_late
        self.stats.served_tokens += share_good + share_late
        self.stats.tpot_token_seconds += (tpot_weighted / total_tps) * (share_good + share_late)
        self.stats.completed += done_good + done_late
        if done_good + done_late > 0:
            self.stats.tpot.add(tpot_weighted / total_tps, done_good + done_late)
        self.last_tps = (share_good + share_late) / dt
        self._settle()
        return used

    def _demote(self, slow: float) -> None:
        """A good request on a replica over the TPOT SLO this step turns late, with the tokens it already got
        (s_good: what the good class has been served so far): goodput counts requests, not tokens in passing."""
        if slow <= 1e-12 or self.n_good <= 0:
            return
        moved_n, moved_w, moved_s = self.n_good * slow, self.w_good * slow, self.s_good * slow
        self.n_good -= moved_n
        self.w_good -= moved_w
        self.s_good -= moved_s
        self.stats.good_tokens -= moved_s
        self.n_late += moved_n
        self.w_late += moved_w

    def _settle(self) -> None:
        # fluid round-off: a class with no tokens left has no requests left, and the other way round
        if self.w_good <= 1e-9 or self.n_good <= 1e-12:
            self.stats.completed += self.n_good
            self.n_good = self.w_good = self.s_good = 0.0
        if self.w_late <= 1e-9 or self.n_late <= 1e-12:
            self.stats.completed += self.n_late
            self.n_late = self.w_late = 0.0

    def _admit(self, now: float, free: float) -> None:
        while free > 1e-12 and self.queue:
            head = self.queue[0]
            take = min(free, head.count)
            tokens = head.tokens * take / head.count
            late = head.late
            if late is None:
                wait = now - head.arrival + self.profile.ttft_seconds
                self.stats.ttft.add(wait, take)
                late = wait > self.slo.ttft
            if late:
                self.n_late += take
                self.w_late += tokens
            else:
                self.n_good += take
                self.w_good += tokens
            self.queued -= take
            self.queued_tokens -= tokens
            free -= take
            if take >= head.count - 1e-12:
                self.queue.popleft()
            else:
                head.count -= take
                head.tokens -= tokens
        if not self.queue:
            self.queued = self.queued_tokens = 0.0

    def _retract(self, excess: float) -> None:
        """Send `excess` running requests back to the head of the queue (late ones first: they count for nothing)."""
        for late in (True, False):
            n = self.n_late if late else self.n_good
            if excess <= 1e-12 or n <= 0:
                continue
            take = min(excess, n)
            w = (self.w_late if late else self.w_good) * take / n
            if late:
                self.n_late -= take
                self.w_late -= w
            else:
                self.n_good -= take
                self.w_good -= w
            self.queue.appendleft(Cohort(0.0, take, w, late=late))
            self.queued += take
            self.queued_tokens += w
            excess -= take


def make_pool(name: str, profile: Profile, count: int, mode: EngineMode, slo: Slo,
              adaptive: AdaptiveTable | None = None) -> Pool:  # fmt: skip
    return Pool(name, profile, [Replica(mode, adaptive) for _ in range(count)], slo)

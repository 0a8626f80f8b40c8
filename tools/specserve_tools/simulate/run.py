"""One simulation run: a Load through the pools, a controller deciding at each evaluation interval on what the
simulated Prometheus shows, and what it all served."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from specserve.api.models import Mode, Strategy, Weights
from specserve.render.adaptive import steps_for_crossover
from specserve_tools.emulator.engine import Mode as EngineMode
from specserve_tools.simulate.cluster import AdaptiveTable, Pool, Stats, make_pool
from specserve_tools.simulate.observe import Prometheus
from specserve_tools.simulate.setup import Command, Controller, Load, Setup

SPECULATIVE, BASELINE, ENGINE = "speculative", "baseline", "engine"  # pool roles, as the operator labels them


@dataclass
class Timeline:
    """One point per evaluation interval."""

    time: list[float] = field(default_factory=list)
    demand: list[float] = field(default_factory=list)  # requests in flight (true)
    speculative_share: list[float] = field(default_factory=list)  # weight %, or % of Ready replicas speculative
    tokens_per_second: list[float] = field(default_factory=list)


@dataclass
class Run:
    name: str
    pools: dict[str, Stats]
    timeline: Timeline
    switches: int = 0  # mode changes (TrafficSplit: the dominant pool changes; Restart: rolls; Adaptive: re-renders)
    weight_changes: int = 0
    restarts_into_speculative: int = 0
    restarts_into_baseline: int = 0
    in_flight_at_end: float = 0.0
    queued_at_end: float = 0.0


def adaptive_table(crossover: float, num_steps: int) -> AdaptiveTable:
    return {int(k): v for k, v in steps_for_crossover(crossover, num_steps).items()}


def _engine_mode(mode: Mode, strategy: Strategy) -> EngineMode:
    if strategy is Strategy.ADAPTIVE and mode is Mode.SPECULATIVE:
        return EngineMode.ADAPTIVE
    return EngineMode.SPECULATIVE if mode is Mode.SPECULATIVE else EngineMode.BASELINE


def build_pools(setup: Setup, first: Command) -> dict[str, Pool]:
    p, slo = setup.profile, setup.slo
    if setup.strategy is Strategy.TRAFFIC_SPLIT:
        return {
            SPECULATIVE: make_pool(SPECULATIVE, p, setup.speculative_replicas, EngineMode.SPECULATIVE, slo),
            BASELINE: make_pool(BASELINE, p, setup.baseline_replicas, EngineMode.BASELINE, slo),
        }
    mode = first.mode or setup.initial_mode
    table = setup.adaptive_table if setup.strategy is Strategy.ADAPTIVE else None
    return {ENGINE: make_pool(ENGINE, p, setup.speculative_replicas, _engine_mode(mode, setup.strategy), slo, table)}


class Simulation:
    def __init__(self, setup: Setup, load: Load, controller: Controller) -> None:
        self.setup, self.load, self.controller = setup, load, controller
        first = controller.start(setup, load.concurrency[0] if load.closed_loop else None)
        self.pools = build_pools(setup, first)
        self.weight = (
            first.speculative_weight
            if first.speculative_weight is not None
            else Weights.all_on(setup.initial_mode).speculative
        )
        self.prometheus = Prometheus(self.pools, setup.scrape_seconds, setup.evaluation_seconds)
        self.run = Run(controller.name, {k: v.stats for k, v in self.pools.items()}, Timeline())
        self._served_at_last_point = 0.0

    def converging(self, now: float) -> bool:
        return any(p.rolling(now) for p in self.pools.values())

    def _roles(self, now: float) -> dict[str, bool]:
        if self.setup.strategy is Strategy.TRAFFIC_SPLIT:
            return {SPECULATIVE: True, BASELINE: False}
        pool = self.pools[ENGINE]
        serving = [r.mode for r in pool.replicas]
        return {ENGINE: sum(m is not EngineMode.BASELINE for m in serving) * 2 >= len(serving)}

    def _apply(self, cmd: Command, now: float) -> None:
        if self.setup.strategy is Strategy.TRAFFIC_SPLIT:
            if cmd.speculative_weight is not None and cmd.speculative_weight != self.weight:
                before = self.weight >= 50
                self.weight = max(0, min(100, cmd.speculative_weight))
                self.run.weight_changes += 1
                self.run.switches += int(before != (self.weight >= 50))
            return
        if self.converging(now):
            return  # a rollout is in progress: Kubernetes would only start another after it; every policy waits
        pool = self.pools[ENGINE]
        if self.setup.strategy is Strategy.RESTART and cmd.mode is not None:
            if pool.start_roll(_engine_mode(cmd.mode, Strategy.RESTART), None):
                self.run.switches += 1
                if cmd.mode is Mode.SPECULATIVE:
                    self.run.restarts_into_speculative += 1
                else:
                    self.run.restarts_into_baseline += 1
        elif self.setup.strategy is Strategy.ADAPTIVE and cmd.adaptive_crossover is not None:
            table = adaptive_table(cmd.adaptive_crossover, self.setup.num_steps)
            if pool.start_roll(EngineMode.ADAPTIVE, table):
                self.run.switches += 1

    def _point(self, now: float) -> None:
        tl = self.run.timeline
        served = sum(s.served_tokens for s in self.run.pools.values())
        span = now - tl.time[-1] if tl.time else now
        tl.time.append(now)
        tl.demand.append(sum(p.in_flight for p in self.pools.values()))
        if self.setup.strategy is Strategy.TRAFFIC_SPLIT:
            tl.speculative_share.append(float(self.weight))
        else:
            ready = self.pools[ENGINE].ready(now)
            spec = sum(r.mode is not EngineMode.BASELINE for r in ready)
            tl.speculative_share.append(100.0 * spec / len(ready) if ready else float("nan"))
        tl.tokens_per_second.append((served - self._served_at_last_point) / span if span > 0 else 0.0)
        self._served_at_last_point = served

    def execute(self) -> Run:
        load, dt = self.load, self.load.dt
        every = max(1, round(self.setup.evaluation_seconds / dt))
        pools = list(self.pools.values())
        split = self.setup.strategy is Strategy.TRAFFIC_SPLIT
        spec_pool, base_pool = (self.pools[SPECULATIVE], self.pools[BASELINE]) if split else (pools[0], pools[0])
        closed = load.closed_loop

        def route(t: float, count: float, tokens: float) -> None:
            """TrafficSplit: a closed loop's next requests go through the weights (a pool's own refill, not the
            route, would freeze each pool's load between steps and leave the weights nothing to move)."""
            share = self.weight / 100.0
            spec_pool.arrive(t, count * share, tokens * share)
            base_pool.arrive(t, count * (1 - share), tokens * (1 - share))
            spec_pool.admit(t)
            base_pool.admit(t)

        # Restart's demand history, for the controllers that read it (the operator's policy): the baselines and the
        # replayed plan ignore it, and reading it costs each evaluation four queries
        horizon = self.setup.forecast_horizon if getattr(self.controller, "reads_history", False) else None
        for k in range(load.steps):
            now = k * dt
            if closed:
                # clients whose request finished in the last step send the next one now
                count = max(0.0, load.concurrency[k] - sum(p.in_flight for p in pools))
                tokens = count * load.tokens_per_request
            else:
                count, tokens = load.arrivals[k], load.tokens[k]
            if split:
                share = self.weight / 100.0
                spec_pool.arrive(now, count * share, tokens * share)
                base_pool.arrive(now, count * (1 - share), tokens * (1 - share))
            else:
                spec_pool.arrive(now, count, tokens)
            for pool in pools:
                pool.admit(now)
            self.prometheus.maybe_scrape(now)  # what the gauges show while this step is served
            if k % every == 0:
                if k > 0:
                    roles = self._roles(now)
                    sample = self.prometheus.sample(now, roles)
                    if horizon is not None:
                        # as the live loop: the history joins the reading (switching.gather.settle_history)
                        history = self.prometheus.history(now, roles, horizon)
                        sample = replace(sample, history=history)
                    cmd = self.controller.decide(sample, self.converging(now))
                    if cmd is not None:
                        self._apply(cmd, now)
                self._point(now)
            for pool in pools:
                if closed:
                    pool.serve_closed(now, dt, load.tokens_per_request, route if split else None)
                else:
                    pool.serve(now, dt)
        self.run.in_flight_at_end = sum(p.in_flight for p in pools)
        self.run.queued_at_end = sum(p.queued for p in pools)
        return self.run


def simulate(setup: Setup, load: Load, controller: Controller) -> Run:
    return Simulation(setup, load, controller).execute()

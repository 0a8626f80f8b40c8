"""What one simulation run is given: the deployment (Setup), the load per step (Load), and the controller slot
(Controller) that every compared policy fills: the SpecServe policy, the baselines and the optimum's replay."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Protocol

from specserve.api.models import Mode, Strategy
from specserve.policy.types import Sample
from specserve_tools.emulator.profile import Profile
from specserve_tools.simulate.cluster import AdaptiveTable, Slo
from specserve_tools.simulate.traces import Trace


@dataclass(frozen=True)
class Setup:
    strategy: Strategy
    profile: Profile
    speculative_replicas: int  # the single pool's replicas for Restart and Adaptive
    baseline_replicas: int  # TrafficSplit only
    initial_mode: Mode
    evaluation_seconds: float
    scrape_seconds: float
    slo: Slo
    crossover: float | None  # per replica, from the spec or its curves (the naive switch and Adaptive use it)
    num_steps: int  # speculative steps below the crossover (Adaptive's rendered config)
    adaptive_table: AdaptiveTable | None  # the Adaptive config in force at the start
    dt: float = 1.0
    # Restart: the horizon (s, metrics.promql.horizon_of) of the demand history the simulated Prometheus answers,
    # as the live loop reads it (switching.gather.forecast_horizon); None: no history, the reactive rule
    forecast_horizon: int | None = None
    restart_budget: int | None = None  # Restart: maxRestartsPerDay, which the offline plan keeps too; None: any
    min_dwell: float = 0.0  # Restart: seconds from one restart before the next (minDwellSeconds), as the plan keeps


@dataclass(frozen=True)
class Command:
    """A change a controller asks for; None fields change nothing."""

    speculative_weight: int | None = None  # TrafficSplit: percent of arrivals to the speculative pool
    mode: Mode | None = None  # Restart: roll the pool into this mode
    adaptive_crossover: float | None = None  # Adaptive: re-render the config from this crossover (rolls the pool)


class Controller(Protocol):
    name: str

    def start(self, setup: Setup, demand: float | None) -> Command:
        """The configuration at time 0 (weights or mode). `demand`: the requests in flight at time 0 (a closed
        loop's clients, all arriving at once; None for an open loop, which starts empty)."""
        ...

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        """Called at each evaluation interval with what the simulated Prometheus shows."""
        ...


@dataclass(frozen=True)
class Load:
    """The trace per step of `dt`: open loop, arrivals and their output tokens; closed loop, the concurrency."""

    dt: float
    steps: int
    arrivals: tuple[float, ...] = ()
    tokens: tuple[float, ...] = ()
    concurrency: tuple[float, ...] = ()
    tokens_per_request: float = 0.0

    @property
    def closed_loop(self) -> bool:
        return bool(self.concurrency)


def bin_trace(trace: Trace, dt: float) -> Load:
    steps = max(1, math.ceil(trace.duration / dt))
    if trace.closed_loop:
        conc = [0.0] * steps
        edges = [*trace.steps, (trace.duration, 0.0)]
        for (t0, c), (t1, _) in itertools.pairwise(edges):
            for k in range(int(t0 / dt), min(steps, math.ceil(t1 / dt))):
                conc[k] = c
        return Load(dt, steps, concurrency=tuple(conc), tokens_per_request=trace.tokens_per_request)
    arrivals = [0.0] * steps
    tokens = [0.0] * steps
    for t, out in zip(trace.arrivals, trace.outputs, strict=True):
        k = min(steps - 1, int(t / dt))
        arrivals[k] += 1.0
        tokens[k] += out
    return Load(dt, steps, arrivals=tuple(arrivals), tokens=tuple(tokens),
                tokens_per_request=trace.tokens_per_request)  # fmt: skip

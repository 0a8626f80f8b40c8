"""The policies SpecServe's is compared with: always speculative, always baseline, a fixed split (TrafficSplit),
a naive threshold switch, and a replayed schedule (the offline optimum's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specserve.api.models import Mode, Strategy, Weights
from specserve.policy.types import Sample
from specserve_tools.simulate.setup import Command, Setup


def _mode_command(setup: Setup, mode: Mode) -> Command:
    if setup.strategy is Strategy.TRAFFIC_SPLIT:
        return Command(speculative_weight=Weights.all_on(mode).speculative)
    return Command(mode=mode)


@dataclass
class Static:
    """One mode all day (TrafficSplit: all weight on that pool; Adaptive's speculative mode is the engine's own
    adaptive switch with the config rendered from the crossover)."""

    name: str
    mode: Mode

    def start(self, setup: Setup, demand: float | None) -> Command:
        return _mode_command(setup, self.mode)

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        return None


@dataclass
class FixedSplit:
    name: str
    speculative_weight: int

    def start(self, setup: Setup, demand: float | None) -> Command:
        return Command(speculative_weight=self.speculative_weight)

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        return None


class NaiveThreshold:
    """Acts on every crossing of the crossover by the observed demand: no band, no windows, no dwell, no budget.
    TrafficSplit: all weight to one pool; Restart: roll the pool. Unknown demand holds (it has nothing to act on)."""

    name = "naive threshold"

    def __init__(self, crossover: float) -> None:
        self.crossover = crossover
        self.setup: Setup | None = None

    def start(self, setup: Setup, demand: float | None) -> Command:
        self.setup = setup
        return _mode_command(setup, setup.initial_mode)

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        if self.setup is None or sample.demand is None:
            return None
        # Against the serving pool's crossover: the speculative pool's replicas (TrafficSplit) or the pool's.
        threshold = self.crossover * max(1, self.setup.speculative_replicas)
        mode = Mode.BASELINE if sample.demand > threshold else Mode.SPECULATIVE
        return _mode_command(self.setup, mode)


@dataclass
class Schedule:
    """Replays a precomputed command per evaluation interval (index k = the k-th evaluation, from 1)."""

    name: str
    first: Command
    commands: Sequence[Command | None]
    k: int = 0

    def start(self, setup: Setup, demand: float | None) -> Command:
        self.k = 0
        return self.first

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        self.k += 1
        return self.commands[self.k] if self.k < len(self.commands) else None

"""The SpecServe policy on live curves, in the controller slot: the switching loop's own learning round
(`specserve.switching.learning.learning_round`: the previous state, this round's sample, the curves the policy
decides with, the status it would write) feeding the operator's own `decide`. It starts from the calibrated curves
it is given and learns from the simulated pools' samples, so a drifting profile shows what learning recovers of
the gain static curves lose. Nothing here computes curves: what it decides with is what the loop would."""

from __future__ import annotations

from specserve.api.models import LearningStatus, Mode, Strategy
from specserve.objects import Remembered
from specserve.policy.curves import ModeCurves
from specserve.policy.learning import Learning
from specserve.policy.types import Knobs, Sample
from specserve.switching.learning import learning_round
from specserve_tools.simulate.policy import SpecServePolicy
from specserve_tools.simulate.setup import Command, Setup


class LearnedPolicy(SpecServePolicy):
    def __init__(
        self,
        knobs: Knobs,
        curves: ModeCurves,
        initial_mode: Mode,
        strategy: Strategy,
        name: str = "SpecServe learned",
        interval: float = 15.0,
    ) -> None:
        super().__init__(knobs, curves, initial_mode, name)
        self.calibrated, self.strategy, self.interval = curves, strategy, interval
        self.memory: Remembered | None = None  # the loop's memory between rounds
        self.saved: LearningStatus | None = None  # status.learning as the loop last wrote it

    @property
    def learning(self) -> Learning | None:
        return self.memory.learning if self.memory is not None else None

    def start(self, setup: Setup, demand: float | None) -> Command:
        self.memory, self.saved, self.interval = None, None, setup.evaluation_seconds
        self.curves = self.calibrated
        return super().start(setup, demand)

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        # As the loop (SwitchingLoop._learn): settled = no roll in flight; an unknown load teaches nothing.
        done = learning_round(
            self.memory, self.saved, self.calibrated, sample, self.strategy, not converging, self.interval
        )
        if done.write is not None:
            self.saved = done.write
        self.memory = Remembered(done.round.learning, self.saved.last_update if self.saved is not None else None)
        self.curves = done.curves
        return super().decide(sample, converging)


def learned_policy(setup: Setup, knobs: Knobs, curves: ModeCurves | None) -> SpecServePolicy:
    """A simulate policy factory (role "learned"): the static policy where there are no curves (modelled ones learn
    once the pools' readings have given them units, as in the loop)."""
    name = f"SpecServe {setup.strategy} (learning: as the operator runs)"
    if curves is None:
        return SpecServePolicy(knobs, curves, setup.initial_mode, name)
    return LearnedPolicy(knobs, curves, setup.initial_mode, setup.strategy, name, setup.evaluation_seconds)

"""The SpecServe policy on live curves, in the controller slot: the operator's own learning
(`specserve.policy.learning`, as the switching loop runs it each round) feeding the operator's own `decide`.
It starts from the calibrated curves it is given and learns from the simulated pools' samples, so a drifting
profile shows what learning recovers of the gain static curves lose."""

from __future__ import annotations

from specserve.api.models import Mode, Strategy
from specserve.policy.curves import ModeCurves
from specserve.policy.learning import Learning, decision_curves, observations, observe, start
from specserve.policy.types import Knobs, Sample
from specserve_tools.simulate.policy import SpecServePolicy
from specserve_tools.simulate.setup import Command, Setup


class LearnedPolicy(SpecServePolicy):
    def __init__(
        self, knobs: Knobs, curves: ModeCurves, initial_mode: Mode, strategy: Strategy, name: str = "SpecServe learned"
    ) -> None:
        super().__init__(knobs, curves, initial_mode, name)
        self.calibrated, self.strategy = curves, strategy
        self.learning: Learning = start(curves)

    def start(self, setup: Setup) -> Command:
        self.learning = start(self.calibrated)
        self.curves = self.calibrated
        return super().start(setup)

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        # As the loop: only a settled pool with a known load teaches (switching.learning.learn).
        seen = observations(sample, self.strategy) if not converging and sample.demand is not None else ()
        self.learning = observe(self.learning, self.calibrated, seen, sample.time).learning
        self.curves = decision_curves(self.calibrated, self.learning, self.strategy)
        return super().decide(sample, converging)


def learned_policy(setup: Setup, knobs: Knobs, curves: ModeCurves | None) -> SpecServePolicy:
    """A simulate policy factory (role "learned"): the static policy where there are no measured curves."""
    if curves is None or curves.modelled:
        return SpecServePolicy(knobs, curves, setup.initial_mode, f"SpecServe learned {setup.strategy}")
    return LearnedPolicy(knobs, curves, setup.initial_mode, setup.strategy, f"SpecServe learned {setup.strategy}")

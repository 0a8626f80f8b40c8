"""The SpecServe policy in the controller slot: the operator's own `specserve.policy.switching.decide`,
unchanged, with its state carried between evaluations exactly as the operator carries it in status."""

from __future__ import annotations

from specserve.api.models import Action, Mode
from specserve.policy.curves import ModeCurves
from specserve.policy.switching import decide, initial_state
from specserve.policy.types import Knobs, PolicyState, Sample, Verdict
from specserve_tools.simulate.setup import Command, Setup


class SpecServePolicy:
    def __init__(self, knobs: Knobs, curves: ModeCurves | None, initial_mode: Mode, name: str = "SpecServe") -> None:
        self.name = name
        self.knobs, self.curves, self.initial_mode = knobs, curves, initial_mode
        self.state: PolicyState = initial_state(knobs, initial_mode, 0.0)
        self.verdicts: list[Verdict] = []  # the decisions that changed something (the status history)
        self.reads_history = True  # Restart's demand history goes into its Samples (simulate.run)

    def start(self, setup: Setup) -> Command:
        self.state = initial_state(self.knobs, self.initial_mode, 0.0)
        if self.state.weights is not None:
            return Command(speculative_weight=self.state.weights.speculative)
        return Command(mode=self.initial_mode)

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        verdict = decide(self.knobs, self.curves, self.state, sample, converging=converging)
        self.state = verdict.state
        if verdict.action is Action.HOLD or not verdict.applied:
            return None
        self.verdicts.append(verdict)
        if verdict.action is Action.SET_WEIGHTS and verdict.weights is not None:
            return Command(speculative_weight=verdict.weights.speculative)
        if verdict.action is Action.RESTART:
            return Command(mode=verdict.mode)
        if verdict.action is Action.RECONFIGURE and verdict.adaptive_crossover is not None:
            return Command(adaptive_crossover=verdict.adaptive_crossover)
        return None

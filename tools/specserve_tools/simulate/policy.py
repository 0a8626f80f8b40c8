"""The SpecServe policy in the controller slot: the operator's own `specserve.policy.switching.decide`,
unchanged, with its state carried between evaluations exactly as the operator carries it in status."""

from __future__ import annotations

from dataclasses import replace

from specserve.api.models import Action, Mode
from specserve.policy.curves import ModeCurves
from specserve.policy.split import target_weights
from specserve.policy.switching import decide, initial_state
from specserve.policy.traffic import objective
from specserve.policy.types import Knobs, PolicyState, Sample, Verdict
from specserve_tools.simulate.setup import Command, Setup


class SpecServePolicy:
    def __init__(self, knobs: Knobs, curves: ModeCurves | None, initial_mode: Mode, name: str = "SpecServe") -> None:
        self.name = name
        self.knobs, self.curves, self.initial_mode = knobs, curves, initial_mode
        self.state: PolicyState = initial_state(knobs, initial_mode, 0.0)
        self.verdicts: list[Verdict] = []  # the decisions that changed something (the status history)
        self.reads_history = True  # Restart's demand history goes into its Samples (simulate.run)

    def start(self, setup: Setup, demand: float | None) -> Command:
        """TrafficSplit on a closed loop starts at the split its curves hold for the clients at hand: a day is a
        window of continuous operation, and the operator that ran before it holds that split, as the static splits
        and the replayed plan hold theirs from time 0. Started on one pool instead, every client's first request
        landed there at once and ran its whole length at that pool's batch (on seed 7 case 168, a TPOT goal at the
        edge, 1.1 % of the day's goodput, all of the row's gap to the plan). An open loop starts empty."""
        self.state = initial_state(self.knobs, self.initial_mode, 0.0)
        weights = self.state.weights
        if weights is None:
            return Command(mode=self.initial_mode)
        n_s, n_b = setup.speculative_replicas, setup.baseline_replicas
        if demand is not None and demand > 0 and self.curves is not None and n_s > 0 and n_b > 0:
            weights, _ = target_weights(self.curves, demand, n_s, n_b, objective(self.knobs, self.curves).tpot_slo)
            self.state = replace(self.state, weights=weights)
        return Command(speculative_weight=weights.speculative)

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

"""Shared builders for the policy tests: knobs, samples, and the shipped profiles' curves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from specserve.api.curves import Curve
from specserve.api.models import Mode, SpecServe, Strategy
from specserve.api.validation import parse_object
from specserve.policy.curves import ModeCurves
from specserve.policy.switching import decide
from specserve.policy.types import Knobs, PolicyState, PoolSignal, Sample, Verdict
from specserve_tools.emulator.profile import load_profile

ILLUSTRATIVE = "illustrative-crossover-8b"  # speculation wins below 64/replica, baseline above
SEED = "seed-kimi-k25-rtxpro6000"  # speculation never wins


def profile_curves(name: str) -> ModeCurves:
    p = load_profile(name)
    return ModeCurves(speculative=p.speculative, baseline=p.baseline)


def linear_curves(spec: list[tuple[float, float]], base: list[tuple[float, float]]) -> ModeCurves:
    return ModeCurves(speculative=Curve.from_points(spec), baseline=Curve.from_points(base))


def knobs(strategy: Strategy = Strategy.TRAFFIC_SPLIT, **overrides: Any) -> Knobs:
    base = Knobs(
        strategy=strategy,
        crossover=None,
        hysteresis=0.1,
        evaluation_interval=15.0,
        up_stabilization=0.0,
        down_stabilization=0.0,
        min_dwell=0.0,
        max_restarts_per_day=6,
        advisory=False,
        speculative_replicas=1,
        baseline_replicas=1 if strategy is Strategy.TRAFFIC_SPLIT else 0,
        startup_seconds=60.0,
    )
    return replace(base, **overrides)


def sample(t: float, demand: float | None, ready_spec: int = 1, ready_base: int | None = 1, **kw: Any) -> Sample:
    return Sample(
        time=t,
        demand=demand,
        speculative=PoolSignal(ready_replicas=ready_spec),
        baseline=PoolSignal(ready_replicas=ready_base) if ready_base is not None else None,
        **kw,
    )


def run(
    k: Knobs, curves: ModeCurves | None, state: PolicyState, demands: Sequence[float | None], start: float = 0.0
) -> tuple[PolicyState, list[Verdict]]:
    """Feed one demand per evaluation interval; returns the last state and every verdict."""
    verdicts = []
    for i, d in enumerate(demands):
        v = decide(
            k,
            curves,
            state,
            sample(
                start + i * k.evaluation_interval,
                d,
                ready_base=k.baseline_replicas or None,
                ready_spec=k.speculative_replicas,
            ),
        )
        verdicts.append(v)
        state = v.state
    return state, verdicts


def changes(verdicts: list[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.action.value != "Hold"]


def specserve(strategy: Strategy, switching: dict[str, Any] | None = None, **spec: Any) -> SpecServe:
    doc: dict[str, Any] = {
        "apiVersion": "specserve.io/v1alpha1",
        "kind": "SpecServe",
        "metadata": {"name": "t", "namespace": "llm"},
        "spec": {
            "model": {"path": "meta-llama/Llama-3.1-8B-Instruct"},
            "speculative": {"draftModelPath": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
            "strategy": strategy.value,
            "switching": switching or {},
            **({"routing": {"gateway": {"name": "gw"}}} if strategy is Strategy.TRAFFIC_SPLIT else {}),
            **spec,
        },
    }
    return parse_object(doc)


SPEC = Mode.SPECULATIVE
BASE = Mode.BASELINE

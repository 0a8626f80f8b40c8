"""From a SpecServe (or the defaults) and a profile to what a comparison needs: the Setup, the policy's knobs and
curves, exactly as the operator would derive them (policy.knobs.knobs_from_spec, policy.curves.curves_from_spec)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specserve.api.models import CurvePoint, Curves, MetricsSourceKind, Mode, SpecServe, Strategy
from specserve.metrics.promql import horizon_of
from specserve.policy.curves import ModeCurves, crossover, curves_from_spec
from specserve.policy.knobs import knobs_from_spec
from specserve.policy.types import Knobs
from specserve_tools.emulator.profile import Profile
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.run import adaptive_table
from specserve_tools.simulate.setup import Setup

DEFAULT_SLO_TTFT = 5.0  # seconds
DEFAULT_SLO_TPOT = 0.1  # seconds per output token (10 tokens/s per stream)

# The smallest valid SpecServe: every knob at its default. The draft model and the gateway are placeholders the
# simulation never uses (validation requires them for EAGLE-3 and TrafficSplit).
DEFAULT_SPEC: dict[str, Any] = {
    "apiVersion": "specserve.io/v1alpha1",
    "kind": "SpecServe",
    "metadata": {"name": "simulated"},
    "spec": {
        "model": {"path": "simulated-model"},
        "speculative": {"draftModelPath": "simulated-draft"},
        "routing": {"gateway": {"name": "simulated-gateway"}},
    },
}


@dataclass(frozen=True)
class Scenario:
    setup: Setup
    knobs: Knobs
    curves: ModeCurves | None
    notes: list[str] = field(default_factory=list)


def _profile_curves(profile: Profile) -> Curves:
    return Curves(
        speculative=[CurvePoint(concurrency=x, tokens_per_second=y) for x, y in profile.speculative.points()],
        baseline=[CurvePoint(concurrency=x, tokens_per_second=y) for x, y in profile.baseline.points()],
    )


def with_strategy(obj: SpecServe, strategy: Strategy | None) -> SpecServe:
    if strategy is None or strategy is obj.spec.strategy:
        return obj
    return obj.model_copy(update={"spec": obj.spec.model_copy(update={"strategy": strategy})})


def scenario(obj: SpecServe, profile: Profile, slo: Slo, dt: float = 1.0, policy_slo: bool = True) -> Scenario:
    """`policy_slo`: when the spec sets no spec.switching.tpotSloSeconds, give the policy the scoring TPOT SLO as if
    it did (TrafficSplit then maximises goodput), and say so: the operator does the same once the field is set.
    `policy_slo=False` simulates the spec exactly as written."""
    notes: list[str] = []
    spec = obj.spec
    switching = spec.switching
    if switching.curves is None and switching.crossover_concurrency is None:
        # What `specserve calibrate` would write for this deployment; without it the policy only holds initialMode.
        switching = switching.model_copy(update={"curves": _profile_curves(profile)})
        obj = obj.model_copy(update={"spec": spec.model_copy(update={"switching": switching})})
        notes.append(f"the spec has no curves or crossoverConcurrency: using the profile's curves ({profile.name})")
    if switching.tpot_slo_seconds is None and policy_slo:
        switching = switching.model_copy(update={"tpot_slo_seconds": slo.tpot})
        obj = obj.model_copy(update={"spec": obj.spec.model_copy(update={"switching": switching})})
        notes.append(
            f"the policy optimises for the TPOT SLO {slo.tpot:g} s as if spec.switching.tpotSloSeconds were set "
            "(set it in your SpecServe for the same behaviour; --no-policy-slo simulates the spec as written)"
        )
    if profile.accept_schedule:
        low = min(a for _, a in profile.accept_schedule)
        high = max(a for _, a in profile.accept_schedule)
        notes.append(
            f"{profile.name}: the speculative curve drifts with the accept length ({low:g} to {high:g} through the "
            f"day); the policy keeps the curves it was given (measured at {profile.accept_length:g})"
        )
    knobs = knobs_from_spec(obj, startup_seconds=profile.startup_seconds)
    curves = curves_from_spec(obj.spec.switching)
    cross = knobs.crossover if knobs.crossover is not None else (crossover(curves) if curves is not None else None)
    table: dict[int, list[int]] | None = None
    if spec.strategy is Strategy.ADAPTIVE:
        explicit = spec.speculative.adaptive_config
        if explicit is not None:
            table = {int(k): list(v) for k, v in explicit.items()}
        elif cross is not None:
            table = adaptive_table(cross, spec.speculative.num_steps)
    single = spec.strategy is not Strategy.TRAFFIC_SPLIT
    # Restart reads a demand history through Prometheus; the Direct source has none (the reactive rule)
    history = spec.strategy is Strategy.RESTART and switching.metrics.source is not MetricsSourceKind.DIRECT
    setup = Setup(
        strategy=spec.strategy,
        profile=profile,
        speculative_replicas=spec.pools.speculative.replicas,
        baseline_replicas=0 if single else spec.pools.baseline.replicas,
        initial_mode=Mode(switching.initial_mode),
        evaluation_seconds=float(switching.evaluation_interval_seconds),
        scrape_seconds=float(spec.monitoring.interval_seconds),
        slo=slo,
        crossover=cross,
        num_steps=spec.speculative.num_steps,
        adaptive_table=table,
        dt=dt,
        # the live loop's horizon (switching.gather.forecast_horizon), from the start-up the knobs simulate
        forecast_horizon=horizon_of(knobs.startup_seconds + knobs.min_dwell) if history else None,
        restart_budget=knobs.max_restarts_per_day if spec.strategy is Strategy.RESTART else None,
        min_dwell=knobs.min_dwell if spec.strategy is Strategy.RESTART else 0.0,
    )
    if setup.speculative_replicas < 1 or (not single and setup.baseline_replicas < 1):
        notes.append("a pool with 0 replicas serves nothing: the comparison says little")
    return Scenario(setup, knobs, curves, notes)

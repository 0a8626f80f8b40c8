"""From a SpecServe to the policy's knobs (pure)."""

from __future__ import annotations

from specserve.api.models import GpuSharing, SpecServe, Strategy
from specserve.policy.types import Knobs

# What one restart costs in lost serving time when the caller has not measured it from the pods' own last start.
# spec.engine.startupTimeoutSeconds is a timeout (default 3600 s), not an estimate: capped at 10 minutes, about the
# seed deployment's measured 510 s. Overestimating only makes Restart switch later, never more often.
DEFAULT_STARTUP_CAP_SECONDS = 600.0
# spec.switching.minDwellSeconds and downStabilizationSeconds when unset. A Restart or Adaptive switch rolls pods;
# a TrafficSplit one moves weights, and its closed loop (policy.closed_loop) is calmed by the demand's noise: longer
# waits only delay it (docs/simulate.md: 96.4 % of the diurnal day's gain at 300 s, 97.1 % at 60 s).
SLOW_SWITCH_SECONDS = 300
WEIGHT_SWITCH_SECONDS = 60


def _by_strategy(obj: SpecServe, value: int | None) -> int:
    if value is not None:
        return value
    return WEIGHT_SWITCH_SECONDS if obj.spec.strategy is Strategy.TRAFFIC_SPLIT else SLOW_SWITCH_SECONDS


def min_dwell_seconds(obj: SpecServe) -> int:
    return _by_strategy(obj, obj.spec.switching.min_dwell_seconds)


def down_stabilization_seconds(obj: SpecServe) -> int:
    return _by_strategy(obj, obj.spec.switching.down_stabilization_seconds)


def shares_gpus(obj: SpecServe) -> bool:
    """TrafficSplit pools placed on the same GPUs (spec.placement.gpuSharing Shared)."""
    return obj.spec.strategy is Strategy.TRAFFIC_SPLIT and obj.spec.placement.gpu_sharing is GpuSharing.SHARED


def default_startup_seconds(obj: SpecServe) -> float:
    return float(min(obj.spec.engine.startup_timeout_seconds, DEFAULT_STARTUP_CAP_SECONDS))


def knobs_from_spec(obj: SpecServe, startup_seconds: float | None = None, tpot_slo: float | None = None) -> Knobs:
    """`startup_seconds`: measured by the caller (pods' last start to Ready) when known, else the default above.
    `tpot_slo`: a time-per-output-token goal in seconds; defaults to spec.switching.tpotSloSeconds (without one
    the TrafficSplit split maximises tokens/s)."""
    spec = obj.spec
    switching = spec.switching
    return Knobs(
        strategy=spec.strategy,
        crossover=switching.crossover_concurrency,
        hysteresis=switching.hysteresis,
        evaluation_interval=float(switching.evaluation_interval_seconds),
        up_stabilization=float(switching.up_stabilization_seconds),
        down_stabilization=float(down_stabilization_seconds(obj)),
        min_dwell=float(min_dwell_seconds(obj)),
        max_restarts_per_day=switching.max_restarts_per_day,
        advisory=switching.advisory,
        speculative_replicas=spec.pools.speculative.replicas,
        baseline_replicas=spec.pools.baseline.replicas if spec.strategy is Strategy.TRAFFIC_SPLIT else 0,
        startup_seconds=float(startup_seconds) if startup_seconds is not None else default_startup_seconds(obj),
        adaptive_explicit=spec.speculative.adaptive_config is not None,
        tpot_slo=tpot_slo if tpot_slo is not None else switching.tpot_slo_seconds,
        weight_change_cost=switching.weight_change_cost,
        # Restart rolls its one pool (pools.speculative): pods that start before old ones stop discount the cost.
        max_surge=spec.pools.speculative.max_surge if spec.strategy is Strategy.RESTART else 0,
        shared_gpus=shares_gpus(obj),
    )

"""What the demo runs: the embedded SpecServe per strategy, switching knobs scaled by the time compression, and
the demand ramp across the profile's crossover and back (pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specserve.api.models import MetricsSourceKind
from specserve_tools.emulator.profile import Profile

NAMESPACE = "demo"
NAME = "demo-8b"
STRATEGIES = ("TrafficSplit", "Restart", "Adaptive")
CURVE_POINTS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


@dataclass(frozen=True)
class Scenario:
    strategy: str
    profile: Profile
    duration: float  # wall seconds of load
    compression: float  # the operator's time knobs and the pods' start-up are divided by this
    prometheus_url: str

    @property
    def crossover(self) -> float | None:
        return crossover(self.profile)

    @property
    def startup_seconds(self) -> float:
        return self.profile.startup_seconds / self.compression

    def demand_range(self) -> tuple[float, float]:
        """Low and peak demand (requests in flight): well below and well above the crossover of the pools that
        serve. The peak is capped so a 2-core machine keeps up with the streams."""
        cross = self.crossover if self.crossover and self.crossover >= 8 else 64.0  # seed: never wins; same ramp
        return max(2.0, round(cross / 8)), min(160.0, round(cross * 2.5))

    @property
    def max_tokens(self) -> int:
        """Output tokens per request: about 6 s of streaming at the peak's per-stream speed (each of the two pods
        at half the peak), so demand can fall within seconds when the ramp comes down, on any profile."""
        per_pod = self.demand_range()[1] / 2
        speed = min(self.profile.speculative.at(per_pod), self.profile.baseline.at(per_pod)) / per_pod
        return int(min(256, max(32, round(6 * speed))))

    def specserve(self) -> dict[str, Any]:
        return specserve_doc(self)


def crossover(profile: Profile) -> float | None:
    """The first concurrency at which baseline serves at least as many tokens/s as speculation (per replica)."""
    for n in range(1, 257):
        if profile.baseline.at(n) >= profile.speculative.at(n):
            return float(n)
    return None


def _curves(profile: Profile) -> dict[str, list[dict[str, float]]]:
    return {
        mode: [
            {"concurrency": float(n), "tokensPerSecond": round(getattr(profile, mode).at(n), 1)} for n in CURVE_POINTS
        ]
        for mode in ("speculative", "baseline")
    }


def _seconds(real: float, compression: float, minimum: int = 0) -> int:
    return max(minimum, math.ceil(real / compression))


def specserve_doc(s: Scenario) -> dict[str, Any]:
    """The SpecServe the demo applies: an 8B model with EAGLE-3 on one (emulated) H100 per pod."""
    single_pool = s.strategy != "TrafficSplit"
    spec: dict[str, Any] = {
        "model": {"path": s.profile.model_name, "servedName": "demo"},
        "speculative": {
            "algorithm": "EAGLE3",
            "draftModelPath": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
            "numSteps": 3,
            "eagleTopk": 1,
        },
        "engine": {
            "tensorParallelSize": 1,
            "maxRunningRequests": s.profile.max_running_requests,
            "terminationGracePeriodSeconds": 120,
            # The API's floor. The operator prices a restart (Restart strategy) at this many seconds of lost
            # serving when it has not measured one; it is not compressed, so Restart rarely switches in a demo.
            "startupTimeoutSeconds": 60,
        },
        "placement": {"gpusPerPod": 1, "gpuProduct": "NVIDIA-H100-80GB-HBM3"},
        # Single-pool strategies get two replicas so a rolling restart keeps one serving.
        "pools": {"speculative": {"replicas": 2}, "baseline": {"replicas": 0}}
        if single_pool
        else {"speculative": {"replicas": 1}, "baseline": {"replicas": 1}},
        "strategy": s.strategy,
        "routing": {"gateway": {"name": "demo-gateway"}},
        "monitoring": {"podMonitor": True, "intervalSeconds": 1},
        "switching": {
            "hysteresis": 0.1,
            # The API's floor is 5 s; everything else is the default divided by the compression.
            "evaluationIntervalSeconds": _seconds(15, s.compression, minimum=5),
            "upStabilizationSeconds": 0,
            "downStabilizationSeconds": _seconds(300, s.compression),
            "minDwellSeconds": _seconds(300, s.compression),
            "metrics": {"source": MetricsSourceKind.PROMETHEUS.value, "prometheusUrl": s.prometheus_url},
            "curves": _curves(s.profile),
            # Where speculation never wins (the seed profile), a calibrated SpecServe starts on baseline.
            "initialMode": "Speculative" if (s.crossover or 0) > 1 else "Baseline",
        },
    }
    if s.crossover is not None:
        spec["switching"]["crossoverConcurrency"] = s.crossover
    return {
        "apiVersion": "specserve.io/v1alpha1",
        "kind": "SpecServe",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": spec,
    }

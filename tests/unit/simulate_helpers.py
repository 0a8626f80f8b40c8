"""A tiny profile whose arithmetic is easy, and a deployment of it, for the simulation's tests."""

from __future__ import annotations

from specserve.api.curves import Curve
from specserve.api.models import Mode, Strategy
from specserve_tools.emulator.profile import Profile
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.setup import Setup

# Per replica: speculation 20 tok/s per stream up to batch 4 then 80 -> 90 at 10; baseline 10 per stream up to 4
# then 40 -> 100 at 10. They cross at batch 8.8. Cap 10: beyond it requests queue.
TINY = Profile(
    name="tiny",
    model_name="tiny",
    speculative=Curve.from_points([(1, 20.0), (4, 80.0), (10, 90.0)]),
    baseline=Curve.from_points([(1, 10.0), (4, 40.0), (10, 100.0)]),
    startup_seconds=30.0,
    max_running_requests=10,
    ttft_seconds=0.1,
)


def tiny_setup(strategy: Strategy, spec: int = 1, base: int = 0, tpot: float = 10.0) -> Setup:
    """`spec` speculative and `base` baseline replicas of TINY; a lenient TTFT SLO (goodput is what is served
    within the TPOT SLO, 10 s per token by default: everything)."""
    return Setup(strategy, TINY, spec, base, Mode.SPECULATIVE, 15.0, 15.0, Slo(1000.0, tpot), 8.8, 3, None)

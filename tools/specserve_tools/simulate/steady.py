"""The fluid model's steady state over one evaluation interval: what a set of Ready replicas serves, and how much
of it meets the SLOs, at a given load. The offline optimum and the fixed-split search plan with it; the runs
themselves are always the step-by-step simulation (cluster.py).

Closed loop: C clients on R Ready replicas: min(C, R x cap) run, b = running / R per replica, the rest queue and
wait queued x mean output / tokens/s (Little). Open loop: D output tokens/s arrive; the batch b solves
sum(T(b)) = D; beyond the capacity at the cap the queue grows without bound and nothing meets the TTFT SLO."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specserve_tools.emulator.engine import Mode as EngineMode
from specserve_tools.emulator.profile import Profile
from specserve_tools.simulate.cluster import AdaptiveTable, Slo, serving_function

Group = tuple[int, Callable[[float], float]]  # (Ready replicas, per-replica tokens/s at a batch)


@dataclass(frozen=True)
class Rates:
    served: float  # tokens/s
    good: float  # tokens/s meeting both SLOs


NOTHING = Rates(0.0, 0.0)


def groups_of(profile: Profile, counts: Sequence[tuple[EngineMode, int]], adaptive: AdaptiveTable | None = None
              ) -> list[Group]:  # fmt: skip
    return [(n, serving_function(profile, mode, adaptive)) for mode, n in counts if n > 0]


def _at(groups: Sequence[Group], batch: float, slo: Slo) -> tuple[float, float]:
    total = ok = 0.0
    for count, rate in groups:
        tps = count * rate(batch)
        total += tps
        if tps > 0 and batch * count / tps <= slo.tpot:
            ok += tps
    return total, ok


def closed_loop(groups: Sequence[Group], clients: float, profile: Profile, slo: Slo, tokens_per_request: float
                ) -> Rates:  # fmt: skip
    replicas = sum(n for n, _ in groups)
    if clients <= 0 or replicas == 0:
        return NOTHING
    running = min(clients, replicas * profile.max_running_requests)
    total, ok = _at(groups, running / replicas, slo)
    queued = clients - running
    wait = queued * tokens_per_request / total if total > 0 else float("inf")
    return Rates(total, ok if wait + profile.ttft_seconds <= slo.ttft else 0.0)


def open_loop(groups: Sequence[Group], demand: float, profile: Profile, slo: Slo, iterations: int = 40) -> Rates:
    """`demand`: output tokens/s arriving."""
    replicas = sum(n for n, _ in groups)
    if demand <= 0:
        return NOTHING
    if replicas == 0:
        return NOTHING
    cap = float(profile.max_running_requests)
    top, _ = _at(groups, cap, slo)
    if top < demand:
        return Rates(top, 0.0)
    lo, hi = 0.0, cap
    for _ in range(iterations):  # the batch at which the replicas serve what arrives (throughput grows with the batch)
        mid = (lo + hi) / 2
        if _at(groups, mid, slo)[0] < demand:
            lo = mid
        else:
            hi = mid
    total, ok = _at(groups, hi, slo)
    fraction = ok / total if total > 0 else 0.0
    good = demand * fraction if profile.ttft_seconds <= slo.ttft else 0.0
    return Rates(demand, good)

"""What the demo saw, once a second: demand, weights, mode, readiness, tok/s and failures (pure data + helpers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Sample:
    t: float  # seconds since the load started
    demand: float  # requests the load generator wants in flight
    in_flight: int
    weights: dict[str, int]  # pool role (speculative/baseline) -> route weight
    mode: str | None  # status.activeMode
    ready: dict[str, str]  # pool role -> "ready/desired"
    tok_s: float
    failed: int  # failed requests so far
    operator_demand: float | None = None  # status.load.concurrency: the demand of the operator's last decision
    prometheus_demand: float | None = None  # running + queued across the pods, as Prometheus has it now
    draft_steps: float | None = None  # mean sglang:spec_num_steps of the speculative pods (0: drafting off)


@dataclass
class Timeline:
    samples: list[Sample] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)  # new status.history entries, in order seen
    pod_pool: dict[str, str] = field(default_factory=dict)  # pod -> pool role, for every pod that ever ran

    def add_decisions(self, history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Record the history entries not seen yet; return them (for the live view)."""
        seen = {_key(d) for d in self.decisions}
        new = [dict(d) for d in history if _key(d) not in seen]
        self.decisions.extend(new)
        return new


def _key(decision: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(decision.get("time")), str(decision.get("toMode")), str(decision.get("reason")))


def role_of(labels: Mapping[str, str]) -> str:
    return labels.get("specserve.io/pool", "?")


def weights_by_role(route_weights: Mapping[str, int], roles: Mapping[str, str]) -> dict[str, int]:
    return {roles.get(name, name): weight for name, weight in route_weights.items()}

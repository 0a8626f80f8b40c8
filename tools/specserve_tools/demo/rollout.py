"""Pods as the demo's kubelet sees them, and one step of a Deployment's RollingUpdate (pure)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from specserve_tools.demo.kubeapi import JSON
from specserve_tools.demo.procs import Child


class Phase(StrEnum):
    STARTING = "Starting"
    READY = "Ready"
    TERMINATING = "Terminating"


@dataclass
class Pod:
    name: str
    deployment: str
    template_hash: str
    labels: dict[str, str]
    port: int
    child: Child
    phase: Phase = Phase.STARTING
    started: float = field(default_factory=time.monotonic)
    ready_at: float | None = None
    host: str = "127.0.0.1"  # the pod's address (its IP); the emulator pods share 127.0.0.1 on their own ports

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def template_hash(deployment: JSON) -> str:
    template = deployment.get("spec", {}).get("template", {})
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def _int_or_percent(value: Any, replicas: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = replicas * float(value[:-1]) / 100
        return int(-(-share // 1)) if round_up else int(share)
    return int(value or 0)


def rollout_limits(deployment: JSON) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as pod counts; Kubernetes rounds surge up and unavailable down."""
    spec = deployment.get("spec", {})
    replicas = int(spec.get("replicas", 1))
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    surge = _int_or_percent(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = _int_or_percent(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # what the API server would have refused; never deadlock the demo
    return surge, unavailable


@dataclass(frozen=True)
class PodChanges:
    """What one step of a RollingUpdate does to a Deployment's pods."""

    start: int  # new pods to start
    stop: tuple[str, ...]  # pods to terminate


def plan_rollout(replicas: int, surge: int, unavailable: int, current_hash: str, pods: list[Pod]) -> PodChanges:
    """One step of a RollingUpdate (pure): start new pods within the surge, stop old (then excess) pods while
    enough Ready pods remain. Unready old pods go first: stopping them costs no capacity."""
    live = [p for p in pods if p.phase != Phase.TERMINATING]
    holding = len(pods)  # terminating pods still hold their GPU
    new = [p for p in live if p.template_hash == current_hash]
    old = [p for p in live if p.template_hash != current_hash]
    start = max(0, min(replicas - len(new), replicas + surge - holding))
    ready = sum(p.phase == Phase.READY for p in live)
    floor = replicas - unavailable
    stop: list[str] = []
    for pod in sorted(old, key=lambda p: p.phase == Phase.READY):
        if pod.phase != Phase.READY:
            stop.append(pod.name)
        elif ready - 1 >= floor:
            stop.append(pod.name)
            ready -= 1
    excess = len(new) - replicas  # a scale-down: no availability floor, as in Kubernetes
    if excess > 0:
        stop.extend(p.name for p in sorted(new, key=lambda p: p.phase == Phase.READY)[:excess])
    return PodChanges(start, tuple(stop))

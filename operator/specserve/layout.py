"""The operator's vocabulary for the objects it owns (pure): label names, pool roles, pool names, and which pools a
SpecServe runs in a mode. Rendering, the metrics readers, the switching loop and the reconcile all read it here,
so they agree on every name without rendering anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from specserve.api.models import Autoscaling, Mode, PoolSpec, SpecServe, Strategy

MANAGED_BY = "specserve"
# The field managers this operator writes with (server-side apply), each owning its own fields. Every one starts
# with MANAGED_BY: a manager of another prefix is someone else (specserve.pool_state tells them apart).
MANAGER = MANAGED_BY  # the reconcile: the children it renders and its status fields
SWITCHING_MANAGER = f"{MANAGED_BY}-switching"  # the switching loop's status fields
# Holds spec.replicas while MANAGER lets go of it (Kubernetes "Server-Side Apply: Transferring ownership"): the
# field is never left without a manager, so the server never resets it to its default.
HANDOVER_MANAGER = f"{MANAGED_BY}-handover"
LABEL_INSTANCE = "specserve.io/instance"
LABEL_POOL = "specserve.io/pool"
LABEL_MODE = "specserve.io/mode"


class PoolRole:
    SPECULATIVE = "speculative"
    BASELINE = "baseline"
    ENGINE = "engine"  # the single pool of Restart and Adaptive


@dataclass(frozen=True)
class Flavour:
    """How one pool runs the engine."""

    speculative: bool
    adaptive: bool = False

    @property
    def mode_label(self) -> str:
        if self.adaptive:
            return "adaptive"
        return "speculative" if self.speculative else "baseline"


@dataclass(frozen=True)
class PoolLayout:
    """One pool as the vocabulary knows it: its role, name, shape and flavour (no command line)."""

    role: str
    name: str
    shape: PoolSpec
    flavour: Flavour

    @property
    def replicas(self) -> int:
        return self.shape.replicas

    @property
    def external_replicas(self) -> bool:  # an HPA/KEDA owns spec.replicas
        return self.shape.autoscaling == Autoscaling.EXTERNAL


def base_labels(name: str) -> dict[str, str]:
    # No app.kubernetes.io/instance: Argo CD's label tracking reads it as "belongs to the Application of
    # that name" and would prune these objects. specserve.io/instance says which SpecServe owns them.
    return {
        "app.kubernetes.io/name": "sglang",
        "app.kubernetes.io/component": "inference-engine",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_INSTANCE: name,
    }


def pool_name(name: str, role: str) -> str:
    suffix = {PoolRole.SPECULATIVE: "spec", PoolRole.BASELINE: "base", PoolRole.ENGINE: "engine"}[role]
    return f"{name}-{suffix}"


def pool_layout(obj: SpecServe, mode: Mode) -> list[PoolLayout]:
    """The pools a SpecServe runs in `mode` (the mode only matters to Restart, which has one pool)."""
    spec, name = obj.spec, obj.metadata.name
    shapes: list[tuple[str, PoolSpec, Flavour]]
    if spec.strategy == Strategy.TRAFFIC_SPLIT:
        shapes = [
            (PoolRole.SPECULATIVE, spec.pools.speculative, Flavour(speculative=True)),
            (PoolRole.BASELINE, spec.pools.baseline, Flavour(speculative=False)),
        ]
    elif spec.strategy == Strategy.RESTART:
        shapes = [(PoolRole.ENGINE, spec.pools.speculative, Flavour(speculative=mode == Mode.SPECULATIVE))]
    else:
        shapes = [(PoolRole.ENGINE, spec.pools.speculative, Flavour(speculative=True, adaptive=True))]
    return [PoolLayout(role, pool_name(name, role), shape, flavour) for role, shape, flavour in shapes]

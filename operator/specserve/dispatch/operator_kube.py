"""The operator's client as its parts use it, and where they find it: kopf's memo carries it (commands.supervisor
injects it beside the reconcile slots; each object's memo is a shallow copy of that one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, cast

from specserve.reconcile.failover import Lister
from specserve.switching.loop import LoopKube

KUBE = "kube"  # kopf's memo: the operator's client


class OperatorKube(Lister, LoopKube, Protocol):
    """The operator's client as its parts use it (specserve.kube.client.KubeClient): the reconcile's calls and
    the failover's LIST, the switching loop's, Events, and a lane of connections of its own for the failover."""

    def lane(self) -> OperatorKube: ...
    async def close(self) -> None: ...


def kube_of(shared: Mapping[str, Any]) -> OperatorKube:
    """The client among the shared objects (kopf's memo, or what the Dispatcher was given at start)."""
    return cast(OperatorKube, shared[KUBE])

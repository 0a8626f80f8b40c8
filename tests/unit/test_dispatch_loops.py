"""The loops beside kopf (dispatch.loops): the switching loop reads and writes on connections of its own."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from specserve.config import OperatorConfig
from specserve.dispatch.loops import Loops
from specserve.kube.kinds import DEPLOYMENT, Kind
from specserve.objects import Objects, ObjectState
from specserve.reconcile import Outcome
from specserve.switching.gather import MANAGED
from tests.unit.test_switching_loop import body_of

JSON = dict[str, Any]


@dataclass
class Client:
    """An OperatorKube that records its calls; its lane() is another such client."""

    name: str
    lists: list[tuple[Kind, dict[str, str]]] = field(default_factory=list)
    lanes: list[Client] = field(default_factory=list)
    closed: bool = False

    async def list(self, kind: Kind, namespace: str, labels: dict[str, str] | None = None) -> list[JSON]:
        self.lists.append((kind, dict(labels or {})))
        return []

    async def apply_status(self, *args: Any, **kwargs: Any) -> JSON:
        return {}

    async def post_event(self, *args: Any, **kwargs: Any) -> None:
        return None

    def lane(self) -> Client:
        self.lanes.append(Client(f"{self.name}-lane"))
        return self.lanes[-1]

    async def close(self) -> None:
        self.closed = True

    def __getattr__(self, attribute: str) -> Any:  # whatever else the resync loop reads: nothing there
        async def nothing(*args: Any, **kwargs: Any) -> list[JSON]:
            return []

        return nothing


async def test_the_switching_loop_lists_and_writes_on_its_own_connections(kimi_doc: JSON) -> None:
    """In the shared pool each decision's urgent reconcile lists seven kinds at once, and a round's status writes
    queued behind them (docs/chaos-soak.md, fourth real-plane run): the loop has a lane, closed with it."""
    objects = Objects()
    objects.observe(body_of(kimi_doc, "one"))
    shared = Client("shared")

    async def run_once(state: ObjectState, urgent: bool) -> Outcome | None:
        return None

    config = OperatorConfig(namespaces=("specserve-test",), resync_seconds=3600)
    loops = Loops.start(objects, shared, config, run_once)
    try:
        assert len(shared.lanes) == 1 and loops.loop.kube is shared.lanes[0]
        lane = shared.lanes[0]
        for _ in range(200):  # the first round lists the pools' Deployments
            if (DEPLOYMENT, MANAGED) in lane.lists:
                break
            await asyncio.sleep(0.05)
        assert (DEPLOYMENT, MANAGED) in lane.lists
        assert (DEPLOYMENT, MANAGED) not in shared.lists
    finally:
        loops.halt()
        await loops.join()
    assert lane.closed and not shared.closed  # the shared client is the operator's to close

"""The resync loop: every tracked SpecServe reconciled once a round, failures isolated, stopped by its flag."""

from __future__ import annotations

import asyncio
import logging

import pytest

from specserve.kube.client import KubeError
from specserve.resync import phase, resync_forever, resync_round
from specserve.switching.loop import Registry, Tracked


def registry(*names: str) -> Registry:
    out = Registry()
    for name in names:
        out.update({"metadata": {"namespace": "llm", "name": name}}, {})
    return out


def name_of(item: Tracked) -> str:
    return str(item.body["metadata"]["name"])


def test_a_round_reconciles_every_tracked_specserve_and_one_failure_spares_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    done: list[str] = []

    async def reconcile(item: Tracked) -> None:
        if name_of(item) == "b":
            raise KubeError(500, "GET /api/v1/namespaces/llm/services: HTTP 500: etcd timeout")
        if name_of(item) == "c":
            raise ZeroDivisionError("a bug")
        done.append(name_of(item))

    with caplog.at_level(logging.WARNING, logger="specserve.resync"):
        failed = asyncio.run(resync_round(registry("a", "b", "c", "d"), reconcile))
    assert failed == 2 and sorted(done) == ["a", "d"]
    by_name = {r.getMessage().split(" ")[2]: r for r in caplog.records}
    assert "HTTP 500: etcd timeout" in by_name["llm/b"].getMessage() and by_name["llm/b"].exc_info is None
    assert by_name["llm/c"].exc_info is not None  # a bug keeps its traceback


def test_a_specserve_forgotten_before_the_round_is_not_reconciled() -> None:
    tracked = registry("a", "gone")
    tracked.forget({"metadata": {"namespace": "llm", "name": "gone"}})
    done: list[str] = []

    async def reconcile(item: Tracked) -> None:
        done.append(name_of(item))

    asyncio.run(resync_round(tracked, reconcile))
    assert done == ["a"]


def test_rounds_come_every_interval_not_at_the_start_and_stop_with_the_flag() -> None:
    rounds: list[float] = []

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        started = loop.time()

        async def reconcile(_: Tracked) -> None:
            rounds.append(loop.time() - started)
            if len(rounds) == 3:
                stop.set()

        await asyncio.wait_for(resync_forever(registry("a"), reconcile, 0.05, stop), timeout=5)

    asyncio.run(main())
    assert len(rounds) == 3
    assert rounds[0] >= 0.05  # the start-up reconciled everything already: the first round waits an interval


def test_a_stop_during_the_wait_ends_the_loop_without_another_round() -> None:
    called: list[Tracked] = []

    async def reconcile(item: Tracked) -> None:
        called.append(item)

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(resync_forever(registry("a"), reconcile, 3600, stop))
        await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, timeout=5)

    asyncio.run(main())
    assert called == []


def test_a_spread_round_reconciles_in_phase_order_and_each_phase_is_stable_within_the_interval() -> None:
    names = [f"s{i}" for i in range(20)]
    tracked = registry(*names)
    order: list[str] = []

    async def reconcile(item: Tracked) -> None:
        order.append(name_of(item))

    asyncio.run(resync_round(tracked, reconcile, spread=0.2))
    phases = {name_of(i): phase(i, 0.2) for i in tracked.items.values()}
    assert sorted(order) == sorted(names)
    assert order == sorted(names, key=phases.__getitem__)  # spread over the interval, not one burst
    assert all(0 <= p < 0.2 for p in phases.values())
    assert len(set(phases.values())) > 1
    assert phases == {name_of(i): phase(i, 0.2) for i in registry(*names).items.values()}  # stable


def test_a_stop_mid_round_launches_no_more_reconciles() -> None:
    tracked = registry(*(f"s{i}" for i in range(50)))
    done: list[str] = []

    async def main() -> None:
        stop = asyncio.Event()

        async def reconcile(item: Tracked) -> None:
            done.append(name_of(item))
            if len(done) == 3:
                stop.set()

        await asyncio.wait_for(resync_round(tracked, reconcile, spread=0.5, stop=stop), timeout=5)

    asyncio.run(main())
    assert len(done) == 3

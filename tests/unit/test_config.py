"""OperatorConfig, the `specserve run` flags, the kopf settings, and the registry policies applied in serve()."""

from __future__ import annotations

import argparse
import asyncio
import copy
import logging
from collections.abc import Callable, Coroutine
from typing import Any, cast

import kopf
import pytest

from specserve.commands.run import add_arguments, client_options, config_from
from specserve.commands.supervisor import build_registry
from specserve.config import ANNOTATIONS_PREFIX, FINALIZER, LeanDiffBaseStorage, OperatorConfig, kopf_settings
from specserve.kopf_errors import kube_errors_are_temporary
from specserve.kube.client import KubeError
from specserve.reconcile import Outcome
from specserve.slots import MEMO_KEY, Slots, slot


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_flags_reach_the_config() -> None:
    config = config_from(parse("-n", "llm", "--max-concurrent-reconciles", "3", "--api-timeout-seconds", "7"))
    assert config.namespaces == ("llm",)
    assert config.max_concurrent_reconciles == 3 and config.api_timeout_seconds == 7
    assert config.leader_election is None  # off unless asked for
    options = client_options(config)
    assert options.request_timeout == 7 and options.connection_limit >= 2 * 3


def test_leader_election_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "specserve-7d9f-abcde")
    config = config_from(parse("--leader-elect", "--leader-election-namespace", "ops", "--lease-seconds", "30"))
    election = config.leader_election
    assert election is not None
    assert (election.namespace, election.identity, election.lease_seconds) == ("ops", "specserve-7d9f-abcde", 30)
    assert election.retry_seconds < election.renew_deadline_seconds < election.lease_seconds


def test_leader_election_needs_a_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    with pytest.raises(ValueError, match="namespace"):
        config_from(parse("--leader-elect", "--leader-election-namespace", ""))


@pytest.mark.parametrize("bad", [{"max_concurrent_reconciles": 0}, {"api_timeout_seconds": 0}])
def test_invalid_bounds_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        OperatorConfig(**bad)


def test_kopf_settings_bound_kopf_calls_too() -> None:
    settings = kopf_settings(OperatorConfig(api_timeout_seconds=12, api_connect_timeout_seconds=3))
    assert settings.networking.request_timeout == 12 and settings.networking.connect_timeout == 3
    assert settings.persistence.finalizer == FINALIZER  # the old name: kopf removes it where it finds it
    assert settings.queueing.worker_limit is None


@pytest.mark.parametrize("extra", [None, ["spec"], ["status.switching"], ["metadata.name"]])
def test_the_diff_base_is_kopfs_own_essence(extra: list[str] | None) -> None:
    body: dict[str, Any] = {
        "apiVersion": "specserve.io/v1alpha1", "kind": "SpecServe",
        "metadata": {"name": "a", "labels": {"x": "y"}, "managedFields": [{"manager": "m"}], "annotations": {
            "specserve.io/last-handled-configuration": "{}", "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "team": "llm"}},
        "spec": {"engine": {"image": "i"}}, "status": {"switching": {"mode": "Baseline"}, "load": {}},
    }  # fmt: skip
    kopfs = kopf.AnnotationsDiffBaseStorage(prefix=ANNOTATIONS_PREFIX, key="last-handled-configuration")
    lean = LeanDiffBaseStorage(prefix=ANNOTATIONS_PREFIX, key="last-handled-configuration")
    expected = kopfs.build(body=kopf.Body(cast(kopf.RawBody, copy.deepcopy(body))), extra_fields=extra)
    assert lean.build(body=kopf.Body(cast(kopf.RawBody, copy.deepcopy(body))), extra_fields=extra) == expected


def test_no_handler_of_the_operator_requires_a_finalizer_and_kopf_runs_no_timer_per_object() -> None:
    async def build() -> kopf.OperatorRegistry:  # the switching loop's handlers want a running loop
        return build_registry(OperatorConfig())

    registry = asyncio.run(build())
    changing: list[Any] = list(registry._changing.get_all_handlers())
    assert changing, "the change handlers are registered"
    assert all(not h.requires_finalizer for h in changing)
    # The resync is specserve.resync's one task: a kopf timer would hold a finalizer and a body per object.
    assert list(registry._spawning.get_all_handlers()) == []


def test_reconciles_share_a_bounded_number_of_slots() -> None:
    running, most = 0, 0

    async def reconcile(memo: kopf.Memo) -> None:
        nonlocal running, most
        async with slot(memo):
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)
            running -= 1

    async def main() -> None:
        shared = kopf.Memo({MEMO_KEY: Slots(3)})
        per_object = [copy.copy(shared) for _ in range(20)]  # what kopf hands each object
        await asyncio.gather(*(reconcile(memo) for memo in per_object for _ in range(2)))

    asyncio.run(main())
    assert most == 3


def test_background_reconciles_never_take_the_reserved_slots_and_urgent_ones_go_first() -> None:
    order: list[str] = []

    async def main() -> None:
        slots = Slots(4)  # one slot reserved for urgent reconciles
        gate = asyncio.Event()
        running: list[str] = []

        async def reconcile(name: str, urgent: bool) -> None:
            async with slots.hold(urgent):
                running.append(name)
                order.append(name)
                await gate.wait()
                running.remove(name)

        round_ = [asyncio.create_task(reconcile(f"resync-{i}", False)) for i in range(10)]
        await asyncio.sleep(0.01)
        assert sorted(running) == ["resync-0", "resync-1", "resync-2"]  # a round fills 3 of 4 slots, no more
        failover = asyncio.create_task(reconcile("failover", True))
        await asyncio.sleep(0.01)
        assert "failover" in running  # the reserved slot: it does not wait for the round at all
        late = asyncio.create_task(reconcile("switch", True))  # all 4 busy now: it queues...
        await asyncio.sleep(0.01)
        gate.set()
        await asyncio.gather(*round_, failover, late)
        assert slots.busy == 0 and slots.background_busy == 0

    asyncio.run(main())
    # ...but ahead of the 7 resync reconciles that were waiting before it.
    assert order.index("switch") < order.index("resync-3")


def test_a_cancelled_waiter_leaks_no_slot() -> None:
    async def main() -> None:
        slots = Slots(2, reserved=1)
        gate = asyncio.Event()

        async def hold(urgent: bool) -> None:
            async with slots.hold(urgent):
                await gate.wait()

        first = asyncio.create_task(hold(False))
        waiting = [asyncio.create_task(hold(False)) for _ in range(3)]
        await asyncio.sleep(0.01)
        for task in waiting:
            task.cancel()
        gate.set()
        await asyncio.gather(first, *waiting, return_exceptions=True)
        assert slots.busy == 0
        async with slots.hold(False):  # the lane is free again
            assert slots.background_busy == 1

    asyncio.run(main())


def test_no_slots_in_the_memo_means_no_bound() -> None:
    async def main() -> None:
        async with slot(kopf.Memo()):
            pass

    asyncio.run(main())


def test_kube_errors_reach_kopf_as_temporary_errors_and_bugs_keep_their_traceback() -> None:
    registry = kopf.OperatorRegistry()

    temporary = kube_errors_are_temporary(delay=7)

    @kopf.on.create("example.com", "v1", "things", registry=registry)
    @temporary
    async def failing(**_: Any) -> None:
        raise KubeError(503, "GET /apis/x: HTTP 503: busy")

    @kopf.timer("example.com", "v1", "things", interval=1, registry=registry)
    @temporary
    async def buggy(**_: Any) -> None:
        raise ZeroDivisionError

    (create,) = registry._changing.get_all_handlers()
    (timer,) = registry._spawning.get_all_handlers()
    create_fn: Callable[..., Coroutine[Any, Any, None]] = create.fn  # type: ignore[assignment]
    timer_fn: Callable[..., Coroutine[Any, Any, None]] = timer.fn  # type: ignore[assignment]
    with pytest.raises(kopf.TemporaryError) as caught:
        asyncio.run(create_fn())
    assert caught.value.delay == 7 and "HTTP 503: busy" in str(caught.value)
    with pytest.raises(ZeroDivisionError):
        asyncio.run(timer_fn())


def test_the_read_timeout_bounds_a_whole_read() -> None:
    config = config_from(parse("--read-timeout-seconds", "3"))
    assert config.read_timeout_seconds == 3 and client_options(config).read_timeout == 3
    with pytest.raises(ValueError, match="positive"):
        OperatorConfig(read_timeout_seconds=0)


class Gated:
    """The operator's change handlers over a reconcile that records each call and waits for `gate`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        self.gate = asyncio.Event()

        async def fake_reconcile(kube: Any, body: Any, **_: Any) -> Outcome:
            self.calls.append(body["metadata"]["name"])
            await self.gate.wait()
            return Outcome()

        monkeypatch.setattr("specserve.dispatch.lanes.reconcile", fake_reconcile)

    @staticmethod
    def handlers() -> dict[str, Callable[..., Coroutine[Any, Any, None]]]:
        registry = build_registry(OperatorConfig())
        return {h.id.rsplit(".", 1)[-1]: h.fn for h in registry._changing.get_all_handlers()}  # type: ignore[misc]


def test_urgent_triggers_queued_for_one_object_coalesce_and_background_work_skips_a_busy_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gated = Gated(monkeypatch)
    calls, gate = gated.calls, gated.gate

    async def main() -> None:
        fns = gated.handlers()
        on_change, on_resume = fns["on_change"], fns["on_resume"]
        memo = kopf.Memo({"kube": object(), MEMO_KEY: Slots(4)})
        body = {"metadata": {"namespace": "llm", "name": "kimi", "uid": "u"}, "spec": {}}
        logger = logging.getLogger("test")
        running = asyncio.create_task(on_change(body=body, memo=memo, logger=logger))
        await asyncio.sleep(0.01)  # reconciling
        queued = [asyncio.create_task(on_change(body=body, memo=memo, logger=logger)) for _ in range(3)]
        background = asyncio.create_task(on_resume(body=body, memo=memo, logger=logger))
        await asyncio.sleep(0.01)
        assert background.done()  # the object is being reconciled: a resync-lane pass has nothing to add
        gate.set()
        await asyncio.gather(running, *queued, background)

    asyncio.run(main())
    assert calls == ["kimi", "kimi"]  # the running one, then one for the three queued behind it


def test_background_reconciles_waiting_for_a_slot_coalesce(monkeypatch: pytest.MonkeyPatch) -> None:
    gated = Gated(monkeypatch)
    calls, gate = gated.calls, gated.gate

    async def main() -> None:
        fns = gated.handlers()
        slots = Slots(1)
        logger = logging.getLogger("test")

        def memo() -> kopf.Memo:
            return kopf.Memo({"kube": object(), MEMO_KEY: slots})

        def body(name: str) -> dict[str, Any]:
            return {"metadata": {"namespace": "llm", "name": name, "uid": name}, "spec": {}}

        busy = asyncio.create_task(fns["on_resume"](body=body("a"), memo=memo(), logger=logger))
        await asyncio.sleep(0.01)  # "a" holds the only slot
        b = memo()  # one object: kopf hands its handlers the same memo
        first = asyncio.create_task(fns["on_resume"](body=body("b"), memo=b, logger=logger))
        await asyncio.sleep(0.01)
        again = asyncio.create_task(fns["on_resume"](body=body("b"), memo=b, logger=logger))  # e.g. a resync round
        await asyncio.sleep(0.01)
        assert again.done() and not first.done()  # the queued one will read the latest state: nothing to add
        gate.set()
        await asyncio.gather(busy, first, again)
        after = asyncio.create_task(fns["on_resume"](body=body("b"), memo=b, logger=logger))
        await after  # nothing queued any more: it runs

    asyncio.run(main())
    assert calls == ["a", "b", "b"]

"""What the operator holds of each SpecServe (specserve.objects): one state per object, its body changed only
through the staleness guard, and deletion one forget that leaves nothing behind anywhere."""

from __future__ import annotations

import copy
import math
from typing import Any, cast

import kopf
import pytest

from specserve import telemetry
from specserve.api.models import Mode
from specserve.api.validation import parse_object
from specserve.config import OperatorConfig
from specserve.dispatch import Dispatcher
from specserve.objects import Memory, Objects
from specserve.policy.types import PolicyState
from specserve.reconcile import rendered
from specserve.reconcile.rollout import DesiredPool, LivePool, World, plan
from specserve.render import render

NS = "llm"


def specserve(kimi_doc: dict[str, Any], name: str = "kimi-k25", uid: str = "uid-1", rv: str = "5") -> dict[str, Any]:
    body = copy.deepcopy(kimi_doc)
    body["metadata"] = {"name": name, "namespace": NS, "uid": uid, "generation": 1, "resourceVersion": rv}
    return body


def event(type_: str, body: dict[str, Any]) -> tuple[kopf.RawEvent, kopf.Body]:
    """A watch event as kopf hands it to the SpecServe event handler."""
    raw = cast(kopf.RawBody, body)
    return {"type": cast(Any, type_), "object": raw}, kopf.Body(raw)


def demand_series(key: tuple[str, str]) -> list[Any]:
    samples = [s for metric in telemetry.DEMAND.collect() for s in metric.samples]
    return [s for s in samples if (s.labels["namespace"], s.labels["name"]) == key]


def test_a_body_older_than_the_one_held_is_refused_whoever_brings_it() -> None:
    objects = Objects()
    state = objects.observe({"metadata": {"namespace": NS, "name": "a", "uid": "u", "resourceVersion": "12"}})
    assert not state.observe({"metadata": {"namespace": NS, "name": "a", "uid": "u", "resourceVersion": "11"}})
    assert objects.observe({"metadata": {"namespace": NS, "name": "a", "uid": "u", "resourceVersion": "10"}}) is state
    assert state.body["metadata"]["resourceVersion"] == "12"
    assert state.observe({"metadata": {"namespace": NS, "name": "a", "uid": "u", "resourceVersion": "13"}})
    assert state.body["metadata"]["resourceVersion"] == "13"
    assert objects.named((NS, "a")) is objects.get("u") is state


def rolling_world(pool: str) -> World:
    live = LivePool(
        name=pool, template_current=False, generation=2, observed_generation=2, spec_replicas=1, replicas=1, ready=0,
        updated=0,
    )  # fmt: skip
    return World(
        desired=(DesiredPool(pool, 1, "new"),), live={pool: live}, route=False, live_route=None,
        target_weights={pool: 100}, roll_slots=2,
    )  # fmt: skip


def test_deleting_a_specserve_is_one_forget_that_leaves_no_state_anywhere(
    kimi_doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ops = Dispatcher(OperatorConfig(max_concurrent_rolls=2))
    body = specserve(kimi_doc)
    key = (NS, "kimi-k25")
    ops.track(*event("ADDED", body))
    state = ops.objects.get("uid-1")
    assert state is not None
    # What every part of the operator remembers of it: pools, the resync's clean mark, the switching loop's memory,
    # the roll budget, the render cache, the per-object metrics; and pools of a SpecServe not seen yet.
    state.pools["kimi-k25-spec"] = True
    state.clean = (("print", "5"), 0)
    live = PolicyState(mode=Mode.BASELINE, mode_since=0.0)
    state.loop.due, state.loop.policy = 100.0, Memory(persisted=None, live=live)
    world = rolling_world("kimi-k25-spec")
    ops.rolls.record(key, world, plan(world))
    assert key in ops.rolls.rolling
    obj = parse_object(body)
    rendered.remembered_render(obj, Mode.BASELINE)
    telemetry.DEMAND.labels(*key).set(3.0)
    assert demand_series(key)
    ops.objects.early_pools("uid-unseen")["other-spec"] = False

    ops.track(*event("DELETED", body))
    ops.track(*event("DELETED", specserve(kimi_doc, name="other", uid="uid-unseen")))

    assert state.gone  # reconciles still queued behind its lock see it
    assert len(ops.objects) == 0 and ops.objects.named(key) is None and ops.cached_bodies() == []
    assert not ops.objects.knows("uid-1") and not ops.objects.knows("uid-unseen")
    assert key not in ops.rolls.rolling and ops.rolls.waiting() == []
    assert demand_series(key) == []
    renders: list[str] = []

    def counted(o: Any, m: Mode) -> list[dict[str, Any]]:
        renders.append(o.metadata.name)
        return render(o, m)

    monkeypatch.setattr(rendered, "render", counted)
    rendered.remembered_render(obj, Mode.BASELINE)
    assert renders == ["kimi-k25"]  # forgotten: rendered afresh

    # Seen again (re-created under the same name): a fresh state, nothing carried over.
    ops.track(*event("ADDED", specserve(kimi_doc, uid="uid-2")))
    again = ops.objects.named(key)
    assert again is not None and again is not state
    assert again.pools == {} and again.clean is None and again.loop.policy is None and again.loop.due == -math.inf


def test_a_specserve_re_created_under_its_name_while_the_watch_missed_the_deletion_starts_afresh(
    kimi_doc: dict[str, Any],
) -> None:
    objects = Objects()
    old = objects.observe(specserve(kimi_doc, uid="uid-1", rv="5"))
    old.pools["kimi-k25-spec"] = True
    new = objects.observe(specserve(kimi_doc, uid="uid-2", rv="9"))
    assert old.gone and new is not old and new.pools == {}
    assert objects.named((NS, "kimi-k25")) is new and not objects.knows("uid-1") and len(objects) == 1

"""What the operator holds of each SpecServe (specserve.objects): one state per object, its body changed only
through the staleness guard, and deletion one forget that leaves nothing behind anywhere."""

from __future__ import annotations

from specserve.objects import Objects

NS = "llm"


def test_a_body_older_than_the_one_held_is_refused_whoever_brings_it() -> None:
    objects = Objects()
    state = objects.observe({"metadata": {"namespace": NS, "name": "a", "uid": "u", "resourceVersion": "12"}})
    assert not state.observe({"metadata": {"namespace": NS, "name": "a", "uid": "u", "resourceVersion": "11"}})
    assert objects.observe({"metadata": {"namespace": NS, "name": "a", "uid": "u", "resourceVersion": "10"}}) is state
    assert state.body["metadata"]["resourceVersion"] == "12"
    assert state.observe({"metadata": {"namespace": NS, "name": "a", "uid": "u", "resourceVersion": "13"}})
    assert state.body["metadata"]["resourceVersion"] == "13"
    assert objects.named((NS, "a")) is objects.get("u") is state

"""The failover fast path's weights (pure): off every pool the watch reports without a Ready replica, onto the
Ready ones, never all the weight off and never onto a pool that is not Ready."""

from __future__ import annotations

from specserve.reconcile.traffic import relieve

KNOWN = frozenset({"a", "b", "c"})


def test_the_weight_of_a_dead_pool_goes_to_the_ready_ones_in_proportion() -> None:
    assert relieve({"a": 0, "b": 100}, {"a"}, KNOWN) == (("a", 100), ("b", 0))
    assert relieve({"a": 30, "b": 50, "c": 20}, {"a", "c"}, KNOWN) == (("a", 60), ("b", 0), ("c", 40))
    assert relieve({"a": 0, "b": 61, "c": 0}, {"a", "c"}, KNOWN) == (("a", 31), ("b", 0), ("c", 30))


def test_nothing_moves_without_a_ready_pool_or_a_dead_one_with_weight() -> None:
    assert relieve({"a": 40, "b": 60}, set(), KNOWN) is None  # never all the weight off
    assert relieve({"a": 100, "b": 0}, {"a"}, KNOWN) is None  # the dead pool has no weight
    assert relieve({"a": 0, "b": 100}, {"a", "b"}, KNOWN) is None
    assert relieve(None, {"a"}, KNOWN) is None


def test_a_backend_the_watch_knows_nothing_of_keeps_its_share_and_gets_none() -> None:
    # "x" is no pool the watch reported: neither relieved nor given weight (it may be a pool not seen yet).
    assert relieve({"x": 50, "b": 50, "a": 0}, {"a"}, KNOWN) == (("x", 50), ("b", 0), ("a", 50))
    assert relieve({"x": 0, "b": 100}, {"x"}, KNOWN) is None

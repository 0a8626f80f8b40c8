"""The failover fast path's weights (pure): off every pool the watch reports without a Ready replica, onto the
Ready ones, never all the weight off and never onto a pool that is not Ready."""

from __future__ import annotations

from specserve.reconcile.traffic import apportion, keep_serving, relieve

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


def test_apportion_splits_in_whole_numbers_by_weight() -> None:
    assert apportion(100, {"a": 1, "b": 1, "c": 1}) == {"a": 34, "b": 33, "c": 33}  # ties: in order
    assert apportion(100, {"a": 0, "b": 0}) == {"a": 50, "b": 50}  # all 0: equally
    assert apportion(7, {"a": 1, "b": 3}) == {"a": 1, "b": 6}  # floors 1 and 5, the remainder to the larger
    assert apportion(100, {}) == {}


def test_apportion_floors_exact_shares_exactly() -> None:
    """97 of 194 is exactly half: 50, not a float's 49.99... (the rollout's float split gave the left-over to a,
    37/50/13)."""
    assert apportion(100, {"a": 70, "b": 97, "c": 27}) == {"a": 36, "b": 51, "c": 13}


def test_keep_serving_shares_equally_among_ready_backends() -> None:
    assert keep_serving((("a", 100), ("b", 0), ("c", 0)), {"b", "c"}) == (("a", 0), ("b", 50), ("c", 50))
    assert keep_serving((("a", 40), ("b", 60)), {"a"}) == (("a", 40), ("b", 60))  # already serving: unchanged

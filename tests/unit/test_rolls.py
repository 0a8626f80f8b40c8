"""--max-concurrent-rolls: the planner's roll_slots input and the cluster-wide budget that feeds it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specserve.api import reasons
from specserve.reconcile.rollout import DesiredPool, LivePool, World, plan
from specserve.reconcile.rolls import RollBudget


def live(name: str, current: bool, ready: int = 1, updated: int | None = None, replicas: int = 1) -> LivePool:
    return LivePool(
        name=name, template_current=current, generation=2, observed_generation=2, spec_replicas=replicas,
        replicas=replicas, ready=ready, updated=replicas if updated is None else updated,
    )  # fmt: skip


def world(*pools: LivePool, slots: int | None = None) -> World:
    return World(
        desired=tuple(DesiredPool(p.name, 1, "new") for p in pools),
        live={p.name: p for p in pools},
        route=False,
        live_route=None,
        target_weights={p.name: 100 for p in pools},
        roll_slots=slots,
    )


def test_without_a_budget_the_plan_is_unchanged_and_with_none_left_a_roll_waits_for_a_slot() -> None:
    changed = world(live("a-spec", False, ready=0), live("a-base", False, ready=0))
    assert plan(changed) == plan(replace(changed, roll_slots=5))
    assert plan(changed).held == frozenset()  # pools serving nothing roll at once
    one = plan(replace(changed, roll_slots=1))
    assert len(one.held) == 1
    none = plan(replace(changed, roll_slots=0))
    assert none.held == {"a-spec", "a-base"}
    assert none.steps[0].reason == reasons.WAITING_FOR_ROLL_SLOT  # Progressing names why
    assert "max-concurrent-rolls" in none.steps[0].message


def test_the_budget_is_shared_across_specserves_and_freed_when_a_pool_settles() -> None:
    budget = RollBudget(2)
    worlds = {name: world(live(f"{name}-engine", False, ready=0)) for name in ("a", "b", "c")}
    held = {}
    for name, w in worlds.items():
        budgeted = replace(w, roll_slots=budget.slots(("llm", name), w))
        p = plan(budgeted)
        budget.record(("llm", name), budgeted, p)
        held[name] = p.held
    assert held == {"a": frozenset(), "b": frozenset(), "c": {"c-engine"}}
    assert sum(len(v) for v in budget.rolling.values()) == 2

    # a's pool runs its new template but is not Ready yet: still rolling, c still waits
    a_loading = world(live("a-engine", True, ready=0))
    budget.record(("llm", "a"), a_loading, plan(replace(a_loading, roll_slots=budget.slots(("llm", "a"), a_loading))))
    assert budget.slots(("llm", "c"), worlds["c"]) == 0
    # a's pool settled: its slot goes to c
    a_done = world(live("a-engine", True, ready=1))
    budget.record(("llm", "a"), a_done, plan(a_done))
    assert budget.slots(("llm", "c"), worlds["c"]) == 1


def test_a_pool_found_mid_roll_after_a_restart_counts() -> None:
    budget = RollBudget(1)
    mid = world(live("a-engine", True, ready=1, updated=1, replicas=2))  # an old-template pod still runs
    budget.record(("llm", "a"), mid, plan(mid))
    assert budget.slots(("llm", "b"), world(live("b-engine", False, ready=0))) == 0


def test_a_deleted_specserve_frees_its_slots_and_the_limit_is_checked() -> None:
    budget = RollBudget(1)
    w = world(live("a-engine", False, ready=0))
    budget.record(("llm", "a"), w, plan(replace(w, roll_slots=budget.slots(("llm", "a"), w))))
    assert budget.slots(("llm", "b"), w) == 0
    budget.forget(("llm", "a"))
    assert budget.slots(("llm", "b"), w) == 1
    assert RollBudget(None).slots(("llm", "a"), w) is None
    with pytest.raises(ValueError, match="max-concurrent-rolls"):
        RollBudget(0)


def test_a_finished_roll_wakes_the_longest_waiting_specserves_once() -> None:
    budget = RollBudget(1)
    changed = {name: world(live(f"{name}-engine", False, ready=0)) for name in ("a", "b", "c")}
    for name, w in changed.items():
        budgeted = replace(w, roll_slots=budget.slots(("llm", name), w))
        budget.record(("llm", name), budgeted, plan(budgeted))
    assert budget.wake() == []  # nothing finished yet
    done = world(live("a-engine", True, ready=1))
    assert budget.record(("llm", "a"), done, plan(done))  # a's roll finished: a slot is free
    assert budget.wake() == [("llm", "b")]  # b waited longest; one slot, one SpecServe
    assert budget.wake() == []  # once per release


def test_pools_counted_while_created_hold_no_slot_once_their_spec_changes_before_they_settle() -> None:
    """CI's stall: every SpecServe's new pools were mid-roll (not yet observed) when a template change came, and
    were then counted as rolling a template nobody let through: every SpecServe waited for a slot, for ever."""
    budget = RollBudget(2)

    def unseen(name: str) -> LivePool:  # just created: the Deployment controller has not observed it yet
        return replace(live(name, True, ready=0), observed_generation=None)

    for name in ("a", "b", "c"):
        created = world(unseen(f"{name}-spec"), unseen(f"{name}-base"))
        budget.record(("llm", name), created, plan(replace(created, roll_slots=budget.slots(("llm", name), created))))
    # Their template changes before any of them is reconciled again: the pools serve, their templates are old.
    changed = {name: world(live(f"{name}-spec", False), live(f"{name}-base", False)) for name in ("a", "b", "c")}
    let_through = 0
    for name, w in changed.items():
        budgeted = replace(w, roll_slots=budget.slots(("llm", name), w))
        p = plan(budgeted)
        budget.record(("llm", name), budgeted, p)
        let_through += len({"a-spec", "a-base", "b-spec", "b-base", "c-spec", "c-base"} & set(w.live) - p.held)
    assert let_through >= 1  # some pool rolls: the budget is not held by pools nobody let roll
    assert sum(len(v) for v in budget.rolling.values()) <= 2


def restart_pool(current: bool, ready: int, failure: str | None = None) -> LivePool:
    return replace(live("a-engine", current, ready=ready), failure=failure)


def budgeted_plan(budget: RollBudget, owner: tuple[str, str], w: World) -> tuple[World, frozenset[str]]:
    """One reconcile's use of the budget, as reconcile() makes it."""
    budgeted = budget.budgeted(owner, w)
    p = plan(budgeted)
    budget.record(owner, budgeted, p)
    return budgeted, p.held


def test_a_stuck_roll_does_not_hold_its_slot_against_its_own_fix() -> None:
    """Issue 31, 1: budget 1, one pool rolled into ImagePullBackOff (off the air); the user reverts the image: the
    revert replaces the stuck roll in the slot it holds, it does not wait for a second one."""
    budget, a = RollBudget(1), ("llm", "a")
    _, held = budgeted_plan(budget, a, world(restart_pool(False, ready=0)))  # the bad image: rolls
    assert held == frozenset()
    budgeted_plan(budget, a, world(restart_pool(True, ready=0, failure="ImagePullBackOff")))  # stuck, holds the slot
    assert budget.slots(("llm", "b"), world(live("b-engine", False, ready=0))) == 0  # another roll waits
    revert = world(restart_pool(False, ready=0, failure="ImagePullBackOff"))  # the template changes back
    budgeted, held = budgeted_plan(budget, a, revert)
    assert held == frozenset(), plan(budgeted).steps  # the fix rolls now
    assert sum(len(v) for v in budget.rolling.values()) == 1  # in the same slot: the budget is still honoured
    assert budget.slots(("llm", "b"), world(live("b-engine", False, ready=0))) == 0
    budgeted_plan(budget, a, world(restart_pool(True, ready=1)))  # the fix is Ready: the slot is free
    assert budget.slots(("llm", "b"), world(live("b-engine", False, ready=0))) == 1


def test_a_rollback_replaces_the_failed_roll_in_its_slot_even_when_others_fill_the_budget() -> None:
    """Issue 31, 2: the loop's Rollback renders the old template for the pool whose roll failed; whatever else
    rolls meanwhile (counted after a restart, say), the pool already holds its slot."""
    budget, a, b = RollBudget(1), ("llm", "a"), ("llm", "b")
    budgeted_plan(budget, a, world(restart_pool(False, ready=0)))
    budgeted_plan(budget, a, world(restart_pool(True, ready=0, failure="ProgressDeadlineExceeded")))
    # b's pool is found mid-roll (an old-template pod still runs): counted, over the budget.
    mid = world(live("b-engine", True, ready=1, updated=1, replicas=2))
    budget.record(b, mid, plan(mid))
    assert sum(len(v) for v in budget.rolling.values()) == 2
    _, held = budgeted_plan(budget, a, world(restart_pool(False, ready=0, failure="ProgressDeadlineExceeded")))
    assert held == frozenset()  # the rollback applies
    # A pool of a that held no slot still waits: only the pool's own new template goes through.
    two = World(
        desired=(DesiredPool("a-engine", 1, "old"), DesiredPool("a-other", 1, "new")),
        live={"a-engine": restart_pool(False, ready=0), "a-other": live("a-other", False, ready=0)},
        route=False, live_route=None, target_weights={"a-engine": 100, "a-other": 0},
    )  # fmt: skip
    _, held = budgeted_plan(budget, a, two)
    assert held == {"a-other"}

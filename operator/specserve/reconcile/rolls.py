"""The cluster-wide roll budget (`--max-concurrent-rolls`): at most N pools roll their pod template at once,
across every SpecServe, so a new operator release that changes many rendered templates rolls them a few at a time.

Counting only (the planner decides which pool would roll; World.roll_slots and World.slot_held are its input).
A slot belongs to a pool's roll until the pool settles, whatever template it rolls to: a roll that fails (bad
image, pods that never get Ready) keeps its slot against other pools (a bad release must not spread), but the fix
of that pool (the user's revert, the switching loop's rollback) replaces the failed roll in the same slot.

Kept in memory: after an operator restart, a pool still mid-roll (pods of an older template left, or a generation
not yet observed) counts again from the first reconcile that sees it. A SpecServe's count is replaced by each of
its reconciles, in the same synchronous step as its plan, so two reconciles never both take the last slot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from specserve.api import reasons
from specserve.reconcile.rollout import DesiredPool, LivePool, Plan, World

Owner = tuple[str, str]  # namespace, SpecServe name


class RollBudget:
    def __init__(self, limit: int | None) -> None:
        if limit is not None and limit < 1:
            raise ValueError("--max-concurrent-rolls must be at least 1")
        self.limit = limit
        self._rolling: dict[Owner, frozenset[str]] = {}
        # Pools a plan let roll, until they settle on their new template. Only these keep a slot while their
        # template is not current: a pool counted only because it was mid-roll (just created, say) and whose
        # spec then changed must not hold its slot for a template nobody applied (every SpecServe waited).
        self._started: dict[Owner, frozenset[str]] = {}
        self._waiting: dict[Owner, None] = {}  # SpecServes holding a roll for want of a slot, oldest first
        self._freed = False  # a roll finished since the last wake()

    @property
    def rolling(self) -> Mapping[Owner, frozenset[str]]:
        return self._rolling

    def in_progress(self, owner: Owner, world: World) -> frozenset[str]:
        """This SpecServe's rolls still running: pools it let roll that are not yet settled on their new template,
        and pools mid-roll (what an operator restart finds)."""
        desired = {p.name: p for p in world.desired}
        granted = self._started.get(owner, frozenset())
        return frozenset(
            name
            for name, live in world.live.items()
            if name in desired and _rolling(live, desired[name], name in granted)
        )

    def slots(self, owner: Owner, world: World) -> int | None:
        """How many new rolls this SpecServe may start now (None: no limit)."""
        if self.limit is None:
            return None
        others = sum(len(pools) for key, pools in self._rolling.items() if key != owner)
        return max(0, self.limit - others - len(self.in_progress(owner, world)))

    def budgeted(self, owner: Owner, world: World) -> World:
        """The planner's input with this SpecServe's share of the budget: the new rolls it may start, and the
        pools whose roll already holds a slot (a new template for one replaces that roll, in the same slot)."""
        if self.limit is None:
            return world
        return replace(world, roll_slots=self.slots(owner, world), slot_held=self.in_progress(owner, world))

    def record(self, owner: Owner, world: World, plan: Plan) -> bool:
        """After planning: this SpecServe's rolls are those still running and those the plan lets start now.
        True when that frees a slot (a roll finished): the SpecServes waiting for one may go on (`waiting`)."""
        before = len(self._rolling.get(owner, ()))
        started = {
            p.name
            for p in world.desired
            if (live := world.live.get(p.name)) is not None and not live.template_current and p.name not in plan.held
        }
        rolling = self.in_progress(owner, world) | started
        desired = {p.name: p for p in world.desired}
        kept = {
            name
            for name in self._started.get(owner, frozenset()) | started
            if (live := world.live.get(name)) is not None
            and name in desired
            and not (live.template_current and live.settled(desired[name]))
        }
        if kept:
            self._started[owner] = frozenset(kept)
        else:
            self._started.pop(owner, None)
        if rolling:
            self._rolling[owner] = rolling
        else:
            self._rolling.pop(owner, None)
        if any(step.reason == reasons.WAITING_FOR_ROLL_SLOT for step in plan.steps):
            self._waiting.setdefault(owner, None)
        else:
            self._waiting.pop(owner, None)
        freed = len(rolling) < before
        self._freed = self._freed or freed
        return freed

    def wake(self) -> list[Owner]:
        """Once after rolls finished: the waiting SpecServes that may take the freed slots (reconcile them now
        rather than at their next resync)."""
        if not self._freed:
            return []
        self._freed = False
        return self.waiting()

    def waiting(self) -> list[Owner]:
        """The SpecServes holding a roll for a slot, as many as slots are free now, the longest waiting first."""
        if self.limit is None:
            return []
        free = self.limit - sum(len(pools) for pools in self._rolling.values())
        return list(self._waiting)[: max(0, free)]

    def forget(self, owner: Owner) -> None:
        self._rolling.pop(owner, None)
        self._started.pop(owner, None)
        self._waiting.pop(owner, None)


def _rolling(live: LivePool, desired: DesiredPool, granted: bool) -> bool:
    if not live.template_current:
        return granted  # let through earlier, its new template not yet seen as current (e.g. apply failed)
    return live.rolling or (granted and not live.settled(desired))

"""The rollout planner (pure): from what is live and what is wanted, the next safe step.

Level-based: every reconcile observes the live Deployments and the live HTTPRoute and takes one step; the
next reconcile continues from what it then observes, so an operator restart mid-rollout resumes correctly.
The rules, in the order they protect serving capacity:

- make before break: a pool that is no longer rendered (strategy change, pool removed or renamed) keeps its
  traffic until a new pool is Ready; traffic moves first, the old pool is pruned on a later pass;
- weights follow readiness: no weight on a pool without a Ready replica, on a pool mid-roll, or on a pool
  being drained, while another pool can take it;
- one pool at a time: a Ready pool whose pod template changes first loses its traffic to another Ready pool,
  then rolls; the next pool waits until it is Ready again. A pool that serves nothing rolls at once;
- a single-replica pool without surge and without another Ready pool cannot roll without downtime: the
  planner announces it first and acts on the next pass;
- a failed pool (its pods report a cause, or its Deployment ProgressDeadlineExceeded) is contained, never
  reverted: the other pool does not roll while it is failed; weights keep following the target between the
  pools that can serve;
- the Gateway first: while it has not taken the last weight change (it reports an older generation of the
  route, or reports nothing and the settle time has not passed), a serving pool neither rolls nor is pruned:
  the pool just drained may still get requests;
- a scale is no roll: "rolling", "settled" and "complete" have one meaning, `specserve.pool_state`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from specserve.api import reasons
from specserve.pool_state import PoolCounts
from specserve.reconcile.traffic import apportion


@dataclass(frozen=True)
class DesiredPool:
    name: str
    replicas: int | None  # None: an autoscaler owns the count (read it from the live Deployment)
    template_hash: str
    max_surge: int = 0

    @property
    def announcement(self) -> str:
        """The key the downtime warning carries, so the next pass knows it was announced."""
        return f"{self.name}@{self.template_hash}"


@dataclass(frozen=True)
class LivePool(PoolCounts):
    """A Deployment this SpecServe owns, as the API server reports it (read by `specserve.pool_state`, which
    gives "rolling", "settled" and "complete" their one meaning)."""

    template_current: bool = False  # its pod template is the desired one (False for pools no longer rendered)
    failure: str | None = None  # why its pods do not come up (a pod's reason, ProgressDeadlineExceeded), if so

    def want(self, desired: DesiredPool | None) -> int:
        return self.wanted(desired.replicas if desired is not None else None)

    def settled(self, desired: DesiredPool | None) -> bool:
        """Not rolling, and serving when anything is wanted: pods still coming up after a scale-up are "scaling"."""
        return self.is_settled(desired.replicas if desired is not None else None)

    def complete(self, desired: DesiredPool | None) -> bool:
        """Every wanted pod Ready and of the current template."""
        return self.is_complete(desired.replicas if desired is not None else None)


@dataclass(frozen=True)
class World:
    desired: tuple[DesiredPool, ...]
    live: Mapping[str, LivePool]  # owned Deployments: the desired ones that exist and the stale ones
    route: bool  # an HTTPRoute is rendered
    live_route: Mapping[str, int] | None  # backend -> weight on the live HTTPRoute; None: no live route
    target_weights: Mapping[str, int]  # desired pool -> weight the switching target asks for
    announced: frozenset[str] = frozenset()  # downtime announcements already made (DesiredPool.announcement)
    excluded: frozenset[str] = frozenset()  # pools that must get no traffic (e.g. their Service is someone else's)
    # How many of this SpecServe's pools may start a pod-template roll now (the cluster-wide --max-concurrent-rolls
    # budget, counted by the caller); None: no limit. A pool past the budget is held (WaitingForRollSlot).
    roll_slots: int | None = None
    # Pools whose roll already holds a slot of that budget (let through earlier, not yet settled): a new template
    # for one of them (the user's fix, the switching loop's rollback) replaces its roll in that slot and takes no
    # other; counting it again deadlocked a stuck pool against its own fix.
    slot_held: frozenset[str] = frozenset()
    # Why the Gateway may not have taken the last weight change yet (traffic.gateway_pending); None: it has.
    gateway_pending: str | None = None


@dataclass(frozen=True)
class RolloutStep:
    reason: str
    message: str


@dataclass(frozen=True)
class Plan:
    held: frozenset[str] = frozenset()  # desired Deployments not to apply this pass
    route_weights: tuple[tuple[str, int], ...] = ()  # the backends to apply, in order
    prune_pools: tuple[str, ...] = ()  # stale pools to delete (with their Services and budgets)
    steps: tuple[RolloutStep, ...] = ()  # what runs, for the Progressing condition
    downtime: str | None = None  # to announce as a Warning event before acting
    announcement: str | None = None  # the key of that announcement (DesiredPool.announcement), for World.announced
    settled: bool = False  # nothing pending: the generation is fully rolled out

    @property
    def route_map(self) -> dict[str, int]:
        return dict(self.route_weights)


@dataclass
class _Draft:
    held: set[str] = field(default_factory=set)
    draining: set[str] = field(default_factory=set)
    steps: list[RolloutStep] = field(default_factory=list)
    downtime: str | None = None
    announcement: str | None = None

    def step(self, reason: str, message: str) -> None:
        self.steps.append(RolloutStep(reason, message))


def plan(world: World) -> Plan:
    """The next safe step of a rollout (pure): which pools to create, roll (within the roll budget) or scale, which
    old pools to prune (only once the new side serves), and the route's weights (only on Ready pools; off a dead
    pool at once), with the steps that explain what waits and why. A serving pool neither rolls nor goes while the
    Gateway has not taken the last weight change (`World.gateway_pending`)."""
    desired = {p.name: p for p in world.desired}
    old = sorted(n for n in world.live if n not in desired)
    draft = _Draft()
    _plan_rolls(world, desired, draft)
    for p in world.desired:
        live = world.live.get(p.name)
        # One wording for "created now" and "loading": the status describes the state after this pass.
        if live is None:
            want = p.replicas if p.replicas is not None else 1
            draft.step(reasons.WAITING_FOR_POOL, f"waiting for {p.name} to be Ready (0/{want})")
        elif live.template_current and not live.settled(p):
            draft.step(reasons.WAITING_FOR_POOL, f"waiting for {p.name} to be Ready ({live.ready}/{live.want(p)})")

    ready_side = _new_side_ready(world)
    prune = _prunable(world, old, ready_side)
    keep_old = [n for n in old if n not in prune]
    route = _route_weights(world, keep_old, draft.draining, ready_side) if world.route else ()
    for name in old:
        if name in prune:
            draft.step(reasons.PRUNING_POOL, f"pruning {name}: its traffic has moved")
        else:
            draft.step(reasons.REPLACING_POOL, f"{name} keeps serving until a new pool is Ready and has its traffic")
    changes_pending = any(
        world.live.get(p.name) is None or not world.live[p.name].template_current for p in world.desired
    )
    settled = not draft.steps and not changes_pending and not old
    the_plan = Plan(
        held=frozenset(draft.held),
        route_weights=route,
        prune_pools=tuple(prune),
        steps=tuple(draft.steps),
        downtime=draft.downtime,
        announcement=draft.announcement,
        settled=settled,
    )
    return _await_gateway(the_plan, world)


def _await_gateway(the_plan: Plan, world: World) -> Plan:
    """Hold the rolls of serving pools and the prunes of serving pools until the Gateway has taken the last
    weight change (the drained pool may still get requests until it has)."""
    if world.gateway_pending is None:
        return the_plan
    rolling = {
        p.name
        for p in world.desired
        if p.name not in the_plan.held
        and (live := world.live.get(p.name)) is not None
        and live.serving
        and not live.template_current
    }
    serving_pruned = {n for n in the_plan.prune_pools if world.live[n].serving}
    if not rolling and not serving_pruned:
        return the_plan
    return replace(
        the_plan,
        held=the_plan.held | rolling,
        prune_pools=tuple(n for n in the_plan.prune_pools if n not in serving_pruned),
        steps=(*the_plan.steps, RolloutStep(reasons.WAITING_FOR_GATEWAY, world.gateway_pending)),
        settled=False,
    )


def _plan_rolls(world: World, desired: Mapping[str, DesiredPool], draft: _Draft) -> None:
    """Which changed pod templates may roll now; the others are held."""
    changed = [p for p in world.desired if p.name in world.live and not world.live[p.name].template_current]
    # A pool that serves nothing rolls at once: there is no capacity to protect.
    candidates = [p for p in changed if world.live[p.name].serving]
    slots = [world.roll_slots]  # the budget left this pass (None: no limit)

    def slot_for(pool: DesiredPool) -> bool:
        if slots[0] is None or pool.name in world.slot_held:
            return True
        if slots[0] <= 0:
            draft.held.add(pool.name)
            draft.step(
                reasons.WAITING_FOR_ROLL_SLOT,
                f"{pool.name} waits for a roll slot "
                "(at most --max-concurrent-rolls pools roll at once across the cluster)",
            )
            return False
        slots[0] -= 1
        return True

    for p in changed:
        if p not in candidates and slot_for(p):
            draft.step(reasons.ROLLING_POOL, f"rolling {p.name} (it serves no traffic)")
    live_route = world.live_route or {}
    # Roll first the pools that carry least traffic now, then those the target gives least.
    candidates.sort(key=lambda p: (live_route.get(p.name, 0), world.target_weights.get(p.name, 0)))
    for index, pool in enumerate(candidates):
        if index > 0:
            draft.held.add(pool.name)
            draft.step(reasons.WAITING_FOR_TURN, f"{pool.name} rolls after {candidates[0].name}")
            continue
        busy = [n for n, q in desired.items() if n != pool.name and _busy(world.live.get(n), q)]
        if busy:
            draft.held.add(pool.name)
            draft.step(reasons.WAITING_FOR_POOL, f"{pool.name} rolls once {', '.join(busy)} is Ready")
            continue
        if slot_for(pool):
            _roll_one(world, desired, pool, draft)


def _busy(live: LivePool | None, pool: DesiredPool) -> bool:
    """Rolling, loading or failed now (or rolled at once this pass): another pool must not roll meanwhile."""
    if live is None or live.want(pool) == 0:
        return False
    if not live.template_current:
        return not live.serving  # rolls at once this pass
    # A failed pool is contained: the other pool does not roll while it cannot take the traffic back.
    return not live.settled(pool) or live.failure is not None


def _roll_one(world: World, desired: Mapping[str, DesiredPool], pool: DesiredPool, draft: _Draft) -> None:
    # Pools that can carry this one's traffic while it rolls: Ready, and not rolling themselves.
    others = [
        n
        for n, live in world.live.items()
        if n != pool.name and live.serving and live.settled(desired.get(n)) and live.failure is None
    ]
    live = world.live[pool.name]
    if others:
        draft.draining.add(pool.name)
        if world.route and (world.live_route or {}).get(pool.name, 0) > 0:
            draft.held.add(pool.name)
            draft.step(reasons.DRAINING_POOL, f"moving traffic off {pool.name} to {', '.join(others)} before it rolls")
        else:
            draft.step(reasons.ROLLING_POOL, f"rolling {pool.name} while {', '.join(others)} serves")
        return
    if live.want(pool) >= 2 or pool.max_surge > 0:
        draft.step(reasons.ROLLING_POOL, f"rolling {pool.name} one pod at a time (no other pool to take its traffic)")
        return
    if pool.announcement in world.announced:
        draft.step(reasons.PLANNED_RESTART, f"restarting {pool.name}: the model is off the air until it has reloaded")
        return
    draft.held.add(pool.name)
    draft.announcement = pool.announcement
    draft.downtime = (
        f"{pool.name} has 1 replica, no maxSurge and no other Ready pool: applying the change restarts its only "
        f"pod and the model is off the air until it has reloaded; acting on the next reconcile "
        f"[{pool.announcement}]"
    )
    draft.step(reasons.DOWNTIME_AHEAD, draft.downtime)


def _new_side_ready(world: World) -> bool:
    """Can the rendered pools take the traffic of the pools being replaced? A pool that must get no traffic (its
    Deployment or Service is someone else's) never can."""
    wanted = [
        p for p in world.desired
        if p.name not in world.excluded and (world.live.get(p.name) is None or world.live[p.name].want(p) > 0)
    ]  # fmt: skip
    if not wanted:
        return not world.excluded  # everything is scaled to zero by spec: nothing to wait for
    return any(
        (live := world.live.get(p.name)) is not None and live.template_current and live.complete(p) and live.serving
        for p in wanted
    )


def _prunable(world: World, old: list[str], ready_side: bool) -> list[str]:
    live_route = world.live_route or {}
    out = []
    for name in old:
        carries = world.route and live_route.get(name, 0) > 0
        if (ready_side and not carries) or (not world.live[name].serving and not carries):
            out.append(name)
    return out


def _route_weights(world: World, old: list[str], draining: set[str], ready_side: bool) -> tuple[tuple[str, int], ...]:
    live_route = world.live_route or {}
    target = {p.name: world.target_weights.get(p.name, 0) for p in world.desired}
    total = sum(target.values()) or 100
    backends = [p.name for p in world.desired] + [n for n in old if n in live_route or world.live[n].serving]
    old_serving = [n for n in old if world.live[n].serving]

    def live_(name: str) -> LivePool | None:
        return world.live.get(name)

    serving = [n for n in target if (lp := live_(n)) is not None and lp.serving and n not in world.excluded]
    eligible = [n for n in serving if not world.live[n].rolling and n not in draining]
    if old_serving and not ready_side:
        chosen = apportion(total, {n: live_route.get(n, 0) for n in old_serving})
    elif eligible:
        chosen = apportion(total, {n: target[n] for n in eligible})
    elif serving:
        chosen = apportion(total, {n: target[n] for n in serving})
    else:  # nothing serves: aim at the target, whichever pool comes up first
        chosen = apportion(total, {n: w for n, w in target.items() if n not in world.excluded})
    return tuple((n, chosen.get(n, 0)) for n in backends)

"""The rollout planner, transition by transition: what it applies, holds, routes and prunes from what is live."""

from __future__ import annotations

from dataclasses import replace

from specserve.api import reasons as why
from specserve.reconcile.rollout import (
    DesiredPool,
    LivePool,
    Plan,
    World,
    plan,
)

SPEC, BASE, ENGINE = "m-spec", "m-base", "m-engine"
NEW, OLD = "h-new", "h-old"


def desired(name: str, replicas: int | None = 1, hash_: str = NEW, surge: int = 0) -> DesiredPool:
    return DesiredPool(name, replicas, hash_, surge)


def live(
    name: str, *, ready: int = 1, current: bool = True, replicas: int = 1, updated: int | None = None, seen: bool = True
) -> LivePool:
    """A live Deployment: `current` its template is the desired one; `seen` the controller caught up."""
    return LivePool(
        name=name,
        template_current=current,
        generation=2,
        observed_generation=2 if seen else 1,
        spec_replicas=replicas,
        replicas=replicas,
        ready=ready,
        updated=replicas if updated is None else updated,
    )


def split(
    spec: LivePool | None, base: LivePool | None, route: dict[str, int] | None, target: tuple[int, int] = (100, 0)
) -> World:
    return World(
        desired=(desired(SPEC), desired(BASE)),
        live={p.name: p for p in (spec, base) if p is not None},
        route=True,
        live_route=route,
        target_weights={SPEC: target[0], BASE: target[1]},
    )


def reasons(p: Plan) -> list[str]:
    return [s.reason for s in p.steps]


# ----------------------------------------------------------------------------------------- create and serve


def test_a_new_specserve_creates_every_pool_and_aims_the_route_at_the_target() -> None:
    p = plan(split(None, None, None))
    assert p.held == frozenset() and p.prune_pools == ()
    assert p.route_map == {SPEC: 100, BASE: 0}
    assert reasons(p) == ["WaitingForPool", "WaitingForPool"] and not p.settled


def test_while_the_target_pool_loads_the_ready_one_takes_the_traffic() -> None:
    p = plan(split(live(SPEC, ready=0), live(BASE), None))
    assert p.route_map == {SPEC: 0, BASE: 100}
    assert reasons(p) == ["WaitingForPool"] and not p.settled


def test_settled_pools_follow_the_target_weights() -> None:
    p = plan(split(live(SPEC), live(BASE), {SPEC: 100, BASE: 0}, target=(30, 70)))
    assert p.route_map == {SPEC: 30, BASE: 70}
    assert p.steps == () and p.settled


def test_when_the_carrying_pool_loses_its_last_ready_replica_traffic_moves_at_once() -> None:
    p = plan(split(live(SPEC, ready=0), live(BASE), {SPEC: 100, BASE: 0}))
    assert p.route_map == {SPEC: 0, BASE: 100}


def test_nothing_ready_keeps_the_target() -> None:
    p = plan(split(live(SPEC, ready=0), live(BASE, ready=0), {SPEC: 0, BASE: 100}))
    assert p.route_map == {SPEC: 100, BASE: 0}


# ------------------------------------------------------------------------------- engine change, 1+1 split


def test_engine_change_rolls_the_pool_without_traffic_first_and_holds_the_other() -> None:
    p = plan(split(live(SPEC, current=False), live(BASE, current=False), {SPEC: 100, BASE: 0}))
    assert p.held == frozenset({SPEC})  # base rolls now: it carries no traffic
    assert p.route_map == {SPEC: 100, BASE: 0}
    assert "RollingPool" in reasons(p) and "WaitingForTurn" in reasons(p)


def test_the_second_pool_waits_while_the_first_one_loads() -> None:
    p = plan(split(live(SPEC, current=False), live(BASE, ready=0), {SPEC: 100, BASE: 0}))
    assert p.held == frozenset({SPEC})
    assert p.route_map == {SPEC: 100, BASE: 0}
    assert p.downtime is None


def test_weight_moves_off_the_next_pool_before_it_rolls() -> None:
    p = plan(split(live(SPEC, current=False), live(BASE), {SPEC: 100, BASE: 0}))
    assert p.held == frozenset({SPEC})
    assert p.route_map == {SPEC: 0, BASE: 100}
    assert reasons(p)[0] == "DrainingPool"


def test_a_drained_pool_rolls_and_gets_no_traffic_until_ready() -> None:
    rolling = plan(split(live(SPEC, current=False), live(BASE), {SPEC: 0, BASE: 100}))
    assert rolling.held == frozenset() and rolling.route_map == {SPEC: 0, BASE: 100}
    loading = plan(split(live(SPEC, ready=0), live(BASE), {SPEC: 0, BASE: 100}))
    assert loading.route_map == {SPEC: 0, BASE: 100} and not loading.settled
    done = plan(split(live(SPEC), live(BASE), {SPEC: 0, BASE: 100}))
    assert done.route_map == {SPEC: 100, BASE: 0} and done.settled


def test_a_pool_with_old_pods_left_is_mid_roll_and_gets_no_weight() -> None:
    mid = live(SPEC, replicas=3, updated=2, ready=3)  # one pod of the old template still runs
    p = plan(split(mid, live(BASE), {SPEC: 0, BASE: 100}))
    assert p.route_map == {SPEC: 0, BASE: 100}
    unseen = plan(split(live(SPEC, seen=False), live(BASE), {SPEC: 0, BASE: 100}))
    assert unseen.route_map == {SPEC: 0, BASE: 100}  # the controller has not acted on the new spec yet


def test_a_broken_pool_rolls_at_once_and_the_serving_one_waits_for_it() -> None:
    p = plan(split(live(SPEC, current=False), live(BASE, ready=0, current=False), {SPEC: 100, BASE: 0}))
    assert p.held == frozenset({SPEC})  # never both at once: the serving pool waits
    assert p.downtime is None


def test_a_serving_pool_never_rolls_while_the_other_one_is_not_ready() -> None:
    p = plan(split(live(SPEC, current=False), live(BASE, ready=0), {SPEC: 100, BASE: 0}))
    assert SPEC in p.held and p.route_map == {SPEC: 100, BASE: 0}


# ------------------------------------------------------------------------------------------ make before break


def test_strategy_change_keeps_the_old_pools_serving_until_the_new_one_is_ready() -> None:
    world = World(
        desired=(desired(ENGINE),),
        live={SPEC: live(SPEC, current=False), BASE: live(BASE, current=False)},
        route=True,
        live_route={SPEC: 100, BASE: 0},
        target_weights={ENGINE: 100},
    )
    p = plan(world)
    assert p.prune_pools == ()
    assert p.route_map == {ENGINE: 0, SPEC: 100, BASE: 0}


def test_a_ready_new_pool_takes_the_traffic_then_the_old_pools_go() -> None:
    loaded = {ENGINE: live(ENGINE), SPEC: live(SPEC, current=False), BASE: live(BASE, current=False)}
    move = plan(World((desired(ENGINE),), loaded, True, {ENGINE: 0, SPEC: 100, BASE: 0}, {ENGINE: 100}))
    assert move.route_map == {ENGINE: 100, SPEC: 0}  # base carried nothing: pruned now
    assert move.prune_pools == (BASE,)
    prune = plan(World((desired(ENGINE),), loaded, True, {ENGINE: 100, SPEC: 0, BASE: 0}, {ENGINE: 100}))
    assert set(prune.prune_pools) == {SPEC, BASE}
    assert prune.route_map == {ENGINE: 100}  # their backends leave the route with them


def test_a_new_pool_that_is_partly_ready_is_not_ready_enough_to_replace() -> None:
    world = World(
        desired=(desired(ENGINE, replicas=2),),
        live={ENGINE: live(ENGINE, replicas=2, ready=1), SPEC: live(SPEC, current=False)},
        route=True,
        live_route={ENGINE: 0, SPEC: 100},
        target_weights={ENGINE: 100},
    )
    p = plan(world)
    assert p.prune_pools == () and p.route_map == {ENGINE: 0, SPEC: 100}


def test_without_a_route_old_pools_go_once_the_new_one_is_ready() -> None:
    waiting = World((desired(ENGINE),), {ENGINE: live(ENGINE, ready=0), SPEC: live(SPEC, current=False)}, False,
                    None, {ENGINE: 100})  # fmt: skip
    assert plan(waiting).prune_pools == () and plan(waiting).route_weights == ()
    ready = World((desired(ENGINE),), {ENGINE: live(ENGINE), SPEC: live(SPEC, current=False)}, False, None,
                  {ENGINE: 100})  # fmt: skip
    assert plan(ready).prune_pools == (SPEC,)


def test_an_old_pool_that_serves_nothing_goes_at_once() -> None:
    world = World((desired(ENGINE),), {ENGINE: live(ENGINE, ready=0), SPEC: live(SPEC, current=False, ready=0)},
                  True, {SPEC: 0}, {ENGINE: 100})  # fmt: skip
    assert plan(world).prune_pools == (SPEC,)


# ------------------------------------------------------------------------------------------- single pool


def single(pool: LivePool, want: int | None = 1, surge: int = 0, announced: frozenset[str] = frozenset()) -> World:
    return World((desired(ENGINE, want, surge=surge),), {ENGINE: pool}, True, {ENGINE: 100}, {ENGINE: 100}, announced)


def test_a_single_replica_pool_announces_its_downtime_before_restarting() -> None:
    p = plan(single(live(ENGINE, current=False)))
    assert p.held == frozenset({ENGINE})
    assert p.downtime is not None and "off the air" in p.downtime
    assert reasons(p) == [why.DOWNTIME_AHEAD]
    announced = frozenset({p.announcement}) if p.announcement else frozenset()
    act = plan(single(live(ENGINE, current=False), announced=announced))
    assert act.held == frozenset() and act.downtime is None
    # The restart itself has its own reason: the alerts tell a planned gap from an outage by it.
    assert reasons(act) == [why.PLANNED_RESTART]


def test_an_announcement_for_another_template_does_not_count() -> None:
    p = plan(single(live(ENGINE, current=False), announced=frozenset({f"{ENGINE}@h-older"})))
    assert p.held == frozenset({ENGINE})


def test_replicas_or_surge_roll_a_single_pool_without_announcement() -> None:
    two = plan(single(live(ENGINE, current=False, replicas=2, ready=2), want=2))
    assert two.held == frozenset() and two.downtime is None
    surge = plan(single(live(ENGINE, current=False), surge=1))
    assert surge.held == frozenset() and surge.downtime is None


def test_a_single_pool_that_serves_nothing_restarts_without_announcement() -> None:
    p = plan(single(live(ENGINE, current=False, ready=0)))
    assert p.held == frozenset() and p.downtime is None


def test_an_autoscaled_pool_is_measured_against_its_live_replicas() -> None:
    scaled = live(ENGINE, replicas=4, ready=3)  # the HPA set 4; 3 are ready: scaling, not rolling (issue 14)
    assert not scaled.complete(desired(ENGINE, None)) and scaled.settled(desired(ENGINE, None))
    assert plan(single(scaled, want=None)).settled
    assert plan(single(live(ENGINE, replicas=4, ready=4), want=None)).settled
    assert plan(single(live(ENGINE, current=False, replicas=4, ready=4), want=None)).downtime is None


def test_an_excluded_pool_gets_no_traffic_even_when_ready() -> None:
    world = split(live(SPEC), live(BASE), {SPEC: 100, BASE: 0})
    excluded = World(
        world.desired, world.live, True, world.live_route, world.target_weights, excluded=frozenset({SPEC})
    )
    assert plan(excluded).route_map == {SPEC: 0, BASE: 100}


# ----------------------------------------------------------------------------------------- the Gateway first


def test_no_serving_pool_rolls_or_goes_until_the_gateway_took_the_last_weight_change() -> None:
    """The drained pool may still get requests until the Gateway has taken the route's new weights."""
    drained = split(live(SPEC, current=False), live(BASE), {SPEC: 0, BASE: 100})
    assert SPEC not in plan(drained).held
    waiting = plan(replace(drained, gateway_pending="waiting for the Gateway"))
    assert SPEC in waiting.held and not waiting.settled
    assert reasons(waiting)[-1] == why.WAITING_FOR_GATEWAY and waiting.steps[-1].message == "waiting for the Gateway"
    stale = World(
        desired=(desired(SPEC),),
        live={SPEC: live(SPEC), BASE: live(BASE)},
        route=True,
        live_route={SPEC: 100, BASE: 0},
        target_weights={SPEC: 100},
    )
    assert plan(stale).prune_pools == (BASE,)
    assert plan(replace(stale, gateway_pending="waiting for the Gateway")).prune_pools == ()


def test_a_gateway_wait_holds_nothing_that_serves_no_traffic() -> None:
    idle = split(live(SPEC, current=False, ready=0), live(BASE), {SPEC: 0, BASE: 100})
    p = plan(replace(idle, gateway_pending="waiting for the Gateway"))
    assert SPEC not in p.held and why.WAITING_FOR_GATEWAY not in reasons(p)

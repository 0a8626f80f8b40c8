"""Status conditions: Kubernetes transition semantics, the Ready roll-up, and Degraded kept beside it."""

from __future__ import annotations

from typing import Any

from specserve.api.conditions import DEGRADED, READY
from specserve.api.models import ConditionStatus, LoadSnapshot, Mode, SpecServeStatus, Strategy, Weights
from specserve.status import (
    RECONCILE,
    SWITCHING_LOOP,
    Observation,
    Part,
    PoolHealth,
    RouteHealth,
    invalid_status,
    observed_status,
    pool_moved,
    set_condition,
)

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"


def pool(name: str, desired: int = 1, ready: int = 1) -> PoolHealth:
    return PoolHealth(name, desired, ready, ready, True)


def seen(**kw: object) -> Observation:
    base: dict[str, object] = {
        "generation": 3,
        "strategy": Strategy.TRAFFIC_SPLIT,
        "mode": Mode.SPECULATIVE,
        "weights": Weights(speculative=100, baseline=0),
        "speculative_pool": pool("m-spec"),
        "baseline_pool": pool("m-base"),
        "route": RouteHealth(True, True),
    }
    return Observation(**{**base, **kw})  # type: ignore[arg-type]


def cond(status: SpecServeStatus, type_: str) -> tuple[str, str]:
    (c,) = [c for c in status.conditions if c.type == type_]
    return c.status.value, c.reason


def test_transition_time_moves_only_when_the_status_changes() -> None:
    conds = set_condition([], READY, ConditionStatus.FALSE, "A", "m", 1, T0)
    conds = set_condition(conds, READY, ConditionStatus.FALSE, "B", "other message", 2, T1)
    assert conds[0].last_transition_time == T0 and conds[0].reason == "B" and conds[0].observed_generation == 2
    conds = set_condition(conds, READY, ConditionStatus.TRUE, "C", "", 2, T1)
    assert conds[0].last_transition_time == T1


def test_all_ready_rolls_up_to_ready() -> None:
    status = observed_status(SpecServeStatus(), seen(), T0)
    assert cond(status, READY) == ("True", "Serving")
    assert cond(status, DEGRADED) == ("False", "AsExpected")
    assert status.observed_generation == 3
    assert [c.type for c in status.conditions] == [
        "Ready",
        "SpeculativePoolReady",
        "BaselinePoolReady",
        "RouteReady",
        "Progressing",
        "Degraded",
    ]
    assert all(c.observed_generation == 3 for c in status.conditions)


def test_a_loading_pool_keeps_ready_false() -> None:
    status = observed_status(SpecServeStatus(), seen(baseline_pool=pool("m-base", ready=0)), T0)
    assert cond(status, READY) == ("False", "PoolsNotReady")
    assert cond(status, "BaselinePoolReady") == ("False", "PodsNotReady")


def test_pending_route_keeps_ready_false() -> None:
    status = observed_status(SpecServeStatus(), seen(route=RouteHealth(True, None, "waiting")), T0)
    assert cond(status, READY) == ("False", "RouteNotReady")
    assert cond(status, "RouteReady") == ("Unknown", "Pending")


def test_pool_scaled_to_zero_is_ready_by_spec() -> None:
    status = observed_status(SpecServeStatus(), seen(baseline_pool=pool("m-base", desired=0, ready=0)), T0)
    assert cond(status, READY) == ("True", "Serving")


def test_single_pool_strategies_report_the_unused_flavour() -> None:
    restart = observed_status(
        SpecServeStatus(),
        seen(strategy=Strategy.RESTART, mode=Mode.BASELINE, speculative_pool=None, weights=None),
        T0,
    )
    assert cond(restart, "SpeculativePoolReady") == ("False", "Inactive")
    assert cond(restart, READY) == ("True", "Serving")  # the inactive flavour is not required


def test_invalid_spec_degrades_without_touching_the_rest() -> None:
    good = observed_status(SpecServeStatus(), seen(), T0)
    bad = invalid_status(good, 4, "spec.x: broken", T1)
    assert cond(bad, DEGRADED) == ("True", "InvalidSpec")
    assert cond(bad, READY) == ("True", "Serving")  # still serving the last good spec
    assert bad.observed_generation == 3
    assert bad.active_mode == good.active_mode


def test_api_failures_degrade_and_unready() -> None:
    status = observed_status(SpecServeStatus(), seen(problems=("Deployment/m-spec: HTTP 403",)), T0)
    assert cond(status, READY) == ("False", "ReconcileFailed")
    assert cond(status, DEGRADED) == ("True", "ReconcileFailed")
    assert status.observed_generation is None


def test_pool_health_from_a_live_deployment() -> None:
    live = {
        "metadata": {"generation": 2},
        "status": {"observedGeneration": 1, "readyReplicas": 2, "updatedReplicas": 2},
    }
    assert PoolHealth.observe("p", 2, live).condition()[0] == ConditionStatus.FALSE  # controller has not caught up
    live["status"]["observedGeneration"] = 2
    assert PoolHealth.observe("p", 2, live).condition()[0] == ConditionStatus.TRUE
    assert PoolHealth.observe("p", 1, None).condition()[1] == "PodsNotReady"


def test_route_health_reads_gateway_status() -> None:
    rejected = {"status": {"parents": [{"conditions": [{"type": "Accepted", "status": "False", "message": "no"}]}]}}
    assert RouteHealth.observe(True, rejected).condition() == (ConditionStatus.FALSE, "NotAccepted", "no")
    assert RouteHealth.observe(False, None).condition()[1] == "NotRequested"


def test_conditions_of_the_switching_loop_are_left_to_it() -> None:
    """The reconcile neither writes (status.RECONCILE) nor invents the loop's conditions: they are kept as read."""
    first = observed_status(SpecServeStatus(), seen(), T0)
    assert "MetricsAvailable" not in {c.type for c in first.conditions}
    loop = set_condition(first.conditions, "Switching", ConditionStatus.TRUE, "Moving", "to baseline", 3, T1)
    again = observed_status(first.model_copy(update={"conditions": loop}), seen(), T1)
    assert cond(again, "Switching") == ("True", "Moving")


def test_progressing_says_which_step_runs() -> None:
    rolling = observed_status(SpecServeStatus(), seen(progressing=("RollingPool", "rolling m-base")), T0)
    assert cond(rolling, "Progressing") == ("True", "RollingPool")
    assert cond(observed_status(rolling, seen(), T1), "Progressing") == ("False", "Settled")


def test_a_conflict_names_the_object_and_unreadies() -> None:
    status = observed_status(SpecServeStatus(), seen(conflicts=("Service/m-spec",)), T0)
    assert cond(status, READY) == ("False", "Conflict") and cond(status, DEGRADED) == ("True", "Conflict")
    assert "Service/m-spec" in next(c.message for c in status.conditions if c.type == DEGRADED)
    assert status.observed_generation is None


def test_an_optional_part_has_its_own_condition_and_never_unreadies() -> None:
    part = Part("PodMonitorReady", ConditionStatus.FALSE, "NotInstalled", "no Prometheus Operator")
    status = observed_status(SpecServeStatus(), seen(parts=(part,)), T0)
    assert cond(status, "PodMonitorReady") == ("False", "NotInstalled")
    assert cond(status, READY) == ("True", "Serving")
    dropped = observed_status(status, seen(dropped_parts=("PodMonitorReady",)), T1)
    assert not [c for c in dropped.conditions if c.type == "PodMonitorReady"]


def test_a_read_error_keeps_every_condition_but_degraded() -> None:
    good = observed_status(SpecServeStatus(), seen(), T0)
    blind = observed_status(good, seen(speculative_pool=None, read_errors=("listing deployments: timeout",)), T1)
    assert [c for c in blind.conditions if c.type != DEGRADED] == [c for c in good.conditions if c.type != DEGRADED]
    assert cond(blind, DEGRADED) == ("True", "ReadFailed")
    assert blind.pools == good.pools and blind.weights == good.weights


def test_pools_are_reported_as_observed() -> None:
    status = observed_status(SpecServeStatus(), seen(pools=(PoolHealth("m-spec", 2, 1, 2, True, "speculative"),)), T0)
    assert [p.model_dump(exclude_none=True) for p in status.pools] == [
        {"role": "speculative", "name": "m-spec", "desired": 2, "ready": 1, "updated": 2}
    ]


def test_an_invalid_spec_still_reports_the_running_pools() -> None:
    good = observed_status(SpecServeStatus(), seen(), T0)
    running = {"BaselinePoolReady": PoolHealth("m-base", 1, 0, 1, True, "baseline")}
    bad = invalid_status(good, 4, "spec.x: broken", T1, running)
    assert cond(bad, "BaselinePoolReady") == ("False", "PodsNotReady")
    assert [p.name for p in bad.pools] == ["m-base"]


def test_a_pool_moved_when_its_live_counts_differ_from_the_recorded_ones_or_it_is_not_recorded() -> None:
    recorded = [{"role": "speculative", "name": "m-spec", "desired": 2, "ready": 2, "updated": 2}]

    def deployment(name: str, ready: int, updated: int) -> dict[str, Any]:
        return {"metadata": {"name": name}, "status": {"readyReplicas": ready, "updatedReplicas": updated}}

    assert not pool_moved(recorded, deployment("m-spec", 2, 2))
    assert pool_moved(recorded, deployment("m-spec", 1, 2))  # lost a Ready pod while we were not watching
    assert pool_moved(recorded, deployment("m-spec", 2, 1))
    assert pool_moved(recorded, deployment("m-base", 0, 0))  # a pool the status does not list yet
    # The server drops zero counts (omitempty): a pool with nothing Ready matches a recorded 0.
    zero = [{"role": "engine", "name": "m-engine", "desired": 1, "ready": 0, "updated": 0}]
    assert not pool_moved(zero, {"metadata": {"name": "m-engine"}, "status": {}})


def test_each_writer_applies_only_its_own_fields_and_compares_conditions_by_type() -> None:
    reconciled = observed_status(SpecServeStatus(), seen(), T0)
    loop = set_condition(reconciled.conditions, "Switching", ConditionStatus.FALSE, "Stable", "m", 3, T0)
    both = reconciled.model_copy(update={"conditions": loop, "load": LoadSnapshot(concurrency=4.0)})
    mine, theirs = RECONCILE.body(both), SWITCHING_LOOP.body(both)
    assert "load" not in mine and "Switching" not in {c["type"] for c in mine["conditions"]}
    assert mine["activeMode"] == "Speculative" and "Ready" in {c["type"] for c in mine["conditions"]}
    assert theirs["load"]["concurrency"] == 4.0 and "activeMode" not in theirs
    assert [c["type"] for c in theirs["conditions"]] == ["Switching"]
    assert not RECONCILE.differs(both, reconciled)  # the other writer's fields are none of its business
    shuffled = both.model_copy(update={"conditions": list(reversed(both.conditions))})
    assert not RECONCILE.differs(shuffled, both) and not SWITCHING_LOOP.differs(shuffled, both)
    moved = both.model_copy(update={"weights": Weights(speculative=0, baseline=100)})
    assert RECONCILE.differs(both, moved) and not SWITCHING_LOOP.differs(both, moved)

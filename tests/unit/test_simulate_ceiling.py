"""The ceiling of rules without foresight (simulate.ceiling): the replayed plan's restarts, each held until the mode
it rolls into is the better one and the regret since then reaches a share of the roll's cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from specserve.api.models import Mode
from specserve.policy.restart import pool_rate, switch_cost
from specserve.policy.types import Sample
from specserve_tools.simulate.baselines import Schedule
from specserve_tools.simulate.ceiling import HeldPlan, plant, role
from specserve_tools.simulate.setup import Command, Setup
from specserve_tools.simulate.suite import EASY, Job, run_case, table
from tests.unit.test_simulate_episodes import _scenario

STEP = 15.0
CROSSOVER = 64.0  # the illustrative profile's, per replica (one replica)
_BACK_AND_FORTH = [Command(mode=Mode.BASELINE), None, Command(mode=Mode.SPECULATIVE)]  # the plan's, from eval 1


def _setup() -> Setup:
    setup = _scenario().setup
    assert setup.speculative_replicas == 1 and setup.initial_mode is Mode.SPECULATIVE
    return setup


def _held(share: float, commands: list[Command | None]) -> HeldPlan:
    held = HeldPlan(Schedule("plan", Command(mode=Mode.SPECULATIVE), [None, *commands]), share)
    held.start(_setup(), 10.0)
    return held


def _walk(held: HeldPlan, demands: Sequence[float | None]) -> list[Command | None]:
    return [held.decide(Sample(time=(i + 1) * STEP, demand=d), False) for i, d in enumerate(demands)]


def test_a_restart_the_plan_makes_before_the_crossing_waits_for_it() -> None:
    """The plan rolls into baseline while speculation still serves more (it knows the demand will rise): held
    with share 0, the restart happens at the first reading where baseline serves more, not before."""
    demands = [40.0, 50.0, 60.0, 70.0, 80.0]
    out = _walk(_held(0.0, [Command(mode=Mode.BASELINE)]), demands)
    assert out[:3] == [None, None, None]
    assert out[3] == Command(mode=Mode.BASELINE)
    assert out[4] is None


def test_a_share_of_the_cost_waits_for_that_much_regret() -> None:
    """With share 0.25 the restart waits until baseline's advantage, summed from the crossing, reaches a quarter
    of what the roll costs there; a larger share waits longer."""
    setup, curves = _setup(), plant(_setup())
    demand = 1.5 * CROSSOVER
    gain = pool_rate(curves, Mode.BASELINE, demand, 1) - pool_rate(curves, Mode.SPECULATIVE, demand, 1)
    cost = switch_cost(curves, Mode.SPECULATIVE, demand, 1, setup.profile.startup_seconds, 0, setup.slo.tpot)
    assert gain > 0 and cost > 0
    readings = int(0.25 * cost / (gain * STEP)) + 3
    walk = [demand] * readings
    quarter = _walk(_held(0.25, [Command(mode=Mode.BASELINE)]), walk)
    half = _walk(_held(0.5, [Command(mode=Mode.BASELINE)]), walk * 2)
    first = quarter.index(Command(mode=Mode.BASELINE))
    # the first reading starts the sum (no interval before it): the k-th after it has summed k intervals
    assert first == pytest.approx(0.25 * cost / (gain * STEP), abs=1.0)
    assert half.index(Command(mode=Mode.BASELINE)) > first


def test_a_restart_the_plan_takes_back_is_never_made_and_unknown_demand_holds() -> None:
    """The plan turns back to the mode the pool serves in before the hold ended: nothing rolls. An unknown demand
    neither releases a held restart nor counts."""
    assert _walk(_held(0.0, [Command(mode=Mode.BASELINE), Command(mode=Mode.SPECULATIVE)]), [40.0, 80.0, 80.0]) == [
        None,
        None,
        None,
    ]
    assert _walk(_held(0.0, [Command(mode=Mode.BASELINE)]), [None, None, 80.0]) == [
        None,
        None,
        Command(mode=Mode.BASELINE),
    ]


def test_a_held_restart_keeps_min_dwell_after_the_last() -> None:
    """Holding brought two of the plan's restarts closer together than min dwell (the plan rolls into baseline at
    15 s, held to 30 s, and back at 45 s): the second waits until 120 s after the first began."""
    held = HeldPlan(Schedule("plan", Command(mode=Mode.SPECULATIVE), [None, *_BACK_AND_FORTH]), 0.0)
    held.start(replace(_setup(), min_dwell=120.0), 10.0)
    out = _walk(held, [40.0, 80.0, *[10.0] * 9])  # readings at 15, 30, ..., 165 s
    assert out[1] == Command(mode=Mode.BASELINE)
    assert out.index(Command(mode=Mode.SPECULATIVE)) == 9  # at 150 s


def test_the_suite_reports_the_held_plans_beside_the_operator() -> None:
    """`--ceiling`: the held rows are scored like the others, and holding the plan's restarts longer never gains on
    this judged diurnal day (seed 7 case 34: 2 replicas, a 3.6-minute roll)."""
    case = run_case(Job(7, 34, ceilings=(0.0, 0.5)))
    assert case.strategy == "Restart" and (case.plan_gain or 0.0) >= EASY
    at_crossing, later = case.policies[role(0.0)], case.policies[role(0.5)]
    assert at_crossing["captured"] is not None and later["captured"] is not None
    assert later["captured"] <= at_crossing["captured"] <= 1.0 + 1e-9
    assert at_crossing["switches"] == case.policies["plan"]["switches"]
    rows = {r.role for r in table([case])}
    assert {"learned", "plan", role(0.0), role(0.5)} <= rows

"""How a simulated day starts: a TrafficSplit SpecServe row on a closed loop starts at the split its curves hold for
the clients at hand (a day is a window of continuous operation, as the static splits and the replayed plan start in
theirs), an open loop starts from the initial mode's weights (it starts empty)."""

from __future__ import annotations

from specserve.api.models import Mode, Strategy
from specserve.api.validation import parse_object
from specserve.policy.split import target_weights
from specserve_tools.emulator.profile import load_profile
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.compare import compare
from specserve_tools.simulate.learned import learned_policy
from specserve_tools.simulate.policy import SpecServePolicy
from specserve_tools.simulate.scenario import DEFAULT_SPEC, Scenario, scenario, with_strategy
from specserve_tools.simulate.setup import bin_trace
from specserve_tools.simulate.synthetic import step

CLIENTS = 160.0  # illustrative-crossover-8b: speculation wins below 64 per replica; at 160 on 1 + 1 the best is a split


def split_scenario() -> Scenario:
    obj = with_strategy(parse_object(DEFAULT_SPEC), Strategy.TRAFFIC_SPLIT)
    return scenario(obj, load_profile("illustrative-crossover-8b"), Slo(5.0, 0.1))


def test_a_closed_loop_day_starts_at_the_split_for_its_clients_and_an_open_loop_on_the_initial_pool() -> None:
    sc = split_scenario()
    assert sc.curves is not None
    expected, _ = target_weights(sc.curves, CLIENTS, 1, 1, sc.knobs.tpot_slo)
    assert 0 < expected.speculative < 100
    for policy in (
        SpecServePolicy(sc.knobs, sc.curves, Mode.SPECULATIVE),
        learned_policy(sc.setup, sc.knobs, sc.curves),
    ):
        assert policy.start(sc.setup, CLIENTS).speculative_weight == expected.speculative
        assert policy.state.weights == expected  # the policy's memory holds what the route serves
    open_loop = SpecServePolicy(sc.knobs, sc.curves, Mode.SPECULATIVE).start(sc.setup, None)
    assert open_loop.speculative_weight == 100


def test_the_day_starts_there_in_the_simulation() -> None:
    # The shipped step trace starts at 160 clients here (high first): the SpecServe rows' first point is the split.
    sc = split_scenario()
    result = compare(sc.setup, bin_trace(step(low=CLIENTS, high=16.0), 1.0), sc.knobs, sc.curves, jobs=1)
    assert sc.curves is not None
    expected, _ = target_weights(sc.curves, CLIENTS, 1, 1, sc.knobs.tpot_slo)
    for summary, run in zip(result.summaries, result.runs, strict=True):
        if summary.role in ("specserve", "learned"):
            assert run.timeline.speculative_share[0] == expected.speculative, summary.role

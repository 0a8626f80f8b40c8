"""Policy curves and knobs: from the spec (measured curves, crossover alone, neither) to what the policy uses."""

from __future__ import annotations

import pytest

from specserve.api.models import Mode, Strategy
from specserve.policy.curves import better_mode, crossover, curves_from_spec, model_from_crossover
from specserve.policy.knobs import DEFAULT_STARTUP_CAP_SECONDS, knobs_from_spec
from tests.unit.policy_helpers import ILLUSTRATIVE, SEED, profile_curves, specserve


def points(curve: list[tuple[float, float]]) -> list[dict[str, float]]:
    return [{"concurrency": x, "tokensPerSecond": y} for x, y in curve]


def test_measured_curves_come_from_the_spec_and_give_the_calibrated_crossover() -> None:
    prof = profile_curves(ILLUSTRATIVE)
    obj = specserve(
        Strategy.TRAFFIC_SPLIT,
        {"curves": {"speculative": points(prof.speculative.points()), "baseline": points(prof.baseline.points())}},
    )
    curves = curves_from_spec(obj.spec.switching)
    assert curves is not None and not curves.modelled
    assert curves.speculative.xs == prof.speculative.xs
    assert curves.speculative.ys == pytest.approx(prof.speculative.ys)
    assert crossover(curves) == pytest.approx(64.0)


def test_seed_curves_have_no_crossover_and_baseline_is_the_better_mode() -> None:
    curves = profile_curves(SEED)
    assert crossover(curves) is None
    assert better_mode(curves) is Mode.BASELINE


@pytest.mark.parametrize("c", [1.5, 8.0, 20.0, 64.0, 300.0])
def test_crossover_alone_builds_a_model_crossing_there(c: float) -> None:
    obj = specserve(Strategy.RESTART, {"crossoverConcurrency": c})
    curves = curves_from_spec(obj.spec.switching)
    assert curves is not None and curves.modelled
    assert crossover(curves) == pytest.approx(c, rel=1e-6)
    # speculation wins below, loses above: the model keeps the ordering the crossover states
    assert curves.rate(Mode.SPECULATIVE, c / 2) > curves.rate(Mode.BASELINE, c / 2)
    assert curves.rate(Mode.SPECULATIVE, 2 * c) < curves.rate(Mode.BASELINE, 2 * c)


def test_measured_curves_win_over_the_crossover_model() -> None:
    prof = profile_curves(ILLUSTRATIVE)
    obj = specserve(
        Strategy.RESTART,
        {
            "crossoverConcurrency": 10,
            "curves": {"speculative": points(prof.speculative.points()), "baseline": points(prof.baseline.points())},
        },
    )
    curves = curves_from_spec(obj.spec.switching)
    assert curves is not None and not curves.modelled


def test_neither_curves_nor_crossover_gives_none() -> None:
    assert curves_from_spec(specserve(Strategy.RESTART).spec.switching) is None


def test_rate_below_the_first_point_runs_to_zero_not_flat() -> None:
    curves = profile_curves(ILLUSTRATIVE)  # first point at concurrency 1
    assert curves.rate(Mode.BASELINE, 0.0) == 0.0
    assert curves.rate(Mode.BASELINE, 0.5) == pytest.approx(curves.baseline.at(1.0) / 2)
    assert curves.rate(Mode.BASELINE, 1000.0) == curves.baseline.ys[-1]  # flat beyond the last point


def test_model_is_scale_free_in_its_ratios() -> None:
    small, large = model_from_crossover(10), model_from_crossover(100)
    ratio_small = small.rate(Mode.SPECULATIVE, 5) / small.rate(Mode.BASELINE, 5)
    ratio_large = large.rate(Mode.SPECULATIVE, 50) / large.rate(Mode.BASELINE, 50)
    assert ratio_small == pytest.approx(ratio_large, rel=0.05)


def test_knobs_from_spec_maps_every_field_and_defaults_startup() -> None:
    obj = specserve(
        Strategy.TRAFFIC_SPLIT,
        {
            "crossoverConcurrency": 30,
            "hysteresis": 0.2,
            "evaluationIntervalSeconds": 20,
            "upStabilizationSeconds": 30,
            "downStabilizationSeconds": 600,
            "minDwellSeconds": 120,
            "maxRestartsPerDay": 3,
            "advisory": True,
        },
        pools={"speculative": {"replicas": 2}, "baseline": {"replicas": 3}},
    )
    k = knobs_from_spec(obj)
    assert (k.crossover, k.hysteresis, k.evaluation_interval) == (30.0, 0.2, 20.0)
    assert (k.up_stabilization, k.down_stabilization, k.min_dwell) == (30.0, 600.0, 120.0)
    assert (k.max_restarts_per_day, k.advisory) == (3, True)
    assert (k.speculative_replicas, k.baseline_replicas) == (2, 3)
    # startupTimeoutSeconds defaults to 3600 s: a timeout, capped to the documented estimate
    assert k.startup_seconds == DEFAULT_STARTUP_CAP_SECONDS
    assert knobs_from_spec(obj, startup_seconds=510.0).startup_seconds == 510.0
    assert not k.adaptive_explicit


def test_knobs_single_pool_strategies_have_no_baseline_replicas() -> None:
    obj = specserve(Strategy.RESTART, engine={"startupTimeoutSeconds": 300}, pools={"baseline": {"replicas": 4}})
    k = knobs_from_spec(obj)
    assert k.baseline_replicas == 0
    assert k.startup_seconds == 300.0  # a timeout below the cap is the estimate


def test_min_dwell_and_down_window_default_by_strategy_and_a_set_value_wins() -> None:
    # a Restart or Adaptive switch rolls pods; a TrafficSplit one only moves weights
    for strategy, wait in ((Strategy.TRAFFIC_SPLIT, 60.0), (Strategy.RESTART, 300.0), (Strategy.ADAPTIVE, 300.0)):
        k = knobs_from_spec(specserve(strategy))
        assert (k.min_dwell, k.down_stabilization) == (wait, wait)
    assert (
        knobs_from_spec(specserve(Strategy.TRAFFIC_SPLIT, {"downStabilizationSeconds": 300})).down_stabilization == 300
    )
    assert knobs_from_spec(specserve(Strategy.TRAFFIC_SPLIT, {"minDwellSeconds": 300})).min_dwell == 300.0
    assert knobs_from_spec(specserve(Strategy.RESTART, {"minDwellSeconds": 0})).min_dwell == 0.0

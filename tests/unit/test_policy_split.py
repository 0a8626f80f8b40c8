"""TrafficSplit's split: the optimum on hand-solvable curves, exactness against a brute-force scan on the shipped
profiles, the TPOT tie-break, unready pools, and the flow-balance weights."""

from __future__ import annotations

import time

import pytest

from specserve.policy.split import (
    SLO_MARGIN,
    TOKENS_TIE,
    best_split,
    served,
    slo_loads,
    target_weights,
    weights_for,
)
from specserve.policy.weights import weight_band
from tests.unit.policy_helpers import ILLUSTRATIVE, SEED, linear_curves, profile_curves

# speculative: 10 tok/s per request up to 10 in flight, then saturated at 100; baseline: 5 per request up to 20
KNEES = linear_curves([(1, 10), (10, 100)], [(1, 5), (20, 100), (40, 100)])


def test_split_optimum_on_hand_solved_curves() -> None:
    # below 10 in flight the speculative pool is twice as fast per request: everything goes there
    low = best_split(KNEES, 6, 1, 1)
    assert (low.speculative, low.baseline, low.tokens_per_second) == pytest.approx((6, 0, 60))
    # at 30 both pools sit at their knees: 10 + 20 in flight, 100 + 100 tok/s
    high = best_split(KNEES, 30, 1, 1)
    assert (high.speculative, high.baseline, high.tokens_per_second) == pytest.approx((10, 20, 200))
    # between: the speculative pool is saturated at 10, the rest is the baseline's
    mid = best_split(KNEES, 15, 1, 1)
    assert (mid.speculative, mid.tokens_per_second) == pytest.approx((10, 125))


def test_weights_follow_flow_balance() -> None:
    high = best_split(KNEES, 30, 1, 1)
    w = weights_for(high)
    # equal tokens/s on both pools: equal arrival shares, though one holds twice the requests in flight
    assert (w.speculative, w.baseline) == (50, 50)
    w6 = weights_for(best_split(KNEES, 6, 1, 1))
    assert (w6.speculative, w6.baseline) == (100, 0)


@pytest.mark.parametrize("name", [ILLUSTRATIVE, SEED])
@pytest.mark.parametrize(("n_s", "n_b"), [(1, 1), (2, 3)])
def test_split_is_exact_against_a_fine_scan(name: str, n_s: int, n_b: int) -> None:
    curves = profile_curves(name)
    for demand in (0.5, 3, 10, 30, 64, 100, 150, 250, 600, 2000):
        best = best_split(curves, demand, n_s, n_b)
        scan = max(served(curves, demand * i / 2000, demand, n_s, n_b).tokens_per_second for i in range(2001))
        alone = min(best.speculative, best.baseline) == 0  # one pool, kept when a split gains < TOKENS_TIE
        assert best.tokens_per_second >= scan * (1 - (TOKENS_TIE if alone else 1e-9)), (demand, best, scan)
        assert best.speculative + best.baseline == pytest.approx(demand)


def test_light_load_stays_on_one_pool_when_a_split_gains_less_than_the_tie() -> None:
    curves = profile_curves(ILLUSTRATIVE)
    # 8 in flight on 1+1 (an eighth of the crossover): one request on the idle baseline GPU would serve ~1 % more
    # tokens/s and cost ~2 % mean TPOT
    best = best_split(curves, 8, 1, 1)
    assert best.speculative == 8 and weights_for(best).speculative == 100
    split = max((served(curves, 8 - i / 10, 8, 1, 1) for i in range(1, 41)), key=lambda s: s.tokens_per_second)
    assert best.tokens_per_second < split.tokens_per_second < best.tokens_per_second * (1 + TOKENS_TIE)
    assert best.mean_tpot < split.mean_tpot
    # at 16 in flight the split gains more than the tie (and lowers TPOT too): both pools serve
    assert best_split(curves, 16, 1, 1).baseline > 0


def test_low_demand_goes_all_to_speculation_and_high_demand_keeps_some() -> None:
    curves = profile_curves(ILLUSTRATIVE)
    assert target_weights(curves, 2, 1, 1)[0].speculative == 100
    assert target_weights(curves, 0, 1, 1)[0].speculative == 100  # idle: the pool with the steeper start
    w_high = target_weights(curves, 400, 1, 1)[0]
    # well above the crossover (64/replica) the speculative GPUs still add capacity
    assert 20 <= w_high.speculative <= 60
    assert w_high.speculative + w_high.baseline == 100


def test_seed_profile_idles_on_baseline_but_uses_the_speculative_gpus_under_load() -> None:
    curves = profile_curves(SEED)
    assert target_weights(curves, 0, 1, 1)[0].speculative == 0
    w = target_weights(curves, 200, 1, 1)[0]
    assert 0 < w.speculative < 50


def test_ties_go_to_the_lower_mean_tpot() -> None:
    same = linear_curves([(1, 10), (10, 100)], [(1, 10), (10, 100)])
    # deep in saturation every split serves 200 tok/s; balancing the requests halves the worst TPOT
    split = best_split(same, 400, 1, 1)
    assert split.tokens_per_second == pytest.approx(200)
    assert split.speculative == pytest.approx(200)
    assert split.mean_tpot == pytest.approx(2.0)  # 200 requests share 100 tok/s on each pool


def test_a_pool_without_ready_replicas_gets_nothing() -> None:
    curves = profile_curves(ILLUSTRATIVE)
    no_spec = best_split(curves, 10, 0, 1)
    assert (no_spec.speculative, weights_for(no_spec).speculative) == (0, 0)
    no_base = best_split(curves, 500, 2, 0)
    assert (no_base.baseline, weights_for(no_base).speculative) == (0, 100)


def test_weight_band_contains_the_target_and_widens_with_hysteresis() -> None:
    curves = profile_curves(ILLUSTRATIVE)
    target, _, lo, hi = weight_band(curves, 80, 1, 1, 0.0)
    assert lo == hi == target.speculative
    target, _, lo2, hi2 = weight_band(curves, 80, 1, 1, 0.3)
    assert lo2 <= target.speculative <= hi2
    assert hi2 - lo2 > 0


def test_split_is_fast_enough_for_a_simulated_day() -> None:
    curves = profile_curves(ILLUSTRATIVE)
    start = time.process_time()
    for i in range(6000):
        target_weights(curves, (i % 500) * 0.7, 2, 2)
    assert time.process_time() - start < 5.0  # ~0.1 ms each here; generous for a shared machine


def test_slo_loads_are_where_the_tpot_reaches_the_slo() -> None:
    curves = profile_curves(SEED)
    for curve in (curves.speculative, curves.baseline):
        roots = slo_loads(curve, 0.09)
        assert roots
        for x in roots:
            assert x / curve.at(x) == pytest.approx(0.09)


@pytest.mark.parametrize("demand", [20.0, 60.0, 90.0])  # up to ~96 in flight fit within 90 ms
def test_with_an_slo_the_split_keeps_both_pools_within_it_when_they_can(demand: float) -> None:
    seed = profile_curves(SEED)
    split = best_split(seed, demand, 1, 1, slo=0.1)
    assert split.goodput == pytest.approx(split.tokens_per_second)  # every pool within the SLO
    for load, tps in ((split.speculative, split.speculative_tps), (split.baseline, split.baseline_tps)):
        assert load == 0 or load / tps <= 0.1 * SLO_MARGIN + 1e-9
    # without the SLO the tokens-only optimum at 100 in flight runs the speculative pool at or over it
    plain = best_split(seed, 100.0, 1, 1)
    assert plain.speculative / plain.speculative_tps >= 0.1 * SLO_MARGIN


def test_under_overload_the_slo_split_keeps_the_pool_that_can_meet_it_within_it() -> None:
    seed = profile_curves(SEED)
    split = best_split(seed, 300.0, 1, 1, slo=0.1)
    assert split.baseline / split.baseline_tps <= 0.1 * SLO_MARGIN + 1e-9
    assert split.goodput == pytest.approx(split.baseline_tps) and split.goodput > 700
    # the excess waits on the speculative pool rather than pushing both pools over the SLO
    assert split.speculative > 200


@pytest.mark.parametrize("demand", [10.0, 50.0, 120.0, 400.0])
def test_slo_split_is_exact_against_a_fine_scan(demand: float) -> None:
    seed = profile_curves(SEED)
    best = best_split(seed, demand, 1, 1, slo=0.1)
    scan = max(served(seed, demand * i / 4000, demand, 1, 1, 0.1).goodput for i in range(4001))
    alone = min(best.speculative, best.baseline) == 0
    assert best.goodput >= scan * (1 - (TOKENS_TIE if alone else 1e-9))

"""TrafficSplit with both pools on the same GPUs (spec.placement.gpuSharing Shared): one capacity between them, so
the policy weighs only the extremes, moves in one step, waits out min dwell where it is, and learns a pool's curve
only while the other one is idle. The curves are the H200's NGRAM-4 / plain shape (docs/real-engine.md): NGRAM
2.6x faster at 1 in flight, plain ahead from about 40."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from specserve.api.models import GpuSharing, Mode, Strategy, Weights
from specserve.api.validation import parse_object
from specserve.policy.closed_loop import candidates
from specserve.policy.knobs import knobs_from_spec, shares_gpus
from specserve.policy.learning import observations
from specserve.policy.switching import decide
from specserve.policy.types import Action, PolicyState, PoolSignal, Sample
from tests.unit.policy_helpers import knobs, linear_curves, specserve

H200 = linear_curves(
    [(1, 560), (4, 2000), (16, 5000), (64, 7000), (128, 8000)],
    [(1, 214), (4, 830), (16, 3000), (64, 9000), (128, 10500)],
)
CALM: dict[str, Any] = {
    "evaluation_interval": 2.0,
    "up_stabilization": 0.0,
    "down_stabilization": 0.0,
    "min_dwell": 0.0,
}


def state(spec_weight: int, since: float = -10_000.0) -> PolicyState:
    mode = Mode.SPECULATIVE if spec_weight >= 50 else Mode.BASELINE
    return PolicyState(
        mode=mode, mode_since=since, weights=Weights(speculative=spec_weight, baseline=100 - spec_weight)
    )


def loads(t: float, c_spec: float | None, c_base: float | None) -> Sample:
    demand = (c_spec or 0.0) + (c_base or 0.0)
    return Sample(
        time=t,
        demand=demand,
        speculative=PoolSignal(ready_replicas=1, running=c_spec, queued=0.0 if c_spec is not None else None),
        baseline=PoolSignal(ready_replicas=1, running=c_base, queued=0.0 if c_base is not None else None),
    )


def settled(t: float, demand: float, now: PolicyState) -> Sample:
    """The loads once the weights in force have settled (a crude plant: in flight in proportion to the weights)."""
    w = now.weights or Weights(speculative=100, baseline=0)
    return loads(t, demand * w.speculative / 100, demand * w.baseline / 100)


def test_only_the_extremes_are_weighed_on_shared_gpus() -> None:
    assert candidates(100, shared=True) == [0, 100]
    assert candidates(37, shared=True) == [0, 37, 100]
    assert len(candidates(100)) > 3  # exclusive pools weigh the whole range


@pytest.mark.parametrize("shared", [False, True])
def test_high_load_on_the_speculative_pool_moves_all_of_it_in_one_step_only_when_shared(shared: bool) -> None:
    k = knobs(Strategy.TRAFFIC_SPLIT, **CALM, shared_gpus=shared)
    verdict = decide(k, H200, state(100), loads(0.0, 128.0, 0.0))
    assert verdict.action is Action.SET_WEIGHTS, verdict.reason
    assert verdict.state.weights is not None
    if shared:
        assert verdict.state.weights.speculative == 0, verdict.reason
    else:
        # exclusive pools: a bounded step towards a split (the independent-capacity model)
        assert verdict.state.weights.speculative == 75, verdict.reason


def test_shared_gpus_come_back_to_speculation_in_one_step_at_low_load() -> None:
    verdict = decide(knobs(Strategy.TRAFFIC_SPLIT, **CALM, shared_gpus=True), H200, state(0), loads(0.0, 0.0, 4.0))
    assert verdict.state.weights == Weights(speculative=100, baseline=0), verdict.reason


def test_shared_gpus_never_settle_on_a_split_where_exclusive_pools_do() -> None:
    """At 60 in flight the independent model splits the load (two pools' capacities add up); on shared GPUs the
    weights stay on the better pool alone."""
    exclusive = shared = state(0)
    for i in range(12):
        exclusive = decide(
            knobs(Strategy.TRAFFIC_SPLIT, **CALM), H200, exclusive, settled(2.0 * i, 60.0, exclusive)
        ).state
        shared = decide(
            knobs(Strategy.TRAFFIC_SPLIT, **CALM, shared_gpus=True), H200, shared, settled(2.0 * i, 60.0, shared)
        ).state
    assert exclusive.weights is not None and 0 < exclusive.weights.speculative < 100
    assert shared.weights == Weights(speculative=0, baseline=100)


def test_min_dwell_holds_shared_weights_where_they_are_not_at_the_50_50_line() -> None:
    k = knobs(Strategy.TRAFFIC_SPLIT, **{**CALM, "min_dwell": 60.0}, shared_gpus=True)
    young = state(100, since=-10.0)
    young = replace(young, last_switch=-10.0)
    verdict = decide(k, H200, young, loads(0.0, 128.0, 0.0))
    assert verdict.state.weights == Weights(speculative=100, baseline=0), verdict.reason
    assert verdict.action is Action.HOLD


def test_open_loop_rules_pick_an_extreme_on_shared_gpus() -> None:
    """Loads per pool unread (an engine that exports no running count): the open-loop rules from the demand."""
    blind = Sample(
        time=0.0,
        demand=120.0,
        speculative=PoolSignal(ready_replicas=1),
        baseline=PoolSignal(ready_replicas=1),
    )
    shared = decide(knobs(Strategy.TRAFFIC_SPLIT, **CALM, shared_gpus=True), H200, state(100), blind)
    assert shared.state.weights == Weights(speculative=0, baseline=100), shared.reason
    exclusive = decide(knobs(Strategy.TRAFFIC_SPLIT, **CALM), H200, state(100), blind)
    assert exclusive.state.weights is not None and exclusive.state.weights.speculative == 75, exclusive.reason


def test_a_pool_on_shared_gpus_teaches_its_curve_only_while_the_other_is_idle() -> None:
    def pools(c_base: float | None) -> Sample:
        return Sample(
            time=0.0,
            demand=40.0 + (c_base or 0.0),
            speculative=PoolSignal(ready_replicas=1, running=40.0, queued=0.0, tokens_per_second=3000.0),
            baseline=PoolSignal(ready_replicas=1, running=c_base, queued=0.0, tokens_per_second=4000.0),
        )

    both = pools(30.0)
    assert {m.mode for m in observations(both, Strategy.TRAFFIC_SPLIT)} == {Mode.SPECULATIVE, Mode.BASELINE}
    assert observations(both, Strategy.TRAFFIC_SPLIT, shared_gpus=True) == ()
    seen = observations(pools(0.0), Strategy.TRAFFIC_SPLIT, shared_gpus=True)
    assert [m.mode for m in seen] == [Mode.SPECULATIVE]
    assert observations(pools(None), Strategy.TRAFFIC_SPLIT, shared_gpus=True) == ()  # unknown is not idle


def test_gpu_sharing_reaches_the_knobs_for_traffic_split_only() -> None:
    shared = specserve(Strategy.TRAFFIC_SPLIT, placement={"gpuSharing": "Shared"})
    assert shared.spec.placement.gpu_sharing is GpuSharing.SHARED
    assert shares_gpus(shared) and knobs_from_spec(shared).shared_gpus
    assert not knobs_from_spec(specserve(Strategy.TRAFFIC_SPLIT)).shared_gpus
    restart = specserve(Strategy.RESTART, placement={"gpuSharing": "Shared"})
    assert not knobs_from_spec(restart).shared_gpus  # one pool: nothing to share with


def test_a_misspelt_gpu_sharing_is_refused_with_the_field_and_the_choices() -> None:
    body = specserve(Strategy.TRAFFIC_SPLIT).model_dump(by_alias=True, mode="json", exclude_none=True)
    body["spec"]["placement"]["gpuSharing"] = "TimeSliced"
    with pytest.raises(Exception) as err:
        parse_object(body)
    assert "gpuSharing" in str(err.value) and "Shared" in str(err.value)


# this session's calibration on the H200 (docs/real-engine.md, third session): the two curves within 2 % from 64 up
LEVEL = linear_curves(
    [(1, 532), (4, 1660), (16, 2819), (128, 5338)],
    [(1, 214), (4, 780), (16, 2392), (128, 5270)],
)


def test_shared_weights_do_not_flap_where_the_pools_serve_alike() -> None:
    """On the H200 the independent pools' transient made the move look like a gain from either extreme
    (+2.8 % to 0/100 from 100/0 at 120 in flight, +5.9 % back from 0/100 at 117.5), so the weights flapped
    every 4-6 s; settled at the total demand, the better pool alone wins from both sides and the weights stay."""
    k = knobs(Strategy.TRAFFIC_SPLIT, **CALM, shared_gpus=True)
    for start_weight in (100, 0):
        now = state(start_weight)
        moves = 0
        for i in range(20):
            demand = 120.0 + (3.0 if i % 2 else -3.0)  # a closed loop's demand wandering around 120
            verdict = decide(k, LEVEL, now, settled(2.0 * i, demand, now))
            moves += verdict.action is Action.SET_WEIGHTS
            now = verdict.state
        assert moves <= 1, (start_weight, moves)
        assert now.weights == Weights(speculative=100, baseline=0)  # 5,157 vs 5,064 tok/s at 120: speculative


def test_requests_the_running_gauge_missed_keep_the_weights_on_the_better_pool_at_high_load() -> None:
    """The H200 run's flapping (docs/real-engine.md): all weight on plain, 128 requests in flight, SGLang's running
    gauge read about half of them (it is set when a prefill is logged, without the requests being admitted). On
    the gauges alone the policy reads low load and moves to speculation; the finished requests' latency (Little's
    law) counts them all, and the weights stay."""
    k = knobs(Strategy.TRAFFIC_SPLIT, **CALM, shared_gpus=True)
    missed = PoolSignal(ready_replicas=1, running=30.0, queued=0.0, latency_in_flight=128.0)
    idle = PoolSignal(ready_replicas=1, running=0.0, queued=0.0)

    def sample(base: PoolSignal) -> Sample:
        return Sample(time=0.0, demand=base.in_flight(), speculative=idle, baseline=base)

    assert missed.in_flight() == 128.0
    held = decide(k, H200, state(0), sample(missed))
    assert held.state.weights == Weights(speculative=0, baseline=100), held.reason
    gauges_only = decide(k, H200, state(0), sample(replace(missed, latency_in_flight=None)))
    assert gauges_only.state.weights == Weights(speculative=100, baseline=0), gauges_only.reason

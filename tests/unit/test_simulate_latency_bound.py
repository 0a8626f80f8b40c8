"""The open-loop latency reference: the trace served through one pool at the deployment's best every step."""

from __future__ import annotations

import pytest

from specserve.api.models import Mode, Strategy
from specserve_tools.simulate.baselines import FixedSplit, Static
from specserve_tools.simulate.latency_bound import latency_reference
from specserve_tools.simulate.run import simulate
from specserve_tools.simulate.setup import Load, Setup
from specserve_tools.simulate.summary import summarise
from tests.unit.simulate_helpers import tiny_setup


def steady(tokens_per_second: float, steps: int = 3000, length: float = 100.0) -> Load:
    rate = tokens_per_second / length
    return Load(dt=1.0, steps=steps, arrivals=(rate,) * steps, tokens=(rate * length,) * steps)


def tpot_per_token(s: Setup, load: Load, weight: int) -> float:
    summary = summarise(simulate(s, load, FixedSplit("fixed", weight)), "fixed")
    assert summary.tpot_token_mean is not None
    return summary.tpot_token_mean


def test_light_load_goes_to_the_pool_with_the_faster_streams() -> None:
    # 50 tok/s: all on the speculative pool at batch 2.5, 20 tok/s per stream -> 0.05 s per token
    s = tiny_setup(Strategy.TRAFFIC_SPLIT, 1, 1)
    load = steady(50.0)
    assert latency_reference(s, load) == pytest.approx(0.05)
    assert tpot_per_token(s, load, 100) == pytest.approx(0.05)
    assert tpot_per_token(s, load, 60) > 0.05 * 1.2  # the slower baseline streams cost


def test_heavy_load_is_split_where_the_marginal_stream_is_cheapest() -> None:
    # 120 tok/s is more than the speculative pool serves (90). Past batch 4 a speculative stream adds 10/6 tok/s,
    # a baseline one 10: the fewest running requests are 4 + 4 (80 + 40 tok/s), 8 / 120 s per token. The
    # reference fills up to that from an empty start, faster per token on the way, so it ends a little below.
    s = tiny_setup(Strategy.TRAFFIC_SPLIT, 1, 1)
    load = steady(120.0)
    ref = latency_reference(s, load)
    assert ref is not None
    assert 8 / 120 * 0.97 <= ref <= 8 / 120
    fixed = {w: tpot_per_token(s, load, w) for w in (50, 60, 67, 75)}
    assert all(t >= ref for t in fixed.values())
    assert fixed[67] == pytest.approx(ref, rel=0.03)  # the weight that holds 4 + 4 reaches it


def test_one_pool_takes_the_better_curve_at_its_batch() -> None:
    # Restart and Adaptive: one replica, free to be in either mode. 60 tok/s: speculative at batch 3.
    for strategy in (Strategy.RESTART, Strategy.ADAPTIVE):
        s = tiny_setup(strategy)
        assert latency_reference(s, steady(60.0)) == pytest.approx(0.05)
    # 95 tok/s is beyond speculation's 90: only baseline serves it, at batch 9.5 -> 0.1 s per token
    s = tiny_setup(Strategy.RESTART)
    assert latency_reference(s, steady(95.0, steps=6000)) == pytest.approx(0.1, rel=0.02)
    speculative = summarise(simulate(s, steady(60.0), Static("spec", Mode.SPECULATIVE)), "spec").tpot_token_mean
    assert speculative == pytest.approx(0.05)


def test_closed_loops_have_no_latency_reference() -> None:
    load = Load(dt=1.0, steps=10, concurrency=(3.0,) * 10, tokens_per_request=100.0)
    assert latency_reference(tiny_setup(Strategy.TRAFFIC_SPLIT, 1, 1), load) is None

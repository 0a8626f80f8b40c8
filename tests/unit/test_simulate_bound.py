"""The optimum is an upper bound: exact on loads worked out by hand, and never beaten by any simulated policy on
any shipped trace, strategy and profile (time-scaled to an hour each to keep the suite quick)."""

from __future__ import annotations

import numpy as np
import pytest

from specserve.api.models import Mode, Strategy
from specserve.api.validation import parse_object
from specserve_tools.emulator.profile import Profile, ProfileError, load_profile, parse_profile, shipped_profiles
from specserve_tools.simulate.baselines import FixedSplit, Static
from specserve_tools.simulate.bound import Curves, split_rate, upper_bound
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.compare import Comparison, compare
from specserve_tools.simulate.run import simulate
from specserve_tools.simulate.scenario import DEFAULT_SPEC, scenario, with_strategy
from specserve_tools.simulate.setup import Load, Setup, bin_trace
from specserve_tools.simulate.synthetic import SHIPPED, shipped_trace
from specserve_tools.simulate.traces import scale
from tests.unit.simulate_helpers import TINY, tiny_setup


def closed(levels: list[tuple[int, float]], tokens: float = 100.0) -> Load:
    conc = [c for seconds, c in levels for _ in range(seconds)]
    return Load(dt=1.0, steps=len(conc), concurrency=tuple(conc), tokens_per_request=tokens)


def test_split_rate_is_the_best_allocation_of_the_requests() -> None:
    # With a TPOT SLO of 0.1 s per token the speculative pool meets it up to batch 8.8 (88 tok/s):
    # a grid over every allocation of every allowed in-flight count never beats the exact maximum, and comes
    # within the grid's step of it.
    s = tiny_setup(Strategy.TRAFFIC_SPLIT, 2, 1, tpot=0.1)
    curves = Curves(TINY)

    def good(ns: float, nb: float) -> float:
        total = 0.0
        for replicas, curve, requests in ((2, TINY.speculative, ns), (1, TINY.baseline, nb)):
            b = min(requests / replicas, 10.0)
            rate = curve.at(b) if b >= 1 else curve.at(1.0) * b
            if rate > 0 and b / rate <= 0.1:
                total += replicas * rate
        return total

    for lo, hi in ((0.5, 0.5), (3.0, 3.0), (7.5, 9.0), (19.0, 19.0), (20.0, 27.3), (40.0, 40.0)):
        exact = split_rate(curves.spec(1.0), curves.base, s, lo, hi, 0.1)
        grid = max(good(ns, n - ns) for n in np.linspace(lo, hi, 31) for ns in np.linspace(0.0, n, 801))
        assert grid <= exact + 1e-9
        assert exact <= grid + 3.0  # the grid's step is n / 800 requests, at most ~20 tok/s per request
    # 40 requests on 3 replicas at cap 10: a speculative replica over its SLO counts nothing, so the best is
    # 8.8 per speculative replica (2 x 88 tok/s, exactly at the SLO) and the rest on the baseline one (100, 10
    # queued behind it)
    assert split_rate(curves.spec(1.0), curves.base, s, 40.0, 40.0, 0.1) == pytest.approx(276.0, rel=1e-6)


def test_constant_load_bound_is_the_steady_state_and_a_static_split_reaches_it() -> None:
    # 20 clients on one replica per pool: 10 on each (both at their cap) serve 90 + 100 tok/s, the best there is.
    s = tiny_setup(Strategy.TRAFFIC_SPLIT, 1, 1)
    load = closed([(600, 20.0)])
    bound = upper_bound(s, load)
    assert bound.goodput_tokens == pytest.approx(190.0 * 600)
    run = simulate(s, load, FixedSplit("fixed", 47))
    good = sum(p.good_tokens for p in run.pools.values())
    assert 0.97 * bound.goodput_tokens <= good <= bound.goodput_tokens


def test_restart_bound_pays_for_the_roll() -> None:
    # 2 clients then 10: speculative serves 40 then 90 tok/s, baseline 20 then 100. One replica: a roll serves
    # nothing for 30 s. Best: stay speculative through the low phase, roll (30 s dark) when the high phase
    # starts... or earlier; any way it is at most 40 x 1000 + 100 x 2000 and at least that minus the roll.
    s = tiny_setup(Strategy.RESTART)
    load = closed([(1000, 2.0), (2000, 10.0)])
    bound = upper_bound(s, load).goodput_tokens
    assert 40.0 * 1000 + 100.0 * 2000 - 30 * 100.0 <= bound <= 40.0 * 1000 + 100.0 * 2000
    assert bound > 40.0 * 1000 + 90.0 * 2000  # switching is worth it


def test_open_loop_bound_is_what_arrives_within_capacity() -> None:
    s = tiny_setup(Strategy.TRAFFIC_SPLIT, 1, 1)
    load = Load(dt=1.0, steps=100, arrivals=(0.1,) * 100, tokens=(50.0,) * 100)
    assert upper_bound(s, load).goodput_tokens == pytest.approx(5000.0)


def _scaled(name: str, profile: Profile) -> Load:
    trace = shipped_trace(name, 1)
    hour = 3600.0 / trace.duration
    # every shipped trace played in an hour; open loops thinned as much, so the load stays the same
    rate = hour if not trace.closed_loop else 1.0
    # the shipped traces are shaped around a crossover of 64 per replica: other profiles get a matching load
    if profile.name.startswith("seed"):
        rate *= 0.5
    return bin_trace(scale(trace, hour, rate, 1), 1.0)


@pytest.fixture(scope="module")
def comparisons() -> list[tuple[str, Comparison]]:
    out: list[tuple[str, Comparison]] = []
    for profile_name in shipped_profiles():
        profile = load_profile(profile_name)
        for strategy in Strategy:
            obj = with_strategy(parse_object(DEFAULT_SPEC), strategy)
            scen = scenario(obj, profile, Slo(5.0, 0.1))
            for trace in SHIPPED:
                load = _scaled(trace, profile)
                out.append((f"{profile_name}/{strategy}/{trace}", compare(scen.setup, load, scen.knobs, scen.curves)))
    return out


# The fixture simulates 60 comparisons: minutes of CPU, more on a shared machine than the suite's default timeout.
@pytest.mark.timeout(1800)
def test_no_policy_beats_the_optimum_on_any_shipped_trace(comparisons: list[tuple[str, Comparison]]) -> None:
    assert len(comparisons) == len(shipped_profiles()) * len(Strategy) * len(SHIPPED)
    for label, c in comparisons:
        assert c.bound is not None
        for s in c.summaries:
            assert s.goodput_tokens <= c.bound.goodput_tokens * (1 + 1e-9) + 1e-6, (label, s.name)
            assert s.output_tokens <= c.bound.output_tokens * (1 + 1e-9) + 1e-6, (label, s.name)
            if s.gain_captured is not None:
                assert s.gain_captured <= 1.0 + 1e-9, (label, s.name)
        assert not [n for n in c.notes if n.startswith("BUG")], label


@pytest.mark.timeout(1800)
def test_no_policy_beats_the_open_loop_latency_reference(comparisons: list[tuple[str, Comparison]]) -> None:
    checked = 0
    for label, c in comparisons:
        if c.bound is None or c.bound.tpot_token_mean is None:
            continue
        for s in c.summaries:
            if s.tpot_token_mean is not None:
                assert s.tpot_token_mean >= c.bound.tpot_token_mean * (1 - 1e-6), (label, s.name)
                checked += 1
    assert checked > 0


def test_drifting_profile_scales_the_speculative_curve_through_the_day() -> None:
    drift = load_profile("illustrative-crossover-8b-drift")
    assert drift.accept_at(3 * 3600) == pytest.approx(3.2) and drift.accept_at(14 * 3600) == pytest.approx(2.0)
    assert drift.accept_at((24 + 14) * 3600) == pytest.approx(2.0)  # periodic
    assert drift.accept_at(9.5 * 3600) == pytest.approx(2.6)  # half-way down from 7:00 to 12:00
    s = Setup(Strategy.RESTART, drift, 1, 0, Mode.SPECULATIVE, 15.0, 15.0, Slo(1000.0, 10.0), 64.0, 3, None)
    night = closed([(3600, 4.0)], tokens=1e9)  # never finishes: the batch holds at 4
    afternoon = Load(dt=1.0, steps=14 * 3600 + 600, concurrency=(4.0,) * (14 * 3600 + 600), tokens_per_request=1e9)
    served_night = simulate(s, night, Static("spec", Mode.SPECULATIVE)).timeline.tokens_per_second[-1]
    served_afternoon = simulate(s, afternoon, Static("spec", Mode.SPECULATIVE)).timeline.tokens_per_second[-1]
    assert served_afternoon == pytest.approx(served_night * 2.0 / 3.2, rel=1e-3)
    base = simulate(s, afternoon, Static("base", Mode.BASELINE)).timeline.tokens_per_second[-1]
    assert base == pytest.approx(drift.baseline.at(4.0), rel=1e-3)  # baseline does not drift


def test_accept_schedule_is_checked() -> None:
    doc = {"curves": {"speculative": [[1, 10]], "baseline": [[1, 5]]}, "accept_schedule": [[3, 2.0], [2, 3.0]]}
    with pytest.raises(ProfileError, match="accept_schedule hours must increase"):
        parse_profile(doc, "p.json")
    with pytest.raises(ProfileError, match="accept_schedule"):
        parse_profile({**doc, "accept_schedule": [[25, 2.0]]}, "p.json")


def test_a_registered_policy_gets_its_own_row(monkeypatch: pytest.MonkeyPatch) -> None:
    # The seam for policies on learned curves: anything in POLICIES is simulated beside SpecServe's.
    from specserve_tools.simulate import compare as module  # noqa: PLC0415

    monkeypatch.setitem(module.POLICIES, "learned", lambda s, knobs, curves: Static("learned (test)", Mode.BASELINE))
    obj = with_strategy(parse_object(DEFAULT_SPEC), Strategy.RESTART)
    scen = scenario(obj, load_profile("illustrative-crossover-8b-drift"), Slo(5.0, 0.1))
    c = compare(scen.setup, closed([(600, 20.0)]), scen.knobs, scen.curves)
    row = next(s for s in c.rows() if s.role == "learned")
    assert c.bound is not None
    assert row.name == "learned (test)" and 0 < row.goodput_tokens <= c.bound.goodput_tokens
    assert any("drifts with the accept length (2 to 3.2" in n for n in scen.notes)

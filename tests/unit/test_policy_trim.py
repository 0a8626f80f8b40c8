"""TrafficSplit's closed-loop trim (policy.trim): where the requests settle under a weight, when the trim steps and
when it leaves the open-loop rules alone, and the illustrative profile's peak held by alternating two weights."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specserve.api.models import Mode, Strategy, Weights
from specserve.api.validation import parse_object
from specserve.policy import traffic
from specserve.policy.switching import decide
from specserve.policy.traffic import relieves_overload, trim
from specserve.policy.trim import heading, observe, trim_weight
from specserve.policy.types import Action, PolicyState, PoolSignal, Sample
from specserve_tools.emulator.profile import load_profile
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.policy import SpecServePolicy
from specserve_tools.simulate.run import simulate
from specserve_tools.simulate.scenario import DEFAULT_SPEC, scenario, with_strategy
from specserve_tools.simulate.setup import bin_trace
from specserve_tools.simulate.summary import summarise
from specserve_tools.simulate.synthetic import _closed
from tests.unit.policy_helpers import ILLUSTRATIVE, SEED, changes, knobs, profile_curves

CURVES = profile_curves(ILLUSTRATIVE)  # the speculative pool peaks at 48 in flight and dips to 64
SEED_CURVES = profile_curves(SEED)  # baseline serves more everywhere; speculation is the overflow pool
SLO = 0.1


def at(spec_weight: int, since: float = -10_000.0) -> PolicyState:
    mode = Mode.SPECULATIVE if spec_weight >= 50 else Mode.BASELINE
    return PolicyState(
        mode=mode, mode_since=since, weights=Weights(speculative=spec_weight, baseline=100 - spec_weight)
    )


def seen(t: float, spec: float | None, base: float | None) -> Sample:
    """A sample whose pools report `spec` and `base` requests in flight (None: not read)."""
    demand = (spec or 0.0) + (base or 0.0)
    return Sample(
        time=t,
        demand=demand,
        speculative=PoolSignal(ready_replicas=1, running=spec, queued=0.0 if spec is not None else None),
        baseline=PoolSignal(ready_replicas=1, running=base, queued=0.0 if base is not None else None),
    )


def test_heading_follows_the_drift_to_where_the_requests_settle() -> None:
    # 180 in flight: 46/54 settles 6 short of the peak; one point more sends the pool past the dip to ~73
    assert heading(CURVES, 46, 41.9, 180, 1, 1, SLO).speculative == pytest.approx(41.9, abs=0.1)
    assert heading(CURVES, 47, 41.9, 180, 1, 1, SLO).speculative == pytest.approx(72.6, abs=0.5)
    assert heading(CURVES, 46, 55.0, 180, 1, 1, SLO).speculative == pytest.approx(41.9, abs=0.1)


def test_observe_measures_the_loss_and_the_way_to_the_best_split() -> None:
    short = observe(CURVES, 41.9, 138.1, 1, 1, SLO)
    assert short is not None
    assert short.best.speculative == pytest.approx(48.0)
    assert short.direction == 1 and 0.005 < short.loss < 0.007
    over = observe(CURVES, 60.0, 120.0, 1, 1, SLO)
    assert over is not None and over.direction == -1 and over.loss > 0.02
    assert observe(CURVES, 3.0, 0.0, 1, 1, SLO) is None  # light load: the best split is one pool, nothing to trim
    assert observe(CURVES, 40.0, 140.0, 1, 0, SLO) is None


def test_trim_weight_takes_the_nearest_weight_that_passes_the_best_split() -> None:
    short = observe(CURVES, 41.9, 138.1, 1, 1, SLO)
    over = observe(CURVES, 60.0, 120.0, 1, 1, SLO)
    assert short is not None and over is not None
    assert trim_weight(CURVES, 46, short, (42, 49), 1, 1, SLO) == 47
    assert trim_weight(CURVES, 47, over, (42, 49), 1, 1, SLO) == 46
    assert trim_weight(CURVES, 46, short, (42, 46), 1, 1, SLO) is None  # nothing better within reach


def test_slo_edges_are_left_to_the_open_loop() -> None:
    overload = observe(SEED_CURVES, 75.0, 71.0, 1, 1, SLO)  # baseline filled to its SLO, the excess late
    assert overload is not None and overload.on_slo_edge(SLO)
    peak = observe(CURVES, 41.9, 138.1, 1, 1, SLO)  # 14 ms per token against 100: the curves decide
    assert peak is not None and not peak.on_slo_edge(SLO) and not peak.on_slo_edge(None)
    # and the policy leaves the weights to the dead band there
    state = at(31)
    v = decide(knobs(tpot_slo=SLO), SEED_CURVES, state, seen(0.0, 75.0, 71.0))
    assert v.action is Action.HOLD and "trim" not in v.reason


def test_the_trim_steps_towards_the_best_split_inside_the_band() -> None:
    k = knobs(tpot_slo=SLO)
    v = decide(k, CURVES, at(46), seen(0.0, 41.9, 138.1))
    assert v.action is Action.SET_WEIGHTS and v.weights == Weights(speculative=47, baseline=53)
    assert "trim towards it" in v.reason and "41.9/138.1 in flight" in v.reason
    # without the pools' readings the same weights are inside the dead band: the open loop holds them
    blind = decide(k, CURVES, at(46), replace(seen(0.0, 41.9, 138.1), speculative=PoolSignal(ready_replicas=1)))
    assert blind.action is Action.HOLD and "inside the dead band" in blind.reason


def test_the_trim_lets_the_requests_move_and_reads_the_pools_before_stepping_again() -> None:
    k = knobs(tpot_slo=SLO)
    first = decide(k, CURVES, at(46), seen(0.0, 41.9, 138.1))
    assert first.weights is not None and first.weights.speculative == 47
    # still short of the peak, but 47/53 takes the requests through it: no second step
    moving = decide(k, CURVES, first.state, seen(15.0, 42.5, 137.5))
    assert moving.action is Action.HOLD and "on their way through it" in moving.reason
    # past the peak and running away: one point back
    back = decide(k, CURVES, moving.state, seen(45.0, 58.0, 122.0))
    assert back.action is Action.SET_WEIGHTS and back.weights == Weights(speculative=46, baseline=54)
    # a reading that asks for the other way 15 s later may still show the weights before: read again first
    early = decide(k, CURVES, back.state, seen(60.0, 40.0, 140.0))
    assert early.action is Action.HOLD and "reading them" in early.reason
    later = decide(k, CURVES, early.state, seen(75.0, 40.0, 140.0))
    assert later.action is Action.SET_WEIGHTS and later.weights == Weights(speculative=47, baseline=53)


def test_where_the_open_loop_holds_the_split_the_dead_band_still_rules() -> None:
    # around 100 in flight 50/50 settles within 0.25 % of the best split: demand wobbling inside the band,
    # with the pools reporting where 50/50 puts the requests, writes nothing
    k = knobs(tpot_slo=SLO)
    state = at(50)
    verdicts = []
    for i, d in enumerate([100.0, 96.0, 104.0, 98.0, 102.0] * 12):
        v = decide(k, CURVES, state, seen(i * 15.0, 0.35 * d, 0.65 * d))
        verdicts.append(v)
        state = v.state
    assert changes(verdicts) == []
    assert all("trim" not in v.reason for v in verdicts)


def test_the_trim_never_crosses_the_50_50_line() -> None:
    # 130 in flight: band 47-49; the speculative pool holds too many at 50/50, and one point down crosses the line
    k = knobs(tpot_slo=SLO)
    state = at(50)
    assert trim(k, CURVES, state, seen(0.0, 45.0, 85.0), 48, (47, 49), "demand 130") is None


def test_relieving_overload_does_not_wait_out_the_window_towards_speculation() -> None:
    # the seed profile at 135 in flight: 22/78 leaves the baseline pool over its TPOT SLO; the robust weights put the
    # excess on the speculative pool, a move towards speculation, and overload does not wait
    k = knobs(tpot_slo=SLO, down_stabilization=300.0)
    assert relieves_overload(k, SEED_CURVES, Weights(speculative=22, baseline=78), Weights(speculative=31, baseline=69),
                             135.0, 1, 1)  # fmt: skip
    v = decide(k, SEED_CURVES, at(22), Sample(time=0.0, demand=135.0, speculative=PoolSignal(ready_replicas=1),
                                              baseline=PoolSignal(ready_replicas=1)))  # fmt: skip
    assert v.action is Action.SET_WEIGHTS and v.weights is not None and v.weights.speculative > 22
    assert "as urgent as overload" in v.reason
    # where no pool is over the SLO, a move towards speculation still waits out the window
    calm = decide(k, CURVES, at(44), Sample(time=0.0, demand=100.0, speculative=PoolSignal(ready_replicas=1),
                                            baseline=PoolSignal(ready_replicas=1)))  # fmt: skip
    assert calm.action is Action.HOLD and "window" in calm.reason


def test_the_trim_holds_the_speculative_pool_at_its_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    """180 clients for an hour: no fixed weight holds the best split (48 on the speculative pool); the trim
    alternates 46/54 and 47/53 and serves more than the open-loop weights alone, at a bounded rate of writes."""
    obj = with_strategy(parse_object(DEFAULT_SPEC), Strategy.TRAFFIC_SPLIT)
    scen = scenario(obj, load_profile(ILLUSTRATIVE), Slo(5.0, SLO))
    load = bin_trace(_closed("flat", [180.0] * 60), 1.0)

    def day() -> tuple[float, int, list[float]]:
        run = simulate(scen.setup, load, SpecServePolicy(scen.knobs, scen.curves, scen.setup.initial_mode))
        late = [w for t, w in zip(run.timeline.time, run.timeline.speculative_share, strict=True) if t >= 1200]
        return summarise(run, "specserve").goodput_tokens, run.weight_changes, late

    trimmed, writes, late = day()
    monkeypatch.setattr(traffic, "TRIM_REACH", -1000)  # no weight is within the trim's reach: open loop only
    open_loop, _, open_late = day()
    assert set(late) == {46.0, 47.0} and set(open_late) == {46.0}
    assert trimmed > open_loop * 1.002
    assert writes <= 60  # about one write a minute at most

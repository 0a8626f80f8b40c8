"""The simulated Prometheus answers `offset` queries from its history, through the operator's own reader."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specserve.api.curves import Curve
from specserve.api.models import Mode, Strategy
from specserve.metrics.promql import Signal
from specserve.policy.types import Sample
from specserve_tools.emulator.engine import Mode as EngineMode
from specserve_tools.emulator.profile import Profile
from specserve_tools.simulate.baselines import Static
from specserve_tools.simulate.cluster import Pool, Replica, Slo
from specserve_tools.simulate.observe import Prometheus
from specserve_tools.simulate.run import Simulation
from specserve_tools.simulate.setup import Load, Setup

PROFILE = Profile(
    name="flat",
    model_name="flat",
    speculative=Curve.from_points([(1, 10.0), (100, 1000.0)]),
    baseline=Curve.from_points([(1, 10.0), (100, 1000.0)]),
    max_running_requests=100,
)
HOUR = 3600


def ran(history_seconds: float | None = None) -> Simulation:
    """Two hours: 4 clients in the first, 12 in the second (requests never finish, so in flight = clients)."""
    setup = Setup(Strategy.RESTART, PROFILE, 1, 0, Mode.SPECULATIVE, 15.0, 15.0, Slo(1000.0, 10.0), None, 3, None)
    load = Load(dt=1.0, steps=2 * HOUR, concurrency=(4.0,) * HOUR + (12.0,) * HOUR, tokens_per_request=1e12)
    sim = Simulation(setup, load, Static("spec", Mode.SPECULATIVE))
    if history_seconds is not None:
        sim.prometheus = Prometheus(sim.pools, 15.0, 15.0, history_seconds)
    sim.execute()
    return sim


def test_offset_reads_the_same_time_an_hour_ago() -> None:
    sim = ran()
    now = 2 * HOUR - 10.0
    roles = {"engine": True}
    assert sim.prometheus.sample(now, roles).demand == pytest.approx(12.0)
    earlier = sim.prometheus.sample(now, roles, offset=HOUR)
    assert earlier.demand == pytest.approx(4.0)
    assert earlier.speculative is not None and earlier.speculative.tokens_per_second == pytest.approx(40.0)
    # before the history starts there is no series, as in Prometheus: demand unknown
    assert sim.prometheus.sample(now, roles, offset=3 * HOUR).demand is None


def test_results_carry_the_offset_values_at_the_evaluation_time() -> None:
    sim = ran()
    results = {r.query.signal: r for r in sim.prometheus.results(2 * HOUR - 10.0, offset=HOUR)}
    assert results[Signal.RUNNING].time == HOUR - 10.0  # stamped as of then: freshness is judged as it was
    assert list(results[Signal.RUNNING].values.values()) == [pytest.approx(4.0)]


def test_history_is_bounded() -> None:
    sim = ran(history_seconds=600.0)
    series = sim.prometheus.series["engine"]
    assert len(series) <= 2 * 600 / 15 + 2  # trimmed in batches, never more than twice the history
    assert sim.prometheus.sample(2 * HOUR - 10.0, {"engine": True}, offset=HOUR).demand is None


def test_history_answers_the_live_loops_queries_a_day_back() -> None:
    """Two days: 4 clients on day 1 but 20 in its last hour; on day 2 the history read as the live loop reads it
    (metrics.signal.read_history) shows day 1: now and over the horizon ahead."""
    day = 86400
    setup = Setup(Strategy.RESTART, PROFILE, 1, 0, Mode.SPECULATIVE, 15.0, 15.0, Slo(1000.0, 10.0), None, 3, None)
    day1 = (4.0,) * (day - HOUR) + (20.0,) * HOUR  # the last hour of day 1 busier
    load = Load(dt=1.0, steps=2 * day, concurrency=day1 + (4.0,) * day, tokens_per_request=1e12)
    sim = Simulation(setup, load, Static("spec", Mode.SPECULATIVE))
    sim.execute()
    roles = {"engine": True}
    # 1.5 h before the end of day 2: yesterday at this time 4 in flight, and over the next 2 h: 0.5 h at 4, then
    # 20 (requests never finish, so the 20 stay in flight into day 2) -> (0.5 * 4 + 1.5 * 20) / 2 = 16
    history = sim.prometheus.history(2 * day - 1.5 * HOUR, roles, horizon=2 * HOUR)
    assert history.now_day == pytest.approx(4.0)
    assert history.ahead_day == pytest.approx(16.0, rel=0.01)
    assert history.horizon == 2 * HOUR
    assert history.now_week is None and history.ahead_week is None  # before the history starts: unknown, not 0


def test_a_restart_setup_with_a_horizon_gives_the_policy_its_history() -> None:
    seen: list[Sample] = []

    class Recorder(Static):
        reads_history = True  # as the operator's policy (simulate.policy): the baselines read none

        def decide(self, sample: Sample, converging: bool) -> None:
            seen.append(sample)

    class Baseline(Recorder):
        reads_history = False

    setup = Setup(Strategy.RESTART, PROFILE, 1, 0, Mode.SPECULATIVE, 15.0, 15.0, Slo(1000.0, 10.0), None, 3, None,
                  forecast_horizon=600)  # fmt: skip
    load = Load(dt=1.0, steps=2 * HOUR, concurrency=(4.0,) * (2 * HOUR), tokens_per_request=1e12)
    Simulation(setup, load, Recorder("spec", Mode.SPECULATIVE)).execute()
    assert seen and all(s.history is not None and s.history.horizon == 600 for s in seen)
    assert all(s.history is not None and s.history.now_day is None for s in seen)  # no day of history yet
    for setup_, controller in ((replace(setup, forecast_horizon=None), Recorder("spec", Mode.SPECULATIVE)),
                               (setup, Baseline("spec", Mode.SPECULATIVE))):  # fmt: skip
        seen.clear()
        Simulation(setup_, load, controller).execute()
        assert seen and all(s.history is None for s in seen)


def test_a_pool_that_idles_within_a_step_is_read_at_its_average_not_its_peak() -> None:
    """Four requests of 10 tokens arrive at each 5 s step on a replica serving 10 tok/s per stream. They finish in
    1 s and the pool idles for 4. A scrape at a random instant sees 0.8 running on average, and 8 tok/s is what the
    curve gives at 0.8, so the reading lies on the curve. Read at the step's start, after the arrivals, it showed
    4 running, where the curve gives 40 tok/s. The pool looked 80 % slower than it is, and learning believed it."""
    pool = Pool("spec", PROFILE, [Replica(EngineMode.SPECULATIVE)], Slo(1000.0, 10.0))
    prom = Prometheus({"spec": pool}, scrape_seconds=5.0, evaluation_seconds=5.0)
    for k in range(40):
        now = 5.0 * k
        pool.arrive(now, 4.0, 40.0)
        pool.admit(now)
        prom.maybe_scrape(now)
        pool.serve(now, 5.0)
    signal = prom.sample(200.0, {"spec": True}).speculative
    assert signal is not None and signal.running is not None and signal.tokens_per_second is not None
    assert signal.running == pytest.approx(0.8, rel=0.02)
    assert signal.tokens_per_second == pytest.approx(8.0, rel=0.02)
    assert PROFILE.speculative.at(1.0) * signal.running == pytest.approx(signal.tokens_per_second, rel=0.02)

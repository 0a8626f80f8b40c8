"""The simulated Prometheus answers `offset` queries from its history, through the operator's own reader."""

from __future__ import annotations

import pytest

from specserve.api.curves import Curve
from specserve.api.models import Mode, Strategy
from specserve.metrics.promql import Signal
from specserve_tools.emulator.profile import Profile
from specserve_tools.simulate.baselines import Static
from specserve_tools.simulate.cluster import Slo
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

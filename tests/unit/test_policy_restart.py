"""Restart as ski rental: the threshold, the CUSUM regret around the crossover, dwell, the daily budget, the seed
profile (never into speculation), switch costs, and regret frozen while unknown or converging."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from specserve.api.models import Mode, Strategy
from specserve.policy.curves import ModeCurves
from specserve.policy.forecast import Regimes, Trend, observe, remainder
from specserve.policy.knobs import knobs_from_spec
from specserve.policy.restart import (
    DAY,
    EARLY,
    SURGE_FLOOR,
    WAIT,
    capacity,
    over_slo,
    pool_rate,
    reach_of,
    regime_ahead,
    remember_peak,
    restart_price,
    switch_cost,
)
from specserve.policy.switching import decide, initial_state
from specserve.policy.types import Action, PolicyState
from tests.unit.policy_helpers import (
    ILLUSTRATIVE,
    SEED,
    changes,
    knobs,
    linear_curves,
    profile_curves,
    run,
    sample,
    specserve,
)

CURVES = profile_curves(ILLUSTRATIVE)  # crossover at 64 per replica


def spec_state(since: float = -1e6) -> PolicyState:
    return PolicyState(mode=Mode.SPECULATIVE, mode_since=since)


def test_ski_rental_restarts_when_the_regret_covers_the_cost() -> None:
    k = knobs(Strategy.RESTART)
    gain = CURVES.rate(Mode.BASELINE, 100) - CURVES.rate(Mode.SPECULATIVE, 100)  # ~283 tok/s
    cost = 60.0 * CURVES.rate(Mode.SPECULATIVE, 100)  # one replica: everything stops for 60 s
    needed = math.ceil(cost / (gain * 15.0))  # evaluations after the first (which has no interval behind it)
    state, verdicts = run(k, CURVES, spec_state(), [100.0] * (needed + 3))
    restarts = [i for i, v in enumerate(verdicts) if v.action is Action.RESTART]
    assert restarts == [needed]
    before = verdicts[needed - 1]
    assert before.action is Action.HOLD and "staying until the regret covers the cost" in before.reason
    assert verdicts[needed].mode is Mode.BASELINE and "restart into Baseline" in verdicts[needed].reason
    assert state.mode is Mode.BASELINE and state.regret == 0.0 and len(state.restarts) == 1


def test_regret_shrinks_while_the_current_mode_wins_so_oscillation_never_restarts() -> None:
    # a roll of 10 minutes: the 2-minute regimes below never outlast it, so the regimes' early threshold never
    # applies (with a 1-minute roll they would: see test_a_regime_expected_to_outlast_the_roll_is_bought_early)
    k = knobs(Strategy.RESTART, startup_seconds=600.0)
    rng = random.Random(7)
    # a day wandering 40 .. 90 around the crossover (64), changing every 2 minutes
    demands = []
    for _ in range(720):
        demands += [64.0 + rng.uniform(-24, 26)] * 8
    _, verdicts = run(k, CURVES, spec_state(), demands)
    assert changes(verdicts) == []
    # while an unfloored, one-sided sum (the other mode's wins only) would have paid for many restarts
    one_sided = sum(max(0.0, CURVES.rate(Mode.BASELINE, d) - CURVES.rate(Mode.SPECULATIVE, d)) * 15.0 for d in demands)
    assert one_sided > 1.5 * switch_cost(CURVES, Mode.SPECULATIVE, 90, 1, 600, 0)


def test_min_dwell_holds_a_restart_that_is_due() -> None:
    k = knobs(Strategy.RESTART, min_dwell=3000.0, startup_seconds=1.0)
    state = replace(spec_state(since=0.0), last_switch=0.0)
    _, verdicts = run(k, CURVES, state, [200.0] * 202, start=15.0)  # t = 15 .. 3030
    restarts = [15.0 + 15 * i for i, v in enumerate(verdicts) if v.action is Action.RESTART]
    assert restarts == [3000.0]
    assert "min dwell 3000 s" in verdicts[5].reason


def test_restart_budget_counts_the_last_24_hours() -> None:
    k = knobs(Strategy.RESTART, max_restarts_per_day=1, startup_seconds=1.0)
    state = PolicyState(mode=Mode.SPECULATIVE, mode_since=0.0, restarts=(0.0,))
    v = decide(k, CURVES, state, sample(100.0, 200.0))
    v = decide(k, CURVES, v.state, sample(115.0, 200.0))
    assert v.action is Action.HOLD and "budget is spent (1 of 1 in the last 24 h)" in v.reason
    later = decide(k, CURVES, v.state, sample(DAY + 1.0, 200.0))
    assert later.action is Action.RESTART and later.state.restarts == (DAY + 1.0,)


def test_seed_profile_never_restarts_into_speculation() -> None:
    seed = profile_curves(SEED)
    k = knobs(Strategy.RESTART, startup_seconds=510.0)
    rng = random.Random(3)
    demands = [rng.choice([1.0, 2.0, 5.0, 30.0, 250.0]) for _ in range(2000)]
    _, verdicts = run(k, seed, initial_state(k, Mode.BASELINE, 0.0), demands)
    assert changes(verdicts) == []
    # started on speculation it leaves once, for baseline, and never comes back
    _, from_spec = run(k, seed, initial_state(k, Mode.SPECULATIVE, 0.0), demands)
    assert [v.mode for v in changes(from_spec)] == [Mode.BASELINE]


def test_switch_cost_per_pod_share_and_surge() -> None:
    one = switch_cost(CURVES, Mode.SPECULATIVE, 100.0, 1, 60.0, 0)
    assert one == pytest.approx(60.0 * CURVES.rate(Mode.SPECULATIVE, 100.0))
    two = switch_cost(CURVES, Mode.SPECULATIVE, 100.0, 2, 60.0, 0)
    per_pod = 2 * CURVES.rate(Mode.SPECULATIVE, 50.0) - CURVES.rate(Mode.SPECULATIVE, 100.0)
    assert two == pytest.approx(2 * 60.0 * per_pod)
    surged = switch_cost(CURVES, Mode.SPECULATIVE, 100.0, 2, 60.0, 1)
    assert surged == pytest.approx(two / 2)
    assert switch_cost(CURVES, Mode.SPECULATIVE, 100.0, 2, 60.0, 5) == pytest.approx(two * SURGE_FLOOR)


def test_regret_is_frozen_while_unknown_or_converging() -> None:
    k = knobs(Strategy.RESTART)
    state, _ = run(k, CURVES, spec_state(), [200.0] * 5)
    frozen = state.regret
    assert frozen > 0
    v = decide(k, CURVES, state, sample(75.0, None, error="no series"))
    assert v.state.regret == frozen
    v = decide(k, CURVES, v.state, sample(90.0, 200.0), converging=True)
    assert v.state.regret == frozen and v.action is Action.HOLD
    # the next known sample integrates one interval only, not the gap
    v = decide(k, CURVES, v.state, sample(105.0, 200.0))
    gain = CURVES.rate(Mode.BASELINE, 200) - CURVES.rate(Mode.SPECULATIVE, 200)
    assert v.state.regret == pytest.approx(frozen + gain * 15.0)


def test_a_long_gap_integrates_at_most_two_intervals() -> None:
    k = knobs(Strategy.RESTART)
    v = decide(k, CURVES, spec_state(), sample(0.0, 200.0))
    v = decide(k, CURVES, v.state, sample(3600.0, 200.0))
    gain = CURVES.rate(Mode.BASELINE, 200) - CURVES.rate(Mode.SPECULATIVE, 200)
    assert v.state.regret == pytest.approx(gain * 30.0)


def test_restart_decides_per_replica() -> None:
    # 3 replicas at demand 150: 50 each, below the crossover: speculation wins, no regret
    k = knobs(Strategy.RESTART, speculative_replicas=3)
    state, verdicts = run(k, CURVES, spec_state(), [150.0] * 50)
    assert changes(verdicts) == [] and state.regret == 0.0
    assert "(50.0/replica)" in verdicts[-1].reason


def test_a_mode_that_wins_everywhere_is_restarted_into_at_once() -> None:
    seed = profile_curves(SEED)
    k = knobs(Strategy.RESTART, startup_seconds=510.0, min_dwell=300.0)
    v = decide(k, seed, initial_state(k, Mode.SPECULATIVE, 0.0), sample(15.0, 3.0))
    assert v.action is Action.RESTART and v.mode is Mode.BASELINE
    assert "no demand can repay staying" in v.reason


def test_the_first_switch_has_no_dwell_before_it_but_the_next_one_does() -> None:
    k = knobs(Strategy.RESTART, min_dwell=3600.0, startup_seconds=1.0)
    state, verdicts = run(k, CURVES, initial_state(k, Mode.SPECULATIVE, 0.0), [300.0] * 4 + [2.0] * 40)
    restarts = [i for i, v in enumerate(verdicts) if v.action is Action.RESTART]
    assert restarts == [1]  # right after the regret covers the (tiny) cost, although the mode began at 0
    assert "min dwell 3600 s" in verdicts[-1].reason and state.mode is Mode.BASELINE


def test_a_roll_that_puts_the_pool_over_the_tpot_slo_costs_all_it_serves() -> None:
    """Two pods meet the SLO, one does not: while the roll lasts every request on the remaining pod turns late, so
    the roll costs what the whole pool serves for its length, not one pod's marginal tokens."""

    demand = 40.0
    one, two = demand / CURVES.rate(Mode.SPECULATIVE, demand), (demand / 2) / CURVES.rate(Mode.SPECULATIVE, demand / 2)
    slo = (one + two) / 2  # between what one pod and two pods give each request
    assert not over_slo(CURVES, Mode.SPECULATIVE, demand, 2, slo) and over_slo(CURVES, Mode.SPECULATIVE, demand, 1, slo)
    plain = switch_cost(CURVES, Mode.SPECULATIVE, demand, 2, 60.0, 0)
    strict = switch_cost(CURVES, Mode.SPECULATIVE, demand, 2, 60.0, 0, slo)
    assert strict == pytest.approx(60.0 * 2 * pool_rate(CURVES, Mode.SPECULATIVE, demand, 2)) and strict > plain
    loose = switch_cost(CURVES, Mode.SPECULATIVE, demand, 2, 60.0, 0, one * 2)  # one pod meets it too
    assert loose == pytest.approx(plain)


def test_a_declared_surge_reaches_the_restart_cost() -> None:
    """spec.pools.speculative.maxSurge discounts Restart's cost (pods start before old ones stop): the operator's
    knobs carry it into the cost (they always carried 0: found on the H200, issue 26, where one pod with maxSurge 1
    was priced at its full start-up)."""
    plain = specserve(Strategy.RESTART)
    surging = specserve(Strategy.RESTART, pools={"speculative": {"replicas": 1, "maxSurge": 1}})
    assert knobs_from_spec(plain).max_surge == 0 and knobs_from_spec(surging).max_surge == 1
    full = switch_cost(CURVES, Mode.SPECULATIVE, 100.0, 1, 60.0, knobs_from_spec(plain).max_surge)
    cheap = switch_cost(CURVES, Mode.SPECULATIVE, 100.0, 1, 60.0, knobs_from_spec(surging).max_surge)
    assert cheap == pytest.approx(full * SURGE_FLOOR)


# Curves for the backlog rules: speculation saturates at 1000 tok/s from 10 in flight on; the baseline is slower
# there (it crosses above at 20) but keeps growing. At 10 in flight on one replica the baseline serves `base_at_10`
# and speculation 1000: a restart into speculation pays 1000 - base_at_10 tok/s of regret, and its roll queues
# everything arriving meanwhile, which drains only at 1000 - base_at_10.
def backlog_curves(base_at_10: float) -> ModeCurves:
    return linear_curves([(1.0, 100.0), (10.0, 1000.0), (100.0, 1000.0)],
                         [(1.0, base_at_10 / 10), (10.0, base_at_10), (20.0, 1000.0), (100.0, 2000.0)])  # fmt: skip


def test_a_roll_whose_backlog_never_drains_is_refused() -> None:
    """980 tok/s arrive, the target serves at most 1000: the queue one 60 s roll leaves (58800 tokens) would drain
    at 20 tok/s, within DRAIN_MARGIN of the arrivals: the policy stays however large the regret grows."""
    curves = backlog_curves(980.0)
    k = knobs(Strategy.RESTART)
    roll, queue = restart_price(k, curves, Mode.BASELINE, 10.0)
    assert queue.queued == pytest.approx(980.0 * 60.0) and not queue.drains and math.isinf(queue.cost)
    state, verdicts = run(k, curves, initial_state(k, Mode.BASELINE, 0.0), [10.0] * 400)
    assert changes(verdicts) == [] and state.regret > 2 * roll  # the roll alone was paid for twice over
    assert "a roll would leave a backlog that never drains" in verdicts[-1].reason
    assert "980 tok/s arrive" in verdicts[-1].reason


def test_a_backlog_that_drains_is_named_but_not_priced() -> None:
    """950 tok/s arrive and the target serves 1000: the 57000 tokens queued during the 60 s roll drain in 1140 s.
    The restart still waits for the roll's own cost (priced, the drain only delayed the suite's closed-loop
    restarts, whose clients wait instead of queueing) and its reason names the backlog."""
    curves = backlog_curves(950.0)
    k = knobs(Strategy.RESTART)
    roll, queue = restart_price(k, curves, Mode.BASELINE, 10.0)
    assert roll == pytest.approx(950.0 * 60.0) and queue.queued == pytest.approx(950.0 * 60.0)
    assert queue.drain == pytest.approx(57000.0 / 50.0) and queue.cost == pytest.approx(950.0 * 1140.0)
    needed = math.ceil(roll / (50.0 * 15.0))
    _, verdicts = run(k, curves, initial_state(k, Mode.BASELINE, 0.0), [10.0] * (needed + 3))
    assert [i for i, v in enumerate(verdicts) if v.action is Action.RESTART] == [needed]
    assert "the roll queues 57000 tokens at 950 tok/s arriving, drained in 1140 s" in verdicts[needed].reason


def test_a_roll_the_other_pods_absorb_leaves_no_backlog() -> None:
    """Eight replicas at 5 in flight each serve 475 tok/s of the 1000 they could: while one restarts the other
    seven absorb its share, so nothing queues and the cost is the roll's alone."""
    curves = backlog_curves(950.0)
    k = knobs(Strategy.RESTART, speculative_replicas=8)
    _, queue = restart_price(k, curves, Mode.BASELINE, 40.0)
    assert queue.queued == 0.0 and queue.cost == 0.0 and queue.drains


def test_capacity_within_a_tpot_slo_is_the_rate_at_the_largest_batch_meeting_it() -> None:
    """Past the batch whose streams miss the TPOT goal a replica serves more tokens, all of them late: its
    capacity for goodput is its rate at that batch. The baseline below serves 50 + 19.7 (x - 1) tok/s at x in
    flight: 30 tok/s per stream at x = 2.94, 88 tok/s."""
    curves = linear_curves([(1.0, 100.0), (100.0, 1000.0)], [(1.0, 50.0), (100.0, 2000.0)])
    assert capacity(curves, Mode.BASELINE) == pytest.approx(2000.0)
    x = 30.303 / 10.303
    assert capacity(curves, Mode.BASELINE, 1 / 30) == pytest.approx(50 + 1950 / 99 * (x - 1), rel=1e-3)
    assert capacity(curves, Mode.BASELINE, 1 / 60) == 0.0  # not even one stream meets it
    assert capacity(curves, Mode.SPECULATIVE, 1 / 5) == pytest.approx(1000.0)  # met at every measured batch


def test_a_pool_at_its_capacity_already_is_not_held_back_by_the_backlog() -> None:
    """One replica in speculation at 100 in flight serves its most (1000 tok/s): its queue grows whether it rolls or
    stays, and the baseline serves more there. It is exempt from the refusal (the arrivals read are only a floor)
    and restarts once the regret covers the roll."""
    curves = backlog_curves(950.0)
    k = knobs(Strategy.RESTART)
    roll, queue = restart_price(k, curves, Mode.SPECULATIVE, 100.0)
    assert queue.saturated and queue.cost == 0.0 and queue.drains
    gain = 2000.0 - 1000.0
    needed = math.ceil(roll / (gain * 15.0))
    _, verdicts = run(k, curves, spec_state(), [100.0] * (needed + 3))
    assert [i for i, v in enumerate(verdicts) if v.action is Action.RESTART] == [needed]


# ------------------------------------------------------------------------------ the demand's own regimes (issue 29)


def test_a_regime_flips_once_the_rivals_summed_advantage_reaches_the_flip_dated_from_when_it_began() -> None:
    r = observe(Regimes(), -10.0, 0.0, 0.0, 1000.0)  # baseline better from the first reading: its start unknown
    assert r.better is False and r.since is None and remainder(r, 100.0) is None
    r = observe(r, 20.0, 15.0, 15.0, 1000.0)  # speculation 300 tokens ahead: under the flip
    r = observe(r, -30.0, 30.0, 15.0, 1000.0)  # and behind again: the sum floors at zero, no flip
    assert r.better is False and r.rival == 0.0
    for t in (45.0, 60.0, 75.0, 90.0):  # 20 tok/s x 15 s a reading: 1200 tokens at t = 90
        r = observe(r, 20.0, t, 15.0, 1000.0)
    assert r.better is True and r.since == 30.0  # dated from when the sum left zero
    assert r.lengths == ()  # the regime before began before the first reading: its length is unknown
    assert remainder(r, 90.0) == math.inf  # no past speculative regime: nothing says it is short
    for t in (105.0, 120.0, 135.0, 150.0, 165.0, 180.0, 195.0):
        r = observe(r, -20.0, t, 15.0, 1000.0)
    assert r.better is False and r.lengths == ((True, 60.0),)


def test_remainder_is_the_mean_of_the_past_regimes_that_outlasted_this_ones_age() -> None:
    r = Regimes(better=True, since=1000.0, lengths=((True, 600.0), (False, 9000.0), (True, 1200.0), (True, 100.0)))
    assert remainder(r, 1300.0) == pytest.approx(((600 - 300) + (1200 - 300)) / 2)
    assert remainder(r, 1900.0) == pytest.approx(1200 - 900)
    assert remainder(r, 3000.0) == math.inf  # outlasted them all: nothing says it is short


def test_a_regime_expected_to_outlast_the_roll_is_bought_early() -> None:
    """Speculation served a long stretch, then the load rose past the crossover and stayed: the baseline's regime,
    which no past one says is short, is bought at EARLY x the cost, long before the regret covers it (the
    reactive rule, 2x; here the rule is within 1 + 1/EARLY = 5x)."""
    k = knobs(Strategy.RESTART)
    gain = CURVES.rate(Mode.BASELINE, 100) - CURVES.rate(Mode.SPECULATIVE, 100)
    cost = 60.0 * CURVES.rate(Mode.SPECULATIVE, 100)
    reactive = math.ceil(cost / (gain * 15.0))
    state, verdicts = run(k, CURVES, spec_state(), [10.0] * 8 + [100.0] * (reactive + 3))
    restarts = [i - 8 for i, v in enumerate(verdicts) if v.action is Action.RESTART]
    assert len(restarts) == 1 and restarts[0] < reactive / 2
    reason = verdicts[8 + restarts[0]].reason
    assert "taken to outlast the 60 s roll" in reason and f"({EARLY:.2f}x the cost" in reason
    assert state.mode is Mode.BASELINE


def test_a_young_regime_that_no_past_one_says_is_short_is_bought_early_not_once_it_is_as_old_as_the_roll() -> None:
    """Speculation served a long stretch, then the load rose past the crossover and stayed. Five pods roll for
    600 s; no past baseline regime ended, so nothing says this one is short: the restart is bought at EARLY x the
    cost as soon as the regret reaches it. (With Lindy's rule, a regime's expected remainder was its age, so it
    waited for WAIT x the cost until the regime was as old as the roll: 40 readings, on the suite's diurnal days
    15-80 minutes after the crossing, where the naive threshold acts at it.)"""
    k = knobs(Strategy.RESTART, speculative_replicas=5, startup_seconds=120.0)
    n = k.speculative_replicas
    gain = pool_rate(CURVES, Mode.BASELINE, 500.0, n) - pool_rate(CURVES, Mode.SPECULATIVE, 500.0, n)
    cost = switch_cost(CURVES, Mode.SPECULATIVE, 500.0, n, k.startup_seconds, 0)
    early = math.ceil(EARLY * cost / (gain * 15.0))  # readings until the regret reaches EARLY x the cost
    assert early < 600.0 / 15.0  # premise: long before the regime is as old as the roll
    state, verdicts = run(k, CURVES, spec_state(), [50.0] * 8 + [500.0] * 60)
    restarts = [i - 8 for i, v in enumerate(verdicts) if v.action is Action.RESTART]
    assert len(restarts) == 1 and restarts[0] <= early + 1  # + the reading the regime's flip takes
    reason = verdicts[8 + restarts[0]].reason
    assert "no past regime of it ended sooner, so it is taken to outlast the 600 s roll" in reason
    assert f"({EARLY:.2f}x the cost" in reason and state.mode is Mode.BASELINE


def test_a_regime_expected_to_end_before_the_roll_does_waits_for_twice_the_cost() -> None:
    """Past baseline regimes lasted 5 and 6 minutes; this one is 4 minutes old: one or two more to come, less
    than the 10-minute roll (5 pods x 120 s), so the restart waits for WAIT x the cost instead of the cost."""
    k = knobs(Strategy.RESTART, speculative_replicas=5, startup_seconds=120.0)
    r = Regimes(better=False, since=1000.0, lengths=((False, 300.0), (True, 5000.0), (False, 360.0)))
    ahead = regime_ahead(k, Mode.SPECULATIVE, r, 1240.0, 1000.0, 2.0, 100.0)
    assert ahead is not None and ahead.threshold == WAIT * 1000.0
    assert "expected to stay so 90 s more: at 2 tok/s from half the 600 s roll on, the regret would reach 100" in (
        ahead.why)  # fmt: skip
    # the same regime with long past ones is bought early; a regime of the current mode forecasts nothing
    long = replace(r, lengths=((False, 3000.0),))
    assert regime_ahead(k, Mode.SPECULATIVE, long, 1240.0, 1000.0, 2.0, 100.0).threshold == EARLY * 1000.0  # type: ignore[union-attr]
    assert regime_ahead(k, Mode.BASELINE, r, 1240.0, 1000.0, 2.0, 100.0) is None
    # a regime whose start was not seen (a new deployment, an operator restart) is unknown: the reactive rule
    assert regime_ahead(k, Mode.SPECULATIVE, replace(r, since=None), 1240.0, 1000.0, 2.0, 100.0) is None


def test_a_regime_that_outlasts_the_roll_but_cannot_repay_it_waits_for_twice_the_cost() -> None:
    """Past baseline regimes lasted 50 minutes; this one is 4 minutes old, so 46 more are expected: longer than
    the 10-minute roll. At 0.1 tok/s more from half the roll on (41 minutes), the regret would reach 100 + 246,
    short of the cost of 1000: the roll is bought only at WAIT x the cost. At 1 tok/s it repays (2,560): EARLY."""
    k = knobs(Strategy.RESTART, speculative_replicas=5, startup_seconds=120.0)
    r = Regimes(better=False, since=1000.0, lengths=((False, 3000.0),))
    small = regime_ahead(k, Mode.SPECULATIVE, r, 1240.0, 1000.0, 0.1, 100.0)
    assert small is not None and small.threshold == WAIT * 1000.0
    assert "the regret would reach 346, which does not repay the cost" in small.why
    large = regime_ahead(k, Mode.SPECULATIVE, r, 1240.0, 1000.0, 1.0, 100.0)
    assert large is not None and large.threshold == EARLY * 1000.0 and "2560, which repays the cost" in large.why


def test_the_highest_demand_is_remembered_per_slice_of_the_last_roll() -> None:
    """A 1600 s roll is remembered in 16 slices of 100 s, each its highest reading; older ones are dropped."""
    peaks: tuple[tuple[float, float], ...] = ()
    for t, d in ((0.0, 5.0), (50.0, 9.0), (99.0, 7.0), (100.0, 3.0), (1650.0, 4.0)):
        peaks = remember_peak(peaks, t, d, 1600.0)
        if t == 99.0:
            assert peaks == ((0.0, 9.0),)
    assert peaks == ((100.0, 3.0), (1650.0, 4.0))  # the slice from 0 s is older than the roll
    assert reach_of(peaks, Trend(), 2.0, 1600.0) == 4.0
    assert reach_of(peaks, Trend(level=2.0, slope=0.01, at=1650.0), 2.0, 1600.0) == 18.0  # where the trend goes


def test_a_roll_is_priced_at_the_highest_demand_of_the_last_roll_so_a_square_wave_never_rolls_into_its_trough() -> None:
    """A square wave: 10 minutes at 400 in flight (baseline better), 10 minutes at 100 (speculation better), on 4
    replicas whose roll takes 20 minutes. A roll into speculation started in a trough runs into the next crest. At
    100 in flight the other three pods absorb most of a restarting one's load (1.42 M tokens per roll), at 400 they
    cannot (3.81 M): priced at the crest read within the last two rolls' time, no trough pays for it, and the pool stays
    in baseline. Priced at the reading alone (the memory forgotten at every evaluation, as before issue 29's fifth
    round), the first trough, a regime nothing says is short, rolled into speculation."""
    k = knobs(Strategy.RESTART, speculative_replicas=4, startup_seconds=300.0)
    roll, _ = restart_price(k, CURVES, Mode.BASELINE, 100.0, reach=400.0)
    assert roll == pytest.approx(switch_cost(CURVES, Mode.BASELINE, 400.0, 4, 300.0, 0))
    assert roll > 2.5 * switch_cost(CURVES, Mode.BASELINE, 100.0, 4, 300.0, 0)
    demands = ([400.0] * 40 + [100.0] * 40) * 4

    def restarts(forget: bool) -> list[int]:
        state, out = initial_state(k, Mode.BASELINE, 0.0), []
        for i, d in enumerate(demands):
            v = decide(k, CURVES, state, sample(i * 15.0, d, ready_base=None, ready_spec=4))
            state = replace(v.state, demand_peaks=(), trend=Trend()) if forget else v.state
            if v.action is Action.RESTART:
                out.append(i)
        return out

    assert restarts(False) == []
    assert restarts(True) == [46]  # 105 s into the first trough


def test_a_rising_demand_refuses_a_roll_whose_backlog_would_never_drain_where_the_trend_takes_it() -> None:
    """One replica, a 900 s roll, the demand rising from 5 to 10 in flight over 30 minutes, speculation better all
    the way (it saturates at 1000 tok/s from 10 in flight). At the reading a roll's backlog drains; where the trend
    takes the demand by the roll's end (11.2 at 9.2), the arrivals come within DRAIN_MARGIN of what speculation can
    serve: the roll is refused and the reason names the demand it was judged at. Without the trend it is not."""
    curves = backlog_curves(950.0)
    k = knobs(Strategy.RESTART, startup_seconds=900.0)
    demands = [5.0 + 5.0 * i / 120 for i in range(121)]

    def last(forget: bool) -> str:
        state, reason = initial_state(k, Mode.BASELINE, 0.0), ""
        for i, d in enumerate(demands):
            v = decide(k, curves, state, sample(i * 15.0, d, ready_base=None, ready_spec=1))
            assert v.action is Action.HOLD
            state = replace(v.state, demand_peaks=(), trend=Trend()) if forget else v.state
            reason = v.reason
        return reason

    assert "a backlog that never drains: 961 tok/s arrive at demand 12.2 (the highest the 900 s roll" in last(False)
    assert "never drains" not in last(True)

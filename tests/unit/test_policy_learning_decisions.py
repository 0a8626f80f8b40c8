"""Decisions on learned curves (as simulate's learned policy and the switching loop make them): the policy follows
what the pool really serves, but no faster than the slew bound allows, and holds calibrated curves with no
evidence."""

from __future__ import annotations

from specserve.api.models import Mode, Strategy
from specserve.policy.curves import crossover
from specserve.policy.learning import SLEW_PER_HOUR, effective
from specserve.policy.types import Action, PoolSignal, Sample
from specserve_tools.simulate.learned import LearnedPolicy
from specserve_tools.simulate.policy import SpecServePolicy
from tests.unit.policy_helpers import ILLUSTRATIVE, knobs, profile_curves

CURVES = profile_curves(ILLUSTRATIVE)  # speculation wins below 64 per replica
LOAD = 40.0


def serving(t: float, factor: float) -> Sample:
    """One speculative replica with LOAD requests, serving `factor` x its calibrated tokens/s."""
    tokens = CURVES.speculative.at(LOAD) * factor
    pool = PoolSignal(ready_replicas=1, running=LOAD, tokens_per_second=tokens, accept_length=3.2)
    return Sample(t, LOAD, speculative=pool)


def first_restart(policy: SpecServePolicy, factor: float, hours: float) -> float | None:
    for i in range(int(hours * 3600 / 15)):
        t = i * 15.0
        policy.decide(serving(t, factor), converging=False)
        if policy.verdicts and policy.verdicts[-1].action is Action.RESTART:
            return t
    return None


def test_the_learned_policy_leaves_a_mode_that_serves_less_than_calibrated_the_static_one_does_not() -> None:
    k = knobs(Strategy.RESTART)
    static = SpecServePolicy(k, CURVES, Mode.SPECULATIVE)
    learned = LearnedPolicy(k, CURVES, Mode.SPECULATIVE, Strategy.RESTART)
    assert first_restart(static, 0.5, 3.0) is None
    when = first_restart(learned, 0.5, 3.0)
    assert when is not None and learned.verdicts[-1].mode is Mode.BASELINE
    # Bounded: the curve it decided from had moved at most SLEW_PER_HOUR of the calibrated value per hour.
    base, spec = CURVES.baseline.at(LOAD), CURVES.speculative.at(LOAD)
    needed = 1 - base / spec  # the fall of the speculative curve at which baseline starts to win here
    assert when >= 3600 * needed / SLEW_PER_HOUR - 60
    eff = learned.curves
    assert eff is not None
    cross = crossover(eff)
    assert cross is not None and cross < 64


def test_with_the_pool_serving_as_calibrated_the_learned_policy_decides_as_the_static_one() -> None:
    k = knobs(Strategy.RESTART)
    learned = LearnedPolicy(k, CURVES, Mode.SPECULATIVE, Strategy.RESTART)
    assert first_restart(learned, 1.0, 2.0) is None
    assert learned.curves is not None and crossover(learned.curves) == crossover(CURVES)


def test_adaptive_reports_its_learned_curves_but_re_renders_from_the_calibrated_ones() -> None:
    learned = LearnedPolicy(knobs(Strategy.ADAPTIVE), CURVES, Mode.SPECULATIVE, Strategy.ADAPTIVE)
    for i in range(400):
        learned.decide(serving(i * 15.0, 0.5), converging=False)
    assert learned.curves == CURVES
    assert learned.learning is not None
    assert effective(CURVES, learned.learning) != CURVES  # what it would change, as status shows

#!/usr/bin/env python3
"""TrafficSplit's headroom: what a predictive controller reading the same gauges as the operator's policy gets.

`specserve simulate` compares SpecServe's TrafficSplit policy with the optimum (the best weight schedule with
perfect knowledge, weights free to move every second). This script asks where the gap comes from. It simulates,
beside the usual rows, a model-predictive controller that reads what the policy reads every evaluation (the
pools' requests in flight and the demand, averaged over the same query window, through the simulated Prometheus)
and nothing of the future:

- for every speculative weight within --span points of the one in force, and 0 and 100, it predicts the tokens
  the pools serve over --horizon seconds if that weight stays, on the policy's curves, from the observed
  requests in flight (the requests on the speculative pool move as weights.py's h(c): arrivals replace
  completions, total in flight held at the demand; it is given the trace's mean output length, which the
  operator has no gauge for);
- it moves to the best when that serves more than --tolerance over the weights in force. No dead band,
  stabilization window, min dwell or step bound: its only calm is the tolerance.

    .venv/bin/python scripts/trafficsplit_headroom.py                   # the diurnal day, about 2 minutes
    .venv/bin/python scripts/trafficsplit_headroom.py --tolerance 0.0025

Exploration, not a test: the figures are in docs/simulate.md.
"""

from __future__ import annotations

import argparse

import numpy as np
from numpy.typing import NDArray

from specserve.api.curves import Curve
from specserve.api.models import Strategy
from specserve.api.validation import parse_object
from specserve.policy.curves import ModeCurves
from specserve.policy.types import Sample
from specserve_tools.emulator.profile import load_profile
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.compare import compare
from specserve_tools.simulate.run import simulate
from specserve_tools.simulate.scenario import DEFAULT_SPEC, scenario, with_strategy
from specserve_tools.simulate.setup import Command, Setup, bin_trace
from specserve_tools.simulate.summary import gain, summarise
from specserve_tools.simulate.synthetic import shipped_trace

Array = NDArray[np.float64]
PREDICTION_STEPS = 60  # Euler steps over the horizon


def pool_rate(curve: Curve, requests: Array, replicas: int) -> Array:
    """Tokens/s of a pool's replicas sharing `requests` (policy.curves.rate: linear to 0 below the first point)."""
    xs, ys = np.asarray(curve.xs, dtype=np.float64), np.asarray(curve.ys, dtype=np.float64)
    batch = requests / replicas
    return replicas * np.where(batch < xs[0], ys[0] * batch / xs[0], np.interp(batch, xs, ys))


def predicted_tokens(
    curves: ModeCurves, weights: Array, c_spec: float, demand: float, n_spec: int, n_base: int, horizon: float
) -> Array:
    """Tokens served over `horizon` (in seconds per output token of a request: seconds / mean output length)
    with each speculative weight held, from c_spec of `demand` in flight on the speculative pool."""
    share = weights / 100.0
    spec = np.full(len(weights), c_spec)
    dt = horizon / PREDICTION_STEPS
    total = np.zeros(len(weights))
    for _ in range(PREDICTION_STEPS):
        f_s = pool_rate(curves.speculative, spec, n_spec)
        f_b = pool_rate(curves.baseline, demand - spec, n_base)
        total += (f_s + f_b) * dt
        spec = np.clip(spec + dt * (share * (f_s + f_b) - f_s), 0.0, demand)
    return total


class Predictive:
    """The model-predictive controller described in the module docstring."""

    def __init__(self, curves: ModeCurves, horizon: float, span: int, tolerance: float) -> None:
        self.name = f"predictive (±{span}, {tolerance * 100:g} %)"
        self.curves, self.horizon, self.span, self.tolerance = curves, horizon, span, tolerance
        self.weight = 100
        self.setup: Setup | None = None

    def start(self, setup: Setup) -> Command:
        self.setup = setup
        return Command(speculative_weight=self.weight)

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        spec, base = sample.speculative, sample.baseline
        if self.setup is None or sample.demand is None or spec is None or base is None:
            return None
        if spec.running is None or base.running is None:
            return None  # unknown is not zero
        c_spec = spec.running + (spec.queued or 0.0)
        demand = c_spec + base.running + (base.queued or 0.0)
        near = range(max(0, self.weight - self.span), min(100, self.weight + self.span) + 1)
        candidates = np.asarray(sorted({0, 100, *near}), dtype=np.float64)
        s = self.setup
        served = predicted_tokens(
            self.curves, candidates, c_spec, demand, s.speculative_replicas, s.baseline_replicas, self.horizon
        )
        now = served[int(np.flatnonzero(candidates == self.weight)[0])]
        best = int(np.argmax(served))
        if served[best] > now * (1 + self.tolerance):
            self.weight = int(candidates[best])
            return Command(speculative_weight=self.weight)
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", default="diurnal", help="a shipped closed-loop trace (default diurnal)")
    parser.add_argument("--profile", default="illustrative-crossover-8b")
    parser.add_argument("--horizon", type=float, default=60.0, help="prediction horizon, seconds (default 60)")
    parser.add_argument("--span", type=int, default=10, help="weights tried each side of the one in force")
    parser.add_argument("--tolerance", type=float, default=0.001, help="relative gain that moves the weights")
    args = parser.parse_args()
    obj = with_strategy(parse_object(DEFAULT_SPEC), Strategy.TRAFFIC_SPLIT)
    scen = scenario(obj, load_profile(args.profile), Slo(5.0, 0.1))
    load = bin_trace(shipped_trace(args.trace, 1), 1.0)
    if not load.closed_loop or scen.curves is None:
        raise SystemExit("a closed-loop trace and a profile with curves are needed")
    comparison = compare(scen.setup, load, scen.knobs, scen.curves)
    controller = Predictive(scen.curves, args.horizon / load.tokens_per_request, args.span, args.tolerance)
    run = simulate(scen.setup, load, controller)
    rows = [*comparison.summaries, summarise(run, "predictive")]
    best = next(s for s in comparison.summaries if s.name == comparison.best_static)
    bound = comparison.bound
    assert bound is not None
    print(f"{args.trace} on {args.profile}: upper bound {bound.goodput_tokens / 1e6:.2f} Mtok, best static "
          f"{best.name} {best.goodput_tokens / 1e6:.2f}")  # fmt: skip
    for row in rows:
        captured = gain(row.goodput_tokens, best.goodput_tokens, bound.goodput_tokens)
        share = "-" if captured is None else f"{captured * 100:.1f} %"
        good = row.goodput_tokens / 1e6
        print(f"  {row.name:32s} {good:8.2f} Mtok  gain captured {share:>7s}  {row.weight_changes} weight changes")


if __name__ == "__main__":
    main()

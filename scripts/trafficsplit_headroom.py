#!/usr/bin/env python3
"""TrafficSplit's headroom: what model-predictive controllers without the policy's knobs get from the same gauges.

SpecServe's TrafficSplit policy is itself a predictive controller (policy/closed_loop.py: a horizon of 6 turnovers of
the requests in flight, a tolerance of hysteresis x the demand's noise around its trend, the step bound, and the
stabilization windows and min dwell at the 50/50 line). This script measures what its choices cost. Beside the
usual rows it simulates the controllers it grew from, which read what the policy reads every evaluation (the
pools' requests in flight and the demand, averaged over the same query window, through the simulated Prometheus)
and nothing of the future:

- for every speculative weight within --span points of the one in force, and 0 and 100, it predicts the tokens
  the pools serve over --horizon seconds if that weight stays, on the policy's curves, from the observed
  requests in flight (the requests on the speculative pool move as weights.py's h(c): arrivals replace
  completions, total in flight held at the demand; it is given the trace's mean output length, which the
  operator has no gauge for);
- it moves to the best when that serves more than a tolerance over the weights in force. The plain controller's
  tolerance is fixed (--tolerance). The noise-aware one's grows with how much the last --readings demand
  readings disagree: --noise x their relative standard deviation (around their mean, not their trend).
  Neither has a dead band, stabilization window, min dwell or step bound.

It runs a closed-loop day (goodput, gain captured against the upper bound) and an open-loop day (latency gain
against the latency reference, and how often each controller writes the weights).

    .venv/bin/python scripts/trafficsplit_headroom.py          # about 3 minutes on one core

Exploration, not a test: the figures are in docs/simulate.md.
"""

from __future__ import annotations

import argparse

import numpy as np
from numpy.typing import NDArray

from specserve.api.curves import Curve
from specserve.api.models import Strategy
from specserve.api.validation import parse_object
from specserve.policy.closed_loop import in_flight
from specserve.policy.curves import ModeCurves
from specserve.policy.types import Sample
from specserve_tools.emulator.profile import load_profile
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.compare import compare
from specserve_tools.simulate.run import simulate
from specserve_tools.simulate.scenario import DEFAULT_SPEC, scenario, with_strategy
from specserve_tools.simulate.setup import Command, Load, Setup, bin_trace
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
    """The model-predictive controllers described in the module docstring (noise 0: the plain one)."""

    def __init__(
        self, curves: ModeCurves, horizon: float, span: int, tolerance: float, noise: float = 0.0, readings: int = 1
    ) -> None:
        calm = f"{noise:g} x the jitter of {readings} readings" if noise else f"{tolerance * 100:g} %"
        self.name = f"predictive ({calm})"
        self.curves, self.horizon, self.span = curves, horizon, span
        self.tolerance, self.noise, self.readings = tolerance, noise, readings
        self.weight = 100
        self.seen: list[float] = []
        self.setup: Setup | None = None

    def start(self, setup: Setup, demand: float | None) -> Command:
        self.setup = setup
        return Command(speculative_weight=self.weight)

    def jitter(self) -> float:
        """The last readings' relative standard deviation; 1 (no trust) until there are two."""
        if len(self.seen) < 2:
            return 1.0
        mean = float(np.mean(self.seen))
        return float(np.std(self.seen)) / mean if mean > 0 else 1.0

    def decide(self, sample: Sample, converging: bool) -> Command | None:
        c_spec, c_base = in_flight(sample.speculative), in_flight(sample.baseline)
        if self.setup is None or sample.demand is None or c_spec is None or c_base is None:
            return None  # unknown is not zero
        demand = c_spec + c_base
        self.seen = [*self.seen, demand][-self.readings :]
        near = range(max(0, self.weight - self.span), min(100, self.weight + self.span) + 1)
        candidates = np.asarray(sorted({0, 100, *near}), dtype=np.float64)
        s = self.setup
        served = predicted_tokens(
            self.curves, candidates, c_spec, demand, s.speculative_replicas, s.baseline_replicas, self.horizon
        )
        now = served[int(np.flatnonzero(candidates == self.weight)[0])]
        best = int(np.argmax(served))
        tolerance = self.tolerance + (self.noise * self.jitter() if self.noise else 0.0)
        if served[best] > now * (1 + tolerance):
            self.weight = int(candidates[best])
            return Command(speculative_weight=self.weight)
        return None


def controllers(curves: ModeCurves, load: Load, args: argparse.Namespace) -> list[Predictive]:
    length = load.tokens_per_request if load.closed_loop else sum(load.tokens) / max(sum(load.arrivals), 1e-9)
    horizon = args.horizon / length  # in seconds per output token of a request: the model's own time scale
    return [
        Predictive(curves, horizon, args.span, args.tolerance),
        Predictive(curves, horizon, args.span, 0.0, args.noise, args.readings),
    ]


def report(args: argparse.Namespace, trace: str) -> None:
    obj = with_strategy(parse_object(DEFAULT_SPEC), Strategy.TRAFFIC_SPLIT)
    scen = scenario(obj, load_profile(args.profile), Slo(5.0, 0.1))
    if scen.curves is None:
        raise SystemExit(f"{args.profile} has no curves")
    load = bin_trace(shipped_trace(trace, 1), 1.0)
    comparison = compare(scen.setup, load, scen.knobs, scen.curves)
    best = next(s for s in comparison.summaries if s.name == comparison.best_static)
    bound = comparison.bound
    assert bound is not None
    rows = [s for s in comparison.summaries if s.role in ("specserve", "learned")] + [
        summarise(simulate(scen.setup, load, c), "predictive") for c in controllers(scen.curves, load, args)
    ]
    ref, static = bound.tpot_token_mean, best.tpot_token_mean
    if load.closed_loop:
        print(f"{trace} (closed loop) on {args.profile}: upper bound {bound.goodput_tokens / 1e6:.2f} Mtok, "
              f"best static {best.name} {best.goodput_tokens / 1e6:.2f}")  # fmt: skip
    else:
        assert ref is not None and static is not None
        print(f"{trace} (open loop) on {args.profile}: latency reference {ref * 1e3:.2f} ms per token, "
              f"best static {best.name} {static * 1e3:.2f} ms")  # fmt: skip
    for row in rows:
        tpot = row.tpot_token_mean
        if load.closed_loop:
            captured = gain(row.goodput_tokens, best.goodput_tokens, bound.goodput_tokens)
            figure = f"{row.goodput_tokens / 1e6:8.2f} Mtok"
        else:
            assert ref is not None and static is not None and tpot is not None
            captured = gain(-tpot, -static, -ref)  # latency: lower is better
            figure = f"{tpot * 1e3:8.3f} ms"
        share = "-" if captured is None else f"{captured * 100:.1f} %"
        print(f"  {row.name:58s} {figure}  gain captured {share:>7s}  {row.weight_changes} weight changes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--closed", default="diurnal", help="a shipped closed-loop trace (default diurnal)")
    parser.add_argument("--open", default="diurnal-requests", help="a shipped open-loop trace")
    parser.add_argument("--profile", default="illustrative-crossover-8b")
    parser.add_argument("--horizon", type=float, default=60.0, help="prediction horizon, seconds (default 60)")
    parser.add_argument("--span", type=int, default=10, help="weights tried each side of the one in force")
    parser.add_argument("--tolerance", type=float, default=0.001, help="the plain controller's relative gain")
    parser.add_argument("--noise", type=float, default=0.1, help="the noise-aware tolerance per unit of jitter")
    parser.add_argument("--readings", type=int, default=5, help="demand readings the jitter is taken over")
    args = parser.parse_args()
    for trace in (args.closed, args.open):
        report(args, trace)


if __name__ == "__main__":
    main()

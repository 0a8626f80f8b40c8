"""One comparison: every policy the strategy calls for, on the same load, side by side with the optimum: an upper
bound no policy can beat (bound.py), and for open loops a latency reference.

Policies that decide like the operator come from POLICIES, a registry: each entry builds a controller from the
deployment, the knobs and the curves. "learned" is the operator as it runs: the switching loop's learning round in
front of its decide. "specserve" is the same policy held on the spec's curves (what learning adds or costs shows
between the two rows)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

from specserve.api.models import Mode, Strategy
from specserve.policy.curves import ModeCurves
from specserve.policy.types import Knobs
from specserve_tools.simulate.baselines import FixedSplit, NaiveThreshold, Static
from specserve_tools.simulate.bound import upper_bound
from specserve_tools.simulate.ceiling import HeldPlan
from specserve_tools.simulate.ceiling import role as ceiling_role
from specserve_tools.simulate.latency_bound import latency_reference
from specserve_tools.simulate.learned import learned_policy
from specserve_tools.simulate.optimum import best_fixed_weights, restart_optimum, split_optimum
from specserve_tools.simulate.policy import SpecServePolicy
from specserve_tools.simulate.run import Run, adaptive_table, simulate
from specserve_tools.simulate.setup import Controller, Load, Setup
from specserve_tools.simulate.summary import Summary, bound_summary, gain, summarise

ADAPTIVE_FACTORS = (0.5, 1.0, 1.5, 2.0, 3.0)  # the configs rendered at the crossover x these, run as references
ADAPTIVE_NO_CROSSOVER = (2.0, 8.0, 32.0, 128.0)  # ... or at these (per replica) when the curves give none
FIXED_CANDIDATES = 3  # fixed splits the steady state ranks best, simulated to find the best one
STATIC_ROLES = ("speculative", "baseline", "fixed")
GOODPUT_TIE = 1e-4  # relative: goodputs this close rank as equal (open loop: then latency decides)

PolicyFactory = Callable[[Setup, Knobs, ModeCurves | None], Controller]


def _specserve(setup: Setup, knobs: Knobs, curves: ModeCurves | None) -> Controller:
    return SpecServePolicy(knobs, curves, setup.initial_mode, f"SpecServe {setup.strategy} (spec's curves)")


# role -> factory: every entry is simulated on every load
POLICIES: dict[str, PolicyFactory] = {"specserve": _specserve, "learned": learned_policy}


@dataclass(frozen=True)
class Entry:
    role: str
    setup: Setup
    controller: Controller


@dataclass
class Comparison:
    setup: Setup
    summaries: list[Summary]  # the simulated policies, in the order of `runs`
    runs: list[Run]
    best_static: str
    notes: list[str] = field(default_factory=list)
    bound: Summary | None = None  # the optimum's row

    def rows(self) -> list[Summary]:
        return [*self.summaries, *([self.bound] if self.bound is not None else [])]


def _run(entry: Entry, load: Load) -> tuple[Run, Summary]:
    run = simulate(entry.setup, load, entry.controller)
    return run, summarise(run, entry.role)


def adaptive_configs(setup: Setup) -> list[Entry]:
    """Adaptive's references: the engine's config rendered at crossovers around the one SpecServe renders (and
    at a spread of them when the curves cross nowhere), each all day. The best of them is what a fixed adaptive
    config could achieve: the upper bound (the better curve at every batch) is not, since drafting off runs at
    the profile's adaptive_off_efficiency of the baseline, below a plain baseline engine."""
    c = setup.crossover
    points = [c * f for f in ADAPTIVE_FACTORS] if c is not None else list(ADAPTIVE_NO_CROSSOVER)
    out, seen = [], set()
    for x in points:
        table = adaptive_table(x, setup.num_steps)
        key = tuple(sorted((k, tuple(v)) for k, v in table.items()))
        if key in seen:
            continue
        seen.add(key)
        out.append(Entry("config", replace(setup, adaptive_table=table),
                         Static(f"adaptive config at {x:.1f}", Mode.SPECULATIVE)))  # fmt: skip
    return out


def entries(
    setup: Setup, load: Load, knobs: Knobs, curves: ModeCurves | None, configs: bool = False,
    ceilings: Sequence[float] = (),
) -> list[Entry]:  # fmt: skip
    # Static modes of Adaptive run as plain engines (one pool), as in a Restart setup that never restarts.
    plain = replace(setup, strategy=Strategy.RESTART) if setup.strategy is Strategy.ADAPTIVE else setup
    out = [
        Entry("speculative", plain, Static("always speculative", Mode.SPECULATIVE)),
        Entry("baseline", plain, Static("always baseline", Mode.BASELINE)),
    ]
    if setup.strategy is Strategy.TRAFFIC_SPLIT:
        for w in [w for w in best_fixed_weights(setup, load) if w not in (0, 100)][:FIXED_CANDIDATES]:
            out.append(Entry("fixed", setup, FixedSplit(f"fixed split {w}/{100 - w}", w)))
    if setup.strategy is Strategy.ADAPTIVE:
        out.append(Entry("naive", replace(setup, adaptive_table=None),
                         Static("SGLang default adaptive", Mode.SPECULATIVE)))  # fmt: skip
    elif setup.crossover is not None:
        out.append(Entry("naive", setup, NaiveThreshold(setup.crossover)))
    for role, factory in POLICIES.items():
        out.append(Entry(role, setup, factory(setup, knobs, curves)))
    if setup.forecast_horizon is not None:  # Restart with a demand history: the same policy without it, beside it
        reactive = SpecServePolicy(knobs, curves, setup.initial_mode, f"SpecServe {setup.strategy} reactive")
        out.append(Entry("reactive", replace(setup, forecast_horizon=None), reactive))
    # The steady-state plan with hindsight, replayed: a strong reference policy (not the bound)
    if setup.strategy is Strategy.TRAFFIC_SPLIT:
        out.append(Entry("plan", setup, replace(split_optimum(setup, load), name="offline plan (replayed)")))
    elif setup.strategy is Strategy.RESTART:
        plan = restart_optimum(setup, load)
        out.append(Entry("plan", setup, replace(plan, name="offline plan (replayed)")))
        for share in ceilings:  # the plan without its foresight of when regimes begin (simulate.ceiling)
            held = HeldPlan(replace(plan), share, name=f"offline plan, restarts held to {share:g}x the cost")
            out.append(Entry(ceiling_role(share), setup, held))
    elif setup.strategy is Strategy.ADAPTIVE and configs:
        out += adaptive_configs(setup)
    return out


def best_config(summaries: list[Summary]) -> list[Summary]:
    """Adaptive: the best of the reference configs becomes the plan's row (what a fixed config achieves)."""
    configs = [s for s in summaries if s.role == "config"]
    if not configs:
        return summaries
    top = max(configs, key=lambda s: s.goodput_tokens)
    return [replace(s, role="plan", name=f"best fixed {s.name}") if s is top else s for s in summaries]


def run_all(items: Sequence[Entry], load: Load, jobs: int) -> list[tuple[Run, Summary]]:
    if jobs <= 1:
        return [_run(e, load) for e in items]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_run, items, [load] * len(items)))


def rank_key(s: Summary, top_goodput: float) -> tuple[float, float, float]:
    """Lexicographic: goodput (within GOODPUT_TIE of the best counts as equal), then mean TPOT (per output token),
    then p99 TTFT."""
    tied = s.goodput_tokens >= top_goodput * (1 - GOODPUT_TIE)
    inf = float("inf")
    # the tied rank as the top itself (0 would rank them below every untied row, whose key is -goodput < 0)
    return (-top_goodput if tied else -s.goodput_tokens, s.tpot_token_mean if s.tpot_token_mean is not None else inf,
            s.ttft_p99 if s.ttft_p99 is not None else inf)  # fmt: skip


def compare(
    setup: Setup, load: Load, knobs: Knobs, curves: ModeCurves | None, jobs: int = 1, configs: bool = False,
    ceilings: Sequence[float] = (),
) -> Comparison:  # fmt: skip
    """`configs`: Adaptive also runs fixed configs around the crossover, the best of them as the plan's row.
    `ceilings`: Restart also runs the plan with its restarts held to these shares of the cost (simulate.ceiling)."""
    items = entries(setup, load, knobs, curves, configs, ceilings)
    done = run_all(items, load, jobs)
    runs = [run for run, _ in done]
    summaries = best_config([summary for _, summary in done])
    static = [s for s in summaries if s.role in STATIC_ROLES]
    notes: list[str] = []
    if load.closed_loop:
        best = max(static, key=lambda s: s.goodput_tokens)
    else:
        top = max(s.goodput_tokens for s in static)
        best = min(static, key=lambda s: rank_key(s, top))
    b = upper_bound(setup, load)
    notes += b.notes
    reference = latency_reference(setup, load)
    bound = bound_summary("optimum (upper bound)", b.goodput_tokens, b.served_tokens, reference)
    for s in summaries:
        if s.goodput_tokens > b.goodput_tokens * (1 + 1e-9) + 1e-6:
            notes.append(f"BUG: {s.name} beats the upper bound ({s.goodput_tokens:.0f} > {b.goodput_tokens:.0f})")
    if b.goodput_tokens - best.goodput_tokens > GOODPUT_TIE * b.goodput_tokens:
        summaries = [replace(s, gain_captured=gain(s.goodput_tokens, best.goodput_tokens, b.goodput_tokens))
                     for s in summaries]  # fmt: skip
        bound = replace(bound, gain_captured=1.0)
    else:
        notes.append("goodput: the best static policy is within 0.01% of the bound: no goodput gain to capture")
    static_tpot = best.tpot_token_mean
    if not load.closed_loop and reference is not None and static_tpot is not None:
        ref = reference

        # latency: lower is better, so the gain runs the other way; only for policies that lose no goodput
        def latency(s: Summary) -> float | None:
            if s.tpot_token_mean is None or s.goodput_tokens < best.goodput_tokens * (1 - GOODPUT_TIE):
                return None
            return gain(-s.tpot_token_mean, -static_tpot, -ref)

        summaries = [replace(s, latency_gain_captured=latency(s)) for s in summaries]
        bound = replace(bound, latency_gain_captured=gain(-ref, -static_tpot, -ref))
        for s in summaries:
            if s.tpot_token_mean is not None and s.tpot_token_mean < reference * (1 - 1e-6):
                notes.append(
                    f"{s.name} beats the latency reference ({s.tpot_token_mean * 1e3:.2f} ms < "
                    f"{reference * 1e3:.2f} ms): see docs/simulate.md"
                )
    return Comparison(setup, summaries, runs, best.name, notes, bound)

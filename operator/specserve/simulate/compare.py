"""One comparison: every policy the strategy calls for, on the same load, side by side with the optimum."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

from specserve.api.models import Mode, Strategy
from specserve.policy.curves import ModeCurves
from specserve.policy.types import Knobs
from specserve.simulate.baselines import FixedSplit, NaiveThreshold, Static
from specserve.simulate.optimum import best_fixed_weights, restart_optimum, split_optimum
from specserve.simulate.policy import SpecServePolicy
from specserve.simulate.run import Run, simulate
from specserve.simulate.setup import Controller, Load, Setup
from specserve.simulate.summary import Summary, gain, summarise

FIXED_CANDIDATES = 3  # fixed splits the steady state ranks best, simulated to find the best one


@dataclass(frozen=True)
class Entry:
    role: str
    setup: Setup
    controller: Controller


@dataclass
class Comparison:
    setup: Setup
    summaries: list[Summary]
    runs: list[Run]
    best_static: str
    notes: list[str] = field(default_factory=list)


def _run(entry: Entry, load: Load) -> tuple[Run, Summary]:
    run = simulate(entry.setup, load, entry.controller)
    return run, summarise(run, entry.role)


def entries(setup: Setup, load: Load, knobs: Knobs, curves: ModeCurves | None) -> list[Entry]:
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
    out.append(
        Entry("specserve", setup, SpecServePolicy(knobs, curves, setup.initial_mode, f"SpecServe {setup.strategy}"))
    )
    if setup.strategy is Strategy.TRAFFIC_SPLIT:
        out.append(Entry("optimum", setup, split_optimum(setup, load)))
    elif setup.strategy is Strategy.RESTART:
        out.append(Entry("optimum", setup, restart_optimum(setup, load)))
    return out


def run_all(items: Sequence[Entry], load: Load, jobs: int) -> list[tuple[Run, Summary]]:
    if jobs <= 1:
        return [_run(e, load) for e in items]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_run, items, [load] * len(items)))


def compare(setup: Setup, load: Load, knobs: Knobs, curves: ModeCurves | None, jobs: int = 1) -> Comparison:
    items = entries(setup, load, knobs, curves)
    done = run_all(items, load, jobs)
    runs = [run for run, _ in done]
    summaries = [summary for _, summary in done]
    static = [s for s in summaries if s.role in ("speculative", "baseline", "fixed")]
    best = max(static, key=lambda s: s.goodput_tokens)
    optimum = next((s for s in summaries if s.role == "optimum"), None)
    notes: list[str] = []
    if optimum is None:
        notes.append(f"{setup.strategy}: no offline optimum (the engine switches by itself); gain not computed")
        return Comparison(setup, summaries, runs, best.name, notes)
    # Every simulated policy is a schedule with the optimum's freedom, so the optimum is at least the best of them:
    # when the steady-state plan replays below one (near an SLO cliff the steady state sees only approximately),
    # that one stands for the optimum and a note says so.
    top = max(summaries, key=lambda s: s.goodput_tokens)
    summaries = [
        replace(s, gain_captured=gain(s.goodput_tokens, best.goodput_tokens, top.goodput_tokens)) for s in summaries
    ]
    if top.goodput_tokens > optimum.goodput_tokens * (1 + 1e-4):
        notes.append(
            f"the optimum's steady-state plan replays at {optimum.goodput_tokens / 1e6:.2f} Mtok of goodput, below "
            f"{top.name} ({top.goodput_tokens / 1e6:.2f}): gains are measured against {top.name}"
        )
    return Comparison(setup, summaries, runs, best.name, notes)

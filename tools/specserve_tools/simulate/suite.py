"""The randomized suite: deployments and days drawn from wide distributions, every policy compared on each
(`compare.compare`, the same code `specserve simulate` runs), and the distribution of what each captured.

A benchmark that cannot be tuned to: develop on one seed, report on others. Each case draws, from `random.Random(
seed * 1_000_003 + index)` (a case is the same whatever N and however many workers):

- curves (`draw_curves`): a baseline that saturates at k_b in flight per replica (total tends to r1 x k_b; r1, the
  single-stream rate, 20-150 tok/s, k_b 4-200); speculation s0 x faster at one request (0.6-3x; accept length
  1-6 drawn with it) saturating earlier, at k_s, chosen so that the modes cross at c, log-uniform over 1-200 per
  replica. Or no crossover: speculation always better (k_s >= k_b), or never (s0 < 1: the seed hardware). Or the
  shape of a shipped profile or of a real H200 sweep (docs/real-engine/), its concurrency axis stretched so that it
  crosses anywhere in 1-200. A quarter of the cases with a crossover configure `crossoverConcurrency` alone (within
  -20..+25 % of the true one): the policy decides with curves modelled on it;
- the deployment: the strategy (round robin over the three, so each gets a third of the cases), replicas 1-8
  (TrafficSplit: 1-4 per pool), a restart (start-up) cost log-uniform over 30 s - 15 min, maxRestartsPerDay from
  2, 6, 12, 24;
- the initial mode: the better one at the day's first load (what a user would start in);
- a day (`draw_levels`), SUITE_HOURS long for TrafficSplit and RESTART_HOURS for Restart and Adaptive (a
  restart of up to 15 min needs a day that leaves room to pay it back), at DT s per step, its demand peak 0.3-4x
  the crossover (or the baseline's mid-curve concurrency) times the replicas, the trough 2-80 % of the peak: a
  diurnal cycle of any period (1.5-6 h), shape (cos^2 to any power 0.5-3) and noise (AR(1), 0-15 %), to which
  the kind adds weekend (the second half 30-70 % lower), bursts (1-4, up to 1.5x the peak, 2-30 min), a step
  that stays (x0.2-5), a drift of acceptance (the speculative curve moves with an accept length drifting
  +-20-50 % over the window: the policy keeps the curves it was given), open-loop arrivals shaped like Azure
  (Poisson) or BurstGPT (gamma inter-arrivals, shape 0.2-0.7), lognormal output lengths, or an adversarial day:
  a square wave between trough and peak whose half period is the restart cost times 1-3 plus a minute (each
  switch pays off about when the load turns);
- the clients' TPOT goal (what goodput is scored against and the policy is given as tpotSloSeconds): 1.5-5x one
  request's time per token on the baseline, met at light load and missed at heavy load whatever the hardware.

The days are compressed (2 or 6 h, not 24): a case must cost seconds, not minutes (a 24 h TrafficSplit day
costs ~75 s on one busy core). What is compared is unchanged: every policy on the same load, against the best
static policy, the replayed offline plan and the upper bound.

Per case (`score`): each policy's gain over the best static policy as a share of the replayed offline plan's
(Adaptive has no plan: of the upper bound's), its loss to the naive threshold and to the best static (share of
tokens), its gap to the bound (share of the bound's tokens), its weight changes per day (TrafficSplit), its restarts
into speculation. A case whose plan gains less than EASY (1 %) of the tokens over the best static is reported apart.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from specserve.api.curves import Curve, crossings
from specserve.api.validation import parse_object
from specserve_tools.emulator.profile import Profile, load_profile, profile_from_bench
from specserve_tools.simulate.ceiling import PREFIX as HELD_PREFIX
from specserve_tools.simulate.ceiling import SHARES
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.compare import compare
from specserve_tools.simulate.scenario import DEFAULT_SLO_TTFT, DEFAULT_SPEC, scenario
from specserve_tools.simulate.setup import Load, bin_trace
from specserve_tools.simulate.traces import Trace

SUITE_HOURS = 2.0  # one TrafficSplit case's day, compressed
RESTART_HOURS = 6.0  # a Restart or Adaptive case's: a restart costs up to 15 min, a day must leave room to pay it back
DT = 5.0  # simulation step (s): a third of the default evaluation interval
STEP = 60.0  # a closed-loop day changes its clients once a minute
MIN_TPOT = 0.001  # s/token: the least spec.switching.tpotSloSeconds accepts
STRADDLE_SHARE = 0.75  # Restart cases with a crossover whose day straddles it (draw_case)
EASY = 0.01  # the plan gains less than this share of the tokens over the best static: reported apart
BELOW_STATIC = 0.005  # a policy this far below the best static (share of its tokens) fails the floor
STRATEGIES = ("TrafficSplit", "Restart", "Adaptive")
SHAPES = ("illustrative-crossover-8b", "eagle3-llama31-8b-h100", "seed-kimi-k25-rtxpro6000")
REAL_SWEEPS = (("h200-eagle3-r1", "h200-baseline-r1"), ("h200-eagle3-r2", "h200-baseline-r2"))
DAY_KINDS = ("diurnal", "weekend", "bursts", "step", "drift", "open-loop", "adversarial")


@dataclass(frozen=True)
class Drawn:
    """One case's deployment curves: the plant's truth and what the spec is given."""

    family: str  # parametric | always | never | shape:<name> | real:<name>
    speculative: Curve
    baseline: Curve
    crossover: float | None  # the plant's, per replica
    accept_length: float


@dataclass
class Case:
    index: int
    tpot_slo: float  # s/token: what goodput is scored against (and the policy is given)
    strategy: str
    family: str
    day: str
    crossover: float | None
    modelled: bool  # the spec gives crossoverConcurrency alone
    replicas: tuple[int, int]
    startup_seconds: float
    budget: int
    seed_like: bool  # speculation never pays
    seconds: float = 0.0  # how long the case took
    plan_gain: float | None = None  # the plan's (Adaptive: the bound's) goodput over the best static, share of it
    policies: dict[str, dict[str, float | None]] = field(default_factory=dict)
    error: str | None = None  # the case failed (a long run keeps the others); reported, never scored


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _grid(top: float) -> list[float]:
    n = 28
    return sorted({round(math.exp(math.log(top) * i / (n - 1)), 4) for i in range(n)} | {1.0})


def _saturating(r1: float, k: float, x: float) -> float:
    return r1 * x / (1 + (x - 1) / k)


def _crossover_of(spec: Curve, base: Curve) -> float | None:
    for x, direction in crossings(spec, base):
        if direction < 0:
            return x
    return None


def parametric(rng: random.Random, kind: str) -> Drawn:
    """kind: parametric (crosses at c), always (speculation wins everywhere), never (it loses everywhere)."""
    r1, k_b = rng.uniform(20.0, 150.0), _log_uniform(rng, 4.0, 200.0)
    s0 = rng.uniform(0.6, 0.98) if kind == "never" else rng.uniform(1.05, 3.0)
    c: float | None = None
    if kind == "parametric":
        c = _log_uniform(rng, 1.0, 200.0)
        k_s = (c - 1) / (s0 * (1 + (c - 1) / k_b) - 1) if c > 1.0 else k_b / (s0 * 4)
        # at least 1: below it the curve would fall past one request (total tokens/s never does); the modes
        # then cross a little later than c (the crossover is taken from the curves)
        k_s = max(k_s, 1.0)
    elif kind == "always":
        k_s = k_b * rng.uniform(1.0, 1.5)
    else:
        k_s = k_b * rng.uniform(0.3, 1.0)
    top = max(4 * k_b, 4 * (c or 1.0), 16.0)
    xs = _grid(top)
    spec = Curve.from_points([(x, s0 * _saturating(r1, k_s, x)) for x in xs], "drawn speculative")
    base = Curve.from_points([(x, _saturating(r1, k_b, x)) for x in xs], "drawn baseline")
    accept = min(6.0, max(1.0, 1.0 + (s0 - 0.6) * 2.1 + rng.uniform(-0.3, 0.3)))
    return Drawn(kind, spec, base, _crossover_of(spec, base), accept)


def _stretched(name: str, spec: Curve, base: Curve, rng: random.Random, accept: float) -> Drawn:
    """A measured shape, its concurrency axis stretched so that it crosses log-uniformly in 1-200 (when it
    crosses at all) and its rates scaled (another model, other hardware)."""
    c0 = _crossover_of(spec, base)
    fx = _log_uniform(rng, 1.0, 200.0) / c0 if c0 is not None else _log_uniform(rng, 0.25, 4.0)
    fy = _log_uniform(rng, 0.3, 3.0)
    s = Curve.from_points([(x * fx, y * fy) for x, y in spec.points()], f"{name} speculative")
    b = Curve.from_points([(x * fx, y * fy) for x, y in base.points()], f"{name} baseline")
    return Drawn(name, s, b, _crossover_of(s, b), accept)


def _real_sweep(spec_name: str, base_name: str) -> Profile:
    folder = Path(__file__).resolve().parents[3] / "docs" / "real-engine"
    return profile_from_bench(str(folder / f"{spec_name}.json"), str(folder / f"{base_name}.json"), spec_name)


def draw_curves(rng: random.Random) -> Drawn:
    roll = rng.random()
    if roll < 0.55:
        return parametric(rng, "parametric")
    if roll < 0.65:
        return parametric(rng, "always")
    if roll < 0.75:
        return parametric(rng, "never")
    if roll < 0.9:
        name = rng.choice(SHAPES)
        p = load_profile(name)
        return _stretched(f"shape:{name}", p.speculative, p.baseline, rng, p.accept_length)
    spec_name, base_name = rng.choice(REAL_SWEEPS)
    try:
        p, family = _real_sweep(spec_name, base_name), f"real:{spec_name}"
    except FileNotFoundError:  # the sweeps travel with the repository, not the wheel: a shipped shape, named so
        p, family = load_profile(SHAPES[0]), f"shape:{SHAPES[0]}"
    return _stretched(family, p.speculative, p.baseline, rng, 2.5)


def _ar1(rng: random.Random, n: int, sigma: float, phi: float) -> list[float]:
    noise, out = 0.0, []
    for _ in range(n):
        noise = phi * noise + rng.gauss(0.0, sigma * math.sqrt(1 - phi * phi))
        out.append(noise)
    return out


def draw_levels(
    rng: random.Random, kind: str, peak: float, startup: float, hours: float = SUITE_HOURS, below: float | None = None
) -> list[float]:
    """The clients in flight, once a minute, over `hours` (`below`: the trough at most this)."""
    n = round(hours * 3600 / STEP)
    trough = peak * rng.uniform(0.02, 0.8)
    if below is not None:
        trough = min(trough, below)
    if kind == "adversarial":
        half = max(2, round((startup * rng.uniform(1.0, 3.0) + 60.0) / STEP))
        low, high = sorted((trough, peak))
        return [high if (i // half) % 2 == 0 else low for i in range(n)]
    period, phase, power = rng.uniform(1.5, 6.0) * 60, rng.uniform(0, 1), rng.uniform(0.5, 3.0)
    noise = _ar1(rng, n, rng.uniform(0.0, 0.15), rng.uniform(0.5, 0.97))
    levels = []
    for i in range(n):
        shape = (0.5 - 0.5 * math.cos(2 * math.pi * (i / period - phase))) ** power
        levels.append((trough + (peak - trough) * shape) * (1 + noise[i]))
    if kind == "weekend":
        drop = rng.uniform(0.3, 0.7)
        levels = [v * (1 - drop) if i >= n // 2 else v for i, v in enumerate(levels)]
    elif kind == "bursts":
        for _ in range(rng.randint(1, 4)):
            start, length, height = rng.randrange(n), rng.randint(2, 30), peak * rng.uniform(0.3, 1.5)
            for i in range(start, min(n, start + length)):
                levels[i] += height
    elif kind == "step":
        at, factor = rng.randrange(n // 6, n - n // 6), rng.uniform(0.2, 5.0)
        levels = [v * factor if i >= at else v for i, v in enumerate(levels)]
    return [max(0.0, v) for v in levels]


def open_loop(rng: random.Random, levels: Sequence[float], per_stream: Callable[[float], float]) -> Trace:
    """Arrivals whose rate keeps `levels` in flight (Little: rate = in flight / request time at that load):
    Poisson (Azure-shaped) or gamma inter-arrivals (BurstGPT-shaped, bursty), lognormal output lengths."""
    mean_out, sigma = rng.uniform(200.0, 1500.0), rng.uniform(0.6, 1.2)
    mu = math.log(mean_out) - sigma * sigma / 2
    bursty = rng.random() < 0.5
    shape = rng.uniform(0.2, 0.7) if bursty else 1.0
    arrivals: list[float] = []
    for i, level in enumerate(levels):
        seconds = mean_out / max(per_stream(level), 1e-6)
        rate = level / seconds if level > 0 else 0.0
        t = i * STEP
        while rate > 0:
            t += rng.gammavariate(shape, 1.0 / (rate * shape))
            if t >= (i + 1) * STEP:
                break
            arrivals.append(t)
    outputs = tuple(max(1, min(16384, round(rng.lognormvariate(mu, sigma)))) for _ in arrivals)
    name = "open-loop BurstGPT-shaped" if bursty else "open-loop Azure-shaped"
    return Trace(name=name, duration=len(levels) * STEP, arrivals=tuple(arrivals), outputs=outputs,
                 tokens_per_request=sum(outputs) / max(1, len(outputs)))  # fmt: skip


def draw_case(seed: int, index: int, straddle: bool = False) -> tuple[Case, Profile, dict[str, Any], Load]:
    """Case `index` of `seed`. `straddle`: where the curves cross, the day's peak 1.3-4x and its trough under 0.8x
    the crossover x replicas (a day on which switching can pay: the Restart-focused variant)."""
    rng = random.Random(seed * 1_000_003 + index)
    strategy = STRATEGIES[index % len(STRATEGIES)]
    drawn = draw_curves(rng)
    startup = _log_uniform(rng, 30.0, 900.0)
    replicas = (rng.randint(1, 4), rng.randint(1, 4)) if strategy == "TrafficSplit" else (rng.randint(1, 8), 0)
    budget = rng.choice((2, 6, 12, 24))
    modelled = drawn.crossover is not None and rng.random() < 0.25
    kind = rng.choice(DAY_KINDS)
    schedule: tuple[tuple[float, float], ...] = ()
    hours = SUITE_HOURS if strategy == "TrafficSplit" else RESTART_HOURS
    if kind == "drift":
        a, swing = drawn.accept_length, rng.uniform(0.2, 0.5) * rng.choice((-1, 1))
        schedule = ((0.0, a), (hours / 2, max(1.0, a * (1 + swing))), (hours, a), (24.0 - 1e-3, a))
    profile = Profile(
        name=f"suite-{seed}-{index}", model_name="suite", speculative=drawn.speculative, baseline=drawn.baseline,
        startup_seconds=startup, max_running_requests=max(64, round(drawn.speculative.xs[-1])),
        accept_length=drawn.accept_length, accept_schedule=schedule,
    )  # fmt: skip
    total = replicas[0] + replicas[1]
    reference = drawn.crossover if drawn.crossover is not None else drawn.baseline.xs[len(drawn.baseline.xs) // 2]
    peak = max(1.0, reference * total * _log_uniform(rng, 0.3, 4.0))
    below = None
    # Restart: most days with a crossover straddle it (on the general draws 19 of 20 Restart cases had nothing to
    # gain); TrafficSplit and Adaptive cases draw nothing more here, so they are the same cases as before
    straddle = straddle or (strategy == "Restart" and drawn.crossover is not None and rng.random() < STRADDLE_SHARE)
    if straddle and drawn.crossover is not None:
        peak = max(1.0, drawn.crossover * total * rng.uniform(1.3, 4.0))
        below = 0.8 * drawn.crossover * total
    levels = draw_levels(rng, kind, peak, startup, hours, below)
    if kind == "open-loop":

        def per_stream(level: float) -> float:
            x = max(level / total, 1e-3)
            return max(drawn.speculative.at(x), drawn.baseline.at(x)) / x

        trace = open_loop(rng, levels, per_stream)
        kind = trace.name
        load = bin_trace(trace, DT)
    else:
        values = tuple((i * STEP, round(v, 2)) for i, v in enumerate(levels))
        load = bin_trace(Trace(name=kind, duration=len(levels) * STEP, steps=values), DT)
    doc = copy.deepcopy(DEFAULT_SPEC)
    spec = doc["spec"]
    spec["strategy"] = strategy
    spec["pools"] = {"speculative": {"replicas": replicas[0]}}
    if strategy == "TrafficSplit":
        spec["pools"]["baseline"] = {"replicas": replicas[1]}
    initial = initial_mode(strategy, drawn, levels[0] / total)
    switching: dict[str, Any] = {"maxRestartsPerDay": budget, "initialMode": initial}
    if modelled:
        assert drawn.crossover is not None
        switching["crossoverConcurrency"] = round(drawn.crossover * rng.uniform(0.8, 1.25), 3)
    else:
        switching["curves"] = {
            "speculative": [{"concurrency": x, "tokensPerSecond": y} for x, y in drawn.speculative.points()],
            "baseline": [{"concurrency": x, "tokensPerSecond": y} for x, y in drawn.baseline.points()],
        }
    spec["switching"] = switching
    # the clients' TPOT goal: 1.5-5x one request's time per token on the baseline (a goal the hardware meets at
    # light load and misses at heavy load, whatever its speed)
    tpot = tpot_goal(rng, drawn, peak / total if straddle and drawn.crossover is not None else None)
    switching["tpotSloSeconds"] = round(tpot, 5)
    case = Case(
        index=index, tpot_slo=round(tpot, 5), strategy=strategy, family=drawn.family, day=kind,
        crossover=drawn.crossover, modelled=modelled, replicas=replicas, startup_seconds=round(startup, 1),
        budget=budget, seed_like=drawn.family == "never" or (drawn.crossover is None and _never(drawn)),
    )  # fmt: skip
    return case, profile, doc, load


def initial_mode(strategy: str, drawn: Drawn, first: float) -> str:
    """The mode a user would start in: the better one at the day's first load per replica (the static policies
    start in theirs for free; a policy started in the worse mode would pay a restart the best static does not).
    Adaptive: Speculative, the adaptive engine itself (Baseline would be a plain engine all day)."""
    if strategy == "Adaptive":
        return "Speculative"
    x = max(first, 1e-3)
    return "Speculative" if drawn.speculative.at(x) >= drawn.baseline.at(x) else "Baseline"


def tpot_goal(rng: random.Random, drawn: Drawn, straddled_peak: float | None) -> float:
    """The clients' TPOT goal (s/token): 1.5-5x one request's time per token on the baseline (met at light load,
    missed at heavy load, whatever the hardware's speed). A straddling day's (`straddled_peak`: its peak per
    replica) is met by both modes at the peak (1.1-1.5x the slower one's time per token there): the modes then
    differ in goodput as in tokens/s, and a switch has something to win. Within the field's range (1 ms - 60 s):
    the fastest drawn streams (rates x3 of a fast shape) would ask for less than a millisecond per token."""
    tpot = rng.uniform(1.5, 5.0) / max(drawn.baseline.at(1.0), 1e-6)
    if straddled_peak is not None:
        x = straddled_peak
        slowest = max(x / max(drawn.speculative.at(x), 1e-9), x / max(drawn.baseline.at(x), 1e-9))
        tpot = max(tpot, rng.uniform(1.1, 1.5) * slowest)
    return min(60.0, max(MIN_TPOT, tpot))


def _never(drawn: Drawn) -> bool:
    xs = sorted(set(drawn.speculative.xs) | set(drawn.baseline.xs))
    return all(drawn.speculative.at(x) <= drawn.baseline.at(x) for x in xs)


def score(case: Case, profile: Profile, doc: dict[str, Any], load: Load, ceilings: Sequence[float] = ()) -> Case:
    """Every policy the strategy calls for on the case's day (compare.compare), and what each captured.
    `ceilings`: Restart also scores the plan held to these shares of the cost (simulate.ceiling)."""
    started = time.monotonic()
    slo = Slo(ttft=DEFAULT_SLO_TTFT, tpot=case.tpot_slo)
    sc = scenario(parse_object(doc), profile, slo, dt=DT)
    result = compare(sc.setup, load, sc.knobs, sc.curves, configs=True, ceilings=ceilings)
    rows = {s.role: s for s in result.summaries}
    best = next(s for s in result.summaries if s.name == result.best_static)
    bound = result.bound
    reference = rows.get("plan", bound)
    assert reference is not None and bound is not None
    base = max(best.goodput_tokens, 1e-9)
    plan_gain = (reference.goodput_tokens - best.goodput_tokens) / base
    case.plan_gain = plan_gain
    hours = load.steps * load.dt / 3600.0
    naive = rows.get("naive")
    for role, s in rows.items():
        if role in ("speculative", "baseline", "fixed", "config"):
            continue
        captured = (s.goodput_tokens - best.goodput_tokens) / (reference.goodput_tokens - best.goodput_tokens) if (
            reference.goodput_tokens - best.goodput_tokens > 1e-9 * base) else None  # fmt: skip
        case.policies[role] = {
            "captured": captured,
            "vs_static": (s.goodput_tokens - best.goodput_tokens) / base,
            "vs_naive": (s.goodput_tokens - naive.goodput_tokens) / base if naive is not None else None,
            "gap_to_bound": (bound.goodput_tokens - s.goodput_tokens) / max(bound.goodput_tokens, 1e-9),
            "weight_changes_per_day": s.weight_changes * 24.0 / hours,
            "restarts_into_speculative": float(s.restarts_into_speculative),
            "switches": float(s.switches),
        }
    case.seconds = round(time.monotonic() - started, 2)
    return case


class Job(NamedTuple):
    """One case to run: `cost` scores it under another cost per weight change (TrafficSplit; None: the spec's
    default), `straddle` on a straddling day (draw_case), `ceilings` with the plan's held rows (Restart)."""

    seed: int
    case: int  # its index in the seed's draws
    cost: float | None = None
    straddle: bool = False
    ceilings: tuple[float, ...] = ()


def run_case(args: tuple[int, int] | Job) -> Case:
    """One case: (seed, index) or a Job."""
    job = Job(*args)
    case, profile, doc, load = draw_case(job.seed, job.case, job.straddle)
    if job.cost is not None:
        doc["spec"]["switching"]["weightChangeCost"] = job.cost
    try:
        return score(case, profile, doc, load, job.ceilings)
    except Exception as exc:  # one bad case must not lose a run of hundreds: it is reported apart
        case.error = f"{type(exc).__name__}: {exc}"
        return case


def run_suite(
    cases: int,
    seed: int,
    jobs: int = 1,
    first: int = 0,
    strategy: str | None = None,
    cost: float | None = None,
    straddle: bool = False,
    ceilings: tuple[float, ...] = (),
) -> list[Case]:
    """Cases first .. first + cases - 1 (with `strategy`, only those of that strategy among them)."""
    indices = range(first, first + cases)
    if strategy is not None:
        indices = range(first + (STRATEGIES.index(strategy) - first) % len(STRATEGIES), first + cases, len(STRATEGIES))
    work = [Job(seed, i, cost, straddle, ceilings) for i in indices]
    if jobs <= 1:
        return [run_case(w) for w in work]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(run_case, work, chunksize=1))


# ------------------------------------------------------------------------------------------------------ report

POLICY_ROLES = ("specserve", "learned", "reactive", "naive", "plan")


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True)
class Row:
    strategy: str
    role: str
    cases: int  # judged (the plan gains >= EASY)
    median: float
    p10: float
    worst: float
    below_naive: int  # judged cases where it serves less than the naive threshold (by more than 0.01 %)
    below_static: int  # all cases where it is below the best static by more than BELOW_STATIC of the tokens
    worst_vs_static: float  # its worst goodput against the best static's, share of tokens (all cases)
    gap_to_bound: float  # median, share of the bound's tokens (all cases)
    weight_changes_per_day: float  # median (TrafficSplit)
    easy: int  # cases reported apart
    easy_worst_vs_static: float
    seed_like_restarts_into_speculative: int


def table(cases: Sequence[Case]) -> list[Row]:
    rows = []
    for strategy in STRATEGIES:
        mine = [c for c in cases if c.strategy == strategy]
        held = sorted({r for c in mine for r in c.policies if r.startswith(HELD_PREFIX)})  # --ceiling's, after these
        roles = [r for r in (*POLICY_ROLES, *held) if any(r in c.policies for c in mine)]
        for role in roles:
            have = [c for c in mine if role in c.policies]
            judged = [c for c in have if (c.plan_gain or 0.0) >= EASY]
            easy = [c for c in have if (c.plan_gain or 0.0) < EASY]
            captured = [v for c in judged if (v := c.policies[role]["captured"]) is not None]
            naive = [c for c in judged if (v := c.policies[role]["vs_naive"]) is not None and v < -1e-4]
            static = [c.policies[role]["vs_static"] or 0.0 for c in have]
            rows.append(Row(
                strategy=strategy, role=role, cases=len(judged),
                median=_quantile(captured, 0.5), p10=_quantile(captured, 0.1),
                worst=min(captured) if captured else math.nan,
                below_naive=len(naive), below_static=sum(v < -BELOW_STATIC for v in static),
                worst_vs_static=min(static) if static else math.nan,
                gap_to_bound=_quantile([c.policies[role]["gap_to_bound"] or 0.0 for c in have], 0.5),
                weight_changes_per_day=_quantile(
                    [c.policies[role]["weight_changes_per_day"] or 0.0 for c in have], 0.5),
                easy=len(easy),
                easy_worst_vs_static=min((c.policies[role]["vs_static"] or 0.0 for c in easy), default=math.nan),
                seed_like_restarts_into_speculative=sum(
                    int(c.policies[role]["restarts_into_speculative"] or 0) for c in have if c.seed_like),
            ))  # fmt: skip
    return rows


def markdown(rows: Sequence[Row], cases: Sequence[Case], seed: int) -> str:
    pct = "{:.1f} %".format
    lines = [
        f"Seed {seed}: {len(cases)} cases ({SUITE_HOURS:g} h TrafficSplit days, {RESTART_HOURS:g} h Restart and "
        f"Adaptive days, {DT:g} s steps), {sum(c.seconds for c in cases) / max(1, len(cases)):.1f} s per case "
        "(wall, in one worker).",
        "",
        "| strategy | policy | judged | median | p10 | worst | < naive | < static -0.5 % | worst vs static | "
        "gap to bound | weight changes/day | apart (plan < 1 %) | apart: worst vs static | seed-like restarts "
        "into spec |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.strategy} | {r.role} | {r.cases} | {pct(r.median * 100)} | {pct(r.p10 * 100)} | "
            f"{pct(r.worst * 100)} | {r.below_naive} | {r.below_static} | {r.worst_vs_static * 100:+.2f} % | "
            f"{pct(r.gap_to_bound * 100)} | {r.weight_changes_per_day:.0f} | {r.easy} | "
            f"{r.easy_worst_vs_static * 100:+.2f} % | {r.seed_like_restarts_into_speculative} |"
        )
    return "\n".join(lines)


def load_cases(path: Path) -> list[Case]:
    """The cases a --json file kept (a run split in parts is reported whole with --merge)."""
    out = []
    for raw in json.loads(path.read_text()):
        raw["replicas"] = tuple(raw["replicas"])
        out.append(Case(**raw))
    return sorted(out, key=lambda c: c.index)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specserve-suite", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--first", type=int, default=0, help="index of the first case (to split a run)")
    parser.add_argument("--json", help="write every case's figures here")
    parser.add_argument("--strategy", choices=STRATEGIES, help="only the cases of this strategy")
    parser.add_argument("--weight-change-cost", type=float, help="TrafficSplit: score under this weightChangeCost")
    parser.add_argument("--straddle", action="store_true", help="days that cross the crossover (draw_case)")
    parser.add_argument(
        "--ceiling", action="store_true",
        help=f"Restart: also the plan with its restarts held to {', '.join(f'{s:g}' for s in SHARES)}x the cost "
        "(simulate.ceiling: an optimistic reference for a rule without foresight)",
    )  # fmt: skip
    parser.add_argument("--merge", nargs="+", metavar="JSON", help="report the cases of these --json files instead")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.merge:
        cases = [c for f in args.merge for c in load_cases(Path(f))]
    else:
        cases = run_suite(
            args.cases,
            args.seed,
            args.jobs,
            args.first,
            args.strategy,
            args.weight_change_cost,
            args.straddle,
            SHARES if args.ceiling else (),
        )
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(c) for c in cases], indent=1))
    print(markdown(table(cases), cases, args.seed))
    for c in cases:
        if c.error is not None:
            print(f"case {c.index} failed: {c.error}")
    print(f"\n{len(cases)} cases in {time.monotonic() - started:.0f} s with {args.jobs} worker(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

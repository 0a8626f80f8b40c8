"""The shipped synthetic traces, generated from a seed at run time (so nothing large is shipped and every run of
the same name and seed is the same trace).

They are shaped around a per-replica crossover of 64 (illustrative-crossover-8b's); use --rate-scale for others.
- diurnal: a closed-loop 24 h day, night ~10 clients, afternoon peak ~180, noise and three bursts.
- step: closed loop, 30 min at 16, 60 min at 160, 30 min at 16.
- oscillating: closed loop, 6 h swinging +-30% around 64 every 20 min, with noise.
- diurnal-requests: an open-loop 24 h day of 100k requests (Poisson arrivals, lognormal output lengths).
- week: a closed-loop week from Monday 00:00: weekdays like `diurnal` (each day its own noise and bursts, the
  peak varying +-10%), the weekend lower (peak ~90) and later (peak at 16:00), for forecasts that look a day
  and a week back.
- week-adversarial: a closed-loop week whose history lies: each day's busy hours are the previous day's quiet ones
  (the peak alternates between 15:30 and 03:30), so the same time yesterday shows the opposite of now: the
  forecast-ahead restart rule must earn no trust there and stay within its bound (policy.forecast)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from specserve_tools.simulate.traces import DEFAULT_TOKENS_PER_REQUEST, Trace

DAY = 86400.0
STEP = 60.0  # closed-loop traces change concurrency once a minute


def _closed(name: str, values: list[float], step: float = STEP) -> Trace:
    steps = tuple((i * step, max(0.0, round(v, 2))) for i, v in enumerate(values))
    return Trace(name=name, duration=len(values) * step, steps=steps, tokens_per_request=DEFAULT_TOKENS_PER_REQUEST)


def diurnal(seed: int = 1) -> Trace:
    rng = random.Random(seed)
    minutes = int(DAY / STEP)
    bursts = [(rng.uniform(9, 11), 25.0, 90.0), (rng.uniform(13, 15), 15.0, 120.0), (rng.uniform(20, 22), 30.0, 70.0)]
    noise = 0.0
    values: list[float] = []
    for i in range(minutes):
        hour = i * STEP / 3600.0
        level = 10.0 + 170.0 * (0.5 - 0.5 * math.cos(2 * math.pi * (hour - 3.5) / 24.0)) ** 2
        noise = 0.9 * noise + rng.gauss(0.0, 0.04)  # slow multiplicative wobble (AR(1))
        burst = sum(height for start, length, height in bursts if start <= hour < start + length / 60.0)
        values.append(level * (1.0 + noise) + burst)
    return _closed("diurnal", values)


def step(low: float = 16.0, high: float = 160.0) -> Trace:
    return _closed("step", [low] * 30 + [high] * 60 + [low] * 30)


def oscillating(seed: int = 1, centre: float = 64.0, swing: float = 0.3, period_min: float = 20.0) -> Trace:
    rng = random.Random(seed)
    values = [
        centre * (1.0 + swing * math.sin(2 * math.pi * i / period_min) + rng.gauss(0.0, 0.05)) for i in range(360)
    ]
    return _closed("oscillating", values)


def diurnal_requests(seed: int = 1, requests: int = 100_000, mean_output: float = 1500.0) -> Trace:
    """Arrival rate follows the same daily shape (thinning a Poisson process), lognormal outputs (sigma 0.8)."""
    rng = random.Random(seed)
    sigma = 0.8
    mu = math.log(mean_output) - sigma * sigma / 2

    def shape(t: float) -> float:
        return 0.15 + 0.85 * (0.5 - 0.5 * math.cos(2 * math.pi * (t / 3600.0 - 3.5) / 24.0)) ** 2

    mean_shape = sum(shape(h * 60.0) for h in range(1440)) / 1440
    peak = requests / DAY / mean_shape  # requests/s at shape 1
    arrivals: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(peak)
        if t >= DAY:
            break
        if rng.random() < shape(t):
            arrivals.append(t)
    outputs = tuple(max(1, min(16384, round(rng.lognormvariate(mu, sigma)))) for _ in arrivals)
    return Trace(name="diurnal-requests", duration=DAY, arrivals=tuple(arrivals), outputs=outputs,
                 tokens_per_request=sum(outputs) / max(1, len(outputs)))  # fmt: skip


WEEKEND = (5, 6)  # Saturday, Sunday (the week starts on a Monday)


def week(seed: int = 1) -> Trace:
    rng = random.Random(seed)
    per_day = int(DAY / STEP)
    values: list[float] = []
    noise = 0.0
    for day in range(7):
        weekend = day in WEEKEND
        peak, centre = (80.0, 16.0) if weekend else (170.0 * rng.uniform(0.9, 1.1), 15.5)
        bursts = [] if weekend else [(rng.uniform(9, 21), rng.uniform(15, 30), rng.uniform(60, 120))]
        for i in range(per_day):
            hour = i * STEP / 3600.0
            level = 10.0 + peak * (0.5 - 0.5 * math.cos(2 * math.pi * (hour - centre + 12.0) / 24.0)) ** 2
            noise = 0.9 * noise + rng.gauss(0.0, 0.04)
            burst = sum(height for start, length, height in bursts if start <= hour < start + length / 60.0)
            values.append(level * (1.0 + noise) + burst)
    return _closed("week", values)


def week_adversarial(seed: int = 1) -> Trace:
    rng = random.Random(seed)
    per_day = int(DAY / STEP)
    values: list[float] = []
    noise = 0.0
    for day in range(7):
        centre = 15.5 if day % 2 == 0 else 3.5  # yesterday's peak is today's trough
        peak = 170.0 * rng.uniform(0.9, 1.1)
        for i in range(per_day):
            hour = i * STEP / 3600.0
            level = 10.0 + peak * (0.5 - 0.5 * math.cos(2 * math.pi * (hour - centre + 12.0) / 24.0)) ** 2
            noise = 0.9 * noise + rng.gauss(0.0, 0.04)
            values.append(level * (1.0 + noise))
    return _closed("week-adversarial", values)


SHIPPED: dict[str, Callable[[int], Trace]] = {
    "diurnal": diurnal,
    "step": lambda _seed: step(),  # no randomness in it
    "oscillating": oscillating,
    "diurnal-requests": diurnal_requests,
    "week": week,
    "week-adversarial": week_adversarial,
}


def shipped_trace(name: str, seed: int = 1) -> Trace:
    return SHIPPED[name](seed)

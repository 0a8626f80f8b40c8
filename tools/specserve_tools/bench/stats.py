"""Per-level statistics from per-request timings. Pure: no clocks, no I/O.

Throughput is measured over a steady-state window, not per request: the window opens when the warm-up's last
request completes and closes when the N-th measured request completes, and every streamed chunk whose arrival
falls inside it counts. Requests still in flight at either edge contribute only the tokens that arrived inside
the window, so a closed loop of C clients is measured with C requests in flight throughout."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

FALLBACK_CHARS_PER_TOKEN = 4.0  # only when a server reports no usage at all


@dataclass
class RequestRecord:
    start: float  # wall seconds (monotonic)
    first_token: float | None = None
    end: float | None = None
    completion_tokens: int | None = None  # from the usage block
    chunks: list[tuple[float, int]] = field(default_factory=list)  # (arrival, characters of generated text)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.end is not None

    @property
    def chars(self) -> int:
        return sum(c for _, c in self.chunks)


@dataclass(frozen=True)
class LevelStats:
    concurrency: int
    requests: int  # measured requests completed inside the window
    errors: int
    output_tokens_per_s: float
    requests_per_s: float
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    tpot_p50_s: float | None
    tpot_p99_s: float | None
    window_s: float
    accept_length: float | None = None
    # The level's repeats: consecutive measurement windows of the same closed loop, each `requests` completions
    # long (batch means). output_tokens_per_s is their mean; ci_low/ci_high its 95% confidence interval (Student's
    # t over the windows; None with one window: the noise of that level is unknown).
    samples: tuple[float, ...] = ()
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def repeats(self) -> int:
        return max(1, len(self.samples))

    @property
    def ci_half_width(self) -> float | None:
        return None if self.ci_low is None or self.ci_high is None else (self.ci_high - self.ci_low) / 2


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between closest ranks (numpy's default); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def tokens_per_char(records: Sequence[RequestRecord]) -> float:
    """Tokens per generated character, from completed requests' usage (used to count chunks in the window)."""
    tokens = sum(r.completion_tokens or 0 for r in records if r.ok and r.completion_tokens)
    chars = sum(r.chars for r in records if r.ok and r.completion_tokens)
    return tokens / chars if chars else 1 / FALLBACK_CHARS_PER_TOKEN


def window_tokens(records: Sequence[RequestRecord], t0: float, t1: float) -> float:
    """Output tokens that arrived in (t0, t1]. A request's own usage/characters ratio is used when it finished,
    the level-wide ratio otherwise (requests cut off at the window's end)."""
    default_ratio = tokens_per_char(records)
    total = 0.0
    for r in records:
        chars = r.chars
        ratio = r.completion_tokens / chars if r.ok and r.completion_tokens and chars else default_ratio
        total += ratio * sum(c for t, c in r.chunks if t0 < t <= t1)
    return total


def tpot(record: RequestRecord) -> float | None:
    """SGLang's definition: (finish - first token) / (completion tokens - 1)."""
    if record.first_token is None or record.end is None or not record.completion_tokens:
        return None
    if record.completion_tokens < 2:
        return None
    return (record.end - record.first_token) / (record.completion_tokens - 1)


CONFIDENCE = 0.95


def mean_ci(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float] | None:
    """(mean, low, high): the two-sided Student's t confidence interval of the mean; None for fewer than 2."""
    if len(samples) < 2:
        return None
    from scipy.stats import t as student_t  # noqa: PLC0415 (bench extra; only repeated levels need it)

    n = len(samples)
    mean = math.fsum(samples) / n
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in samples) / (n - 1))
    half = float(student_t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def relative_half_width(samples: Sequence[float]) -> float | None:
    """The CI's half-width as a fraction of the mean (what --ci-target bounds); None below 2 samples."""
    ci = mean_ci(samples)
    if ci is None:
        return None
    mean, low, high = ci
    return math.inf if mean <= 0 else (high - low) / 2 / mean


def window_rates(records: Sequence[RequestRecord], bounds: Sequence[float], time_scale: float = 1.0) -> list[float]:
    """Output tok/s in each window (bounds[i], bounds[i + 1]] (server time)."""
    return [window_tokens(records, t0, t1) / max(t1 - t0, 1e-9) / time_scale for t0, t1 in itertools.pairwise(bounds)]


def summarize(
    concurrency: int,
    records: Sequence[RequestRecord],
    t0: float,
    t1: float,
    errors: int,
    time_scale: float = 1.0,
    bounds: Sequence[float] = (),
) -> LevelStats:
    """Statistics of one level, reported in the server's time: against an emulator whose clock runs
    `time_scale` (K) times faster, tokens/s and requests/s are divided by K and latencies multiplied by K.
    `bounds` (t0 < ... < t1) split the window into repeats: tok/s is then their mean, with a CI."""
    window = max(t1 - t0, 1e-9)
    measured = [r for r in records if r.ok and r.end is not None and t0 < r.end <= t1]
    ttfts = [(r.first_token - r.start) * time_scale for r in measured if r.first_token is not None]
    tpots = [v * time_scale for r in measured if (v := tpot(r)) is not None]
    samples = window_rates(records, bounds, time_scale) if len(bounds) >= 2 else []
    ci = mean_ci(samples)
    tok_s = ci[0] if ci else window_tokens(records, t0, t1) / window / time_scale
    return LevelStats(
        concurrency=concurrency,
        requests=len(measured),
        errors=errors,
        output_tokens_per_s=tok_s,
        requests_per_s=len(measured) / window / time_scale,
        ttft_p50_s=percentile(ttfts, 50),
        ttft_p99_s=percentile(ttfts, 99),
        tpot_p50_s=percentile(tpots, 50),
        tpot_p99_s=percentile(tpots, 99),
        window_s=window * time_scale,
        samples=tuple(samples),
        ci_low=ci[1] if ci else None,
        ci_high=ci[2] if ci else None,
    )

"""Per-level statistics from per-request timings. Pure: no clocks, no I/O.

Throughput is measured over a steady-state window, not per request: the window opens when the warm-up's last
request completes and closes when the N-th measured request completes, and every streamed chunk whose arrival
falls inside it counts. Requests still in flight at either edge contribute only the tokens that arrived inside
the window, so a closed loop of C clients is measured with C requests in flight throughout."""

from __future__ import annotations

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


def summarize(
    concurrency: int,
    records: Sequence[RequestRecord],
    t0: float,
    t1: float,
    errors: int,
    time_scale: float = 1.0,
) -> LevelStats:
    """Statistics of one level, reported in the server's time: against an emulator whose clock runs
    `time_scale` (K) times faster, tokens/s and requests/s are divided by K and latencies multiplied by K."""
    window = max(t1 - t0, 1e-9)
    measured = [r for r in records if r.ok and r.end is not None and t0 < r.end <= t1]
    ttfts = [(r.first_token - r.start) * time_scale for r in measured if r.first_token is not None]
    tpots = [v * time_scale for r in measured if (v := tpot(r)) is not None]
    return LevelStats(
        concurrency=concurrency,
        requests=len(measured),
        errors=errors,
        output_tokens_per_s=window_tokens(records, t0, t1) / window / time_scale,
        requests_per_s=len(measured) / window / time_scale,
        ttft_p50_s=percentile(ttfts, 50),
        ttft_p99_s=percentile(ttfts, 99),
        tpot_p50_s=percentile(tpots, 50),
        tpot_p99_s=percentile(tpots, 99),
        window_s=window * time_scale,
    )

"""A weighted latency histogram with log-spaced buckets (1% wide): O(1) to add to, bounded in size, exact mean;
quantiles to within the bucket width. The simulation adds a point per cohort per step (hundreds of thousands a day)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

RATIO = 1.01
_LOG = math.log(RATIO)
ZERO = -(10**9)  # the bucket of values <= 0


@dataclass
class Histogram:
    buckets: dict[int, float] = field(default_factory=dict)  # bucket index -> weight
    total: float = 0.0
    weighted_sum: float = 0.0

    def add(self, value: float, weight: float) -> None:
        if weight <= 0:
            return
        key = math.floor(math.log(value) / _LOG) if value > 0 else ZERO
        self.buckets[key] = self.buckets.get(key, 0.0) + weight
        self.total += weight
        self.weighted_sum += value * weight

    def merge(self, other: Histogram) -> Histogram:
        out = Histogram(dict(self.buckets), self.total + other.total, self.weighted_sum + other.weighted_sum)
        for key, weight in other.buckets.items():
            out.buckets[key] = out.buckets.get(key, 0.0) + weight
        return out

    def mean(self) -> float | None:
        return self.weighted_sum / self.total if self.total > 0 else None

    def quantiles(self, qs: Sequence[float]) -> list[float | None]:
        """The q-quantiles (ascending qs in 0..1): the geometric middle of the bucket the quantile falls in."""
        if self.total <= 0:
            return [None for _ in qs]
        keys = sorted(self.buckets)
        out: list[float | None] = []
        seen, i = 0.0, 0
        for q in qs:
            target = q * self.total
            while i < len(keys) - 1 and seen + self.buckets[keys[i]] < target:
                seen += self.buckets[keys[i]]
                i += 1
            key = keys[i]
            out.append(0.0 if key == ZERO else RATIO ** (key + 0.5))
        return out

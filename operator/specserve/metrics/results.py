"""What one query returned (pure data), whichever source ran it."""

from __future__ import annotations

from dataclasses import dataclass, field

from specserve.metrics.promql import PoolKey, Query


@dataclass(frozen=True)
class QueryResult:
    query: Query
    values: dict[PoolKey, float] = field(default_factory=dict)  # NaN kept as NaN: the reader treats it as unknown
    time: float | None = None  # when the server evaluated it (freshness is measured against this, not our clock)
    error: str | None = None  # worded for users; the values are empty then
    refused: bool = False  # the server answered and rejected the query (bad PromQL), as opposed to unreachable

"""Times as Kubernetes writes them: RFC 3339 in UTC with a `Z`, and back to epoch seconds (pure; the one home of
the format). `digits` is the fraction kept: 0 for metav1.Time (conditions, events), 3 for the switching status
(milliseconds, so a round trip through status is exact at that resolution; whole seconds written without a
fraction), 6 for metav1.MicroTime (a Lease's renewTime)."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime


def rfc3339(t: float | None = None, digits: int = 0) -> str:
    """t (epoch seconds; None: now) as RFC 3339, truncated to whole seconds or rounded to `digits` (3 or 6)."""
    if t is None:
        t = time.time()
    if digits == 0:
        return datetime.fromtimestamp(math.floor(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if digits == 6:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if digits != 3:
        raise ValueError(f"digits must be 0, 3 or 6, not {digits}")
    stamp = datetime.fromtimestamp(round(t, 3), UTC)
    if stamp.microsecond == 0:
        return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


def epoch(text: str) -> float:
    """An RFC 3339 time (any fraction, `Z` or an offset) as epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()

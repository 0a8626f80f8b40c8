"""The one RFC 3339 helper: the precision each Kubernetes field takes, and the round trip."""

from __future__ import annotations

import pytest

from specserve.clock import epoch, rfc3339

T = 1764820800.123456  # 2025-12-04T04:00:00.123456Z


def test_each_precision_as_kubernetes_writes_it() -> None:
    assert rfc3339(T) == "2025-12-04T04:00:00Z"  # metav1.Time: truncated, never a second ahead
    assert rfc3339(T + 0.9) == "2025-12-04T04:00:01Z"
    assert rfc3339(T, digits=3) == "2025-12-04T04:00:00.123Z"
    assert rfc3339(1764820800.0, digits=3) == "2025-12-04T04:00:00Z"  # whole seconds without a fraction
    assert rfc3339(T, digits=6) == "2025-12-04T04:00:00.123456Z"  # metav1.MicroTime


def test_a_status_time_round_trips_at_the_millisecond() -> None:
    for t in (T, 1764820800.0, 1764820800.9995):
        assert epoch(rfc3339(t, digits=3)) == pytest.approx(round(t, 3), abs=1e-6)
    assert epoch("2025-12-04T05:00:00+01:00") == epoch("2025-12-04T04:00:00Z")


def test_now_and_a_bad_precision() -> None:
    assert rfc3339().endswith("Z") and len(rfc3339()) == len("2025-12-04T04:00:00Z")
    with pytest.raises(ValueError, match="digits must be 0, 3 or 6"):
        rfc3339(T, digits=2)

"""The engine's start-up time as its pods show it: what a Restart switch is priced with."""

from __future__ import annotations

from typing import Any

from specserve.metrics.startup import measured_startup_seconds, pod_startup_seconds

JSON = dict[str, Any]


def pod(
    started: str | None, ready_at: str, ready: str = "True", instance: str = "m", container: str = "sglang"
) -> JSON:
    running = {"startedAt": started} if started else {}
    return {
        "metadata": {"name": "p", "labels": {"specserve.io/instance": instance}},
        "status": {
            "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": ready_at}],
            "containerStatuses": [{"name": container, "state": {"running": running}}],
        },
    }


def test_from_the_container_start_to_ready() -> None:
    assert pod_startup_seconds(pod("2026-12-01T10:00:00Z", "2026-12-01T10:08:30Z")) == 510.0


def test_unknown_while_not_ready_or_without_times() -> None:
    assert pod_startup_seconds(pod("2026-12-01T10:00:00Z", "2026-12-01T10:08:30Z", ready="False")) is None
    assert pod_startup_seconds(pod(None, "2026-12-01T10:08:30Z")) is None
    assert pod_startup_seconds(pod("2026-12-01T10:00:00Z", "2026-12-01T10:08:30Z", container="sidecar")) is None
    # Ready since before the container's last start (a restart that kept the condition): not a measurement.
    assert pod_startup_seconds(pod("2026-12-01T10:10:00Z", "2026-12-01T10:08:30Z")) is None


def test_the_slowest_pod_of_this_specserve_counts() -> None:
    pods = [
        pod("2026-12-01T10:00:00Z", "2026-12-01T10:05:00Z"),
        pod("2026-12-01T10:00:00Z", "2026-12-01T10:09:00Z"),
        pod("2026-12-01T10:00:00Z", "2026-12-01T11:00:00Z", instance="other"),
    ]
    assert measured_startup_seconds(pods, "m") == 540.0
    assert measured_startup_seconds(pods, "absent") is None

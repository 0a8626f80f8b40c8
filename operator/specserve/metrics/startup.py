"""How long the engine takes to start on this deployment, measured from its own pods (pure).

A Restart switch costs the serving time lost while pods reload; the policy prices it with this figure when the
pods have shown it (else with a documented spec default, see policy.knobs). Per pod: from the SGLang container's
last start (`state.running.startedAt`) to the pod's Ready transition. The slowest pod counts, so the cost is
never underestimated: a restart that takes longer than priced would lose more than the regret it recovers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from specserve.layout import LABEL_INSTANCE

ENGINE_CONTAINER = "sglang"
JSON = dict[str, Any]


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def pod_startup_seconds(pod: JSON) -> float | None:
    """Container start to Ready of one pod; None while it is not Ready or the times are missing."""
    status = pod.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        return None
    engine = next((c for c in status.get("containerStatuses") or [] if c.get("name") == ENGINE_CONTAINER), None)
    started = _time((((engine or {}).get("state") or {}).get("running") or {}).get("startedAt"))
    became_ready = _time(ready.get("lastTransitionTime"))
    if started is None or became_ready is None or became_ready <= started:
        return None  # Ready before this start: the condition predates a container restart
    return (became_ready - started).total_seconds()


def measured_startup_seconds(pods: list[JSON], instance: str) -> float | None:
    """The slowest measured start-up among the SpecServe `instance`'s pods; None when none has shown one."""
    measured = [
        seconds
        for pod in pods
        if ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_INSTANCE) == instance
        and (seconds := pod_startup_seconds(pod)) is not None
    ]
    return max(measured) if measured else None

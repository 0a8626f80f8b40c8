"""Does a live object already hold everything we would apply? (pure)

Level-based reconcile applies only when this says no, so a steady state makes no API writes. Fields the
API server or other controllers add (defaults, status, managedFields) are ignored: only what we set counts.
"""

from __future__ import annotations

from typing import Any


def contains(live: Any, desired: Any) -> bool:
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(k in live and contains(live[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return False
        return all(contains(a, b) for a, b in zip(live, desired, strict=True))
    if isinstance(desired, bool) or isinstance(live, bool):
        return live is desired
    if isinstance(desired, int | float) and isinstance(live, int | float):
        return float(live) == float(desired)
    return bool(live == desired)

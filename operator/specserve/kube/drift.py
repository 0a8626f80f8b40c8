"""Does a live object already hold everything we would apply? (pure)

Level-based reconcile applies only when this says no, so a steady state makes no API writes. Fields the
API server or other controllers add (defaults, status, managedFields) are ignored: only what we set counts.
"""

from __future__ import annotations

from typing import Any

from kubernetes.utils.quantity import parse_quantity


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
    if isinstance(desired, str) and isinstance(live, str) and live != desired:
        return _same_quantity(live, desired)
    return bool(live == desired)


def _same_quantity(a: str, b: str) -> bool:
    """The API server canonicalizes quantities ("0.5" becomes "500m"): equal amounts are no drift."""
    if not (a[:1].isdigit() or a[:1] in "+-.") or not (b[:1].isdigit() or b[:1] in "+-."):
        return False
    try:
        return bool(parse_quantity(a) == parse_quantity(b))  # type: ignore[no-untyped-call]
    except ValueError:
        return False

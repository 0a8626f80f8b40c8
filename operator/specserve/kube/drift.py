"""Has our intent for an object changed, or has someone changed our fields on the live object? (pure)

Two checks, because each alone is wrong against a real API server:

- the applied hash: every object we apply carries `specserve.io/applied-hash`, a hash of the whole intent.
  A different hash means the intent changed, so the full intent is sent again and server-side apply removes
  what the `specserve` field manager stopped applying (a removed nodeSelector entry, limit, toleration...).
  A subset check alone never sees a removal.
- foreign drift: the live object must still hold every field we set. The server drops `omitempty` zero
  values (false, "", 0, [], {}), adds defaults and canonicalises quantities, so those are no drift.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from kubernetes.utils.quantity import parse_quantity

APPLIED_HASH = "specserve.io/applied-hash"


def intent_hash(manifest: Mapping[str, Any]) -> str:
    """Hash of what we apply, without the hash annotation itself (it cannot contain its own hash)."""
    meta = dict(manifest.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != APPLIED_HASH}
    meta["annotations"] = annotations
    payload = {**manifest, "metadata": meta}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:20]


def with_applied_hash(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest to send: the same intent, annotated with its hash."""
    meta = dict(manifest["metadata"])
    meta["annotations"] = {**(meta.get("annotations") or {}), APPLIED_HASH: intent_hash(manifest)}
    return {**manifest, "metadata": meta}


def applied_hash(live: Mapping[str, Any] | None) -> str | None:
    if live is None:
        return None
    value = ((live.get("metadata") or {}).get("annotations") or {}).get(APPLIED_HASH)
    return str(value) if value is not None else None


def needs_apply(live: Mapping[str, Any] | None, manifest: Mapping[str, Any]) -> bool:
    """True when the object is missing, our intent changed since it was applied, or our fields drifted."""
    if live is None:
        return True
    if applied_hash(live) != intent_hash(manifest):
        return True
    # Items of a LIST carry no apiVersion/kind on a real server: the identity is not a field to compare.
    fields = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    return not contains(live, fields)


def _absent_equivalent(value: Any) -> bool:
    """Values a real API server does not store (Go `omitempty`): sending them or not is the same intent."""
    if value is None or value is False or value == "":
        return True
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == 0
    if isinstance(value, dict):
        return all(_absent_equivalent(v) for v in value.values())
    return isinstance(value, list) and not value


# Pod-spec lists the server merges by key (x-kubernetes-list-type: map): an item another writer added (a
# webhook's sidecar, injected env or volume) stays whatever we apply, so it is no drift of ours; re-applying
# for it wrote on every pass. Atomic lists (args, tolerations, an HTTPRoute's backendRefs) still compare whole.
LIST_MAP_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
}


def _contains_by_key(live: Any, desired: list[Any], key: str) -> bool:
    if live is None:
        return not desired
    if not isinstance(live, list) or not all(isinstance(d, dict) and key in d for d in desired):
        return False
    by_key = {item.get(key): item for item in live if isinstance(item, dict)}
    return all(d[key] in by_key and contains(by_key[d[key]], d) for d in desired)


def contains(live: Any, desired: Any) -> bool:
    """Does `live` hold every field of `desired`, modulo what the server normalises?"""
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return live is None and _absent_equivalent(desired)
        return all(_contains_field(live, k, v) if k in live else _absent_equivalent(v) for k, v in desired.items())
    if isinstance(desired, list):
        if live is None:
            return not desired
        if not isinstance(live, list) or len(live) != len(desired):
            return False
        return all(contains(a, b) for a, b in zip(live, desired, strict=True))
    if isinstance(desired, bool) or isinstance(live, bool):
        return live is desired or (live is None and desired is False)
    if isinstance(desired, int | float) and isinstance(live, int | float):
        return float(live) == float(desired)
    if isinstance(desired, str) and isinstance(live, str) and live != desired:
        return _same_quantity(live, desired)
    if live is None:
        return _absent_equivalent(desired)
    return bool(live == desired)


def _contains_field(live: dict[str, Any], key: str, desired: Any) -> bool:
    if key in LIST_MAP_KEYS and isinstance(desired, list) and desired and isinstance(live[key], list):
        return _contains_by_key(live[key], desired, LIST_MAP_KEYS[key])
    return contains(live[key], desired)


def _same_quantity(a: str, b: str) -> bool:
    """The API server canonicalizes quantities ("0.5" becomes "500m"): equal amounts are no drift."""
    if not (a[:1].isdigit() or a[:1] in "+-.") or not (b[:1].isdigit() or b[:1] in "+-."):
        return False
    try:
        return bool(parse_quantity(a) == parse_quantity(b))  # type: ignore[no-untyped-call]
    except ValueError:
        return False

"""The patch formats of PATCH: JSON merge patch (RFC 7386), strategic merge patch, JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
from typing import Any

from specserve_kubefake.errors import ApiError

# Lists of built-in kinds that strategic merge patch and server-side apply treat as maps keyed by these fields;
# every other list is atomic (replaced whole).
# (The x-kubernetes-list-map-keys of the OpenAPI schemas; ``ports`` is keyed by containerPort+protocol in
# containers and by port+protocol in Services.)
Key = tuple[str, ...]
LIST_MAP_KEYS: dict[str, tuple[Key, ...]] = {
    "containers": (("name",),),
    "initContainers": (("name",),),
    "ephemeralContainers": (("name",),),
    "env": (("name",),),
    "volumes": (("name",),),
    "volumeMounts": (("mountPath",),),
    "imagePullSecrets": (("name",),),
    "ownerReferences": (("uid",),),
    "conditions": (("type",),),
    "ports": (("containerPort", "protocol"), ("port", "protocol")),
}
# Key fields with a schema default count with it when absent (SSA keys on the defaulted value).
_KEY_DEFAULTS = {"protocol": "TCP"}


def list_key(field: str, items: list[Any]) -> Key | None:
    """The merge key of a list field of a built-in kind, or None when the list is atomic."""
    for key in LIST_MAP_KEYS.get(field, ()):
        if all(isinstance(i, dict) and key[0] in i for i in items):
            return key
    return None


def key_of(item: dict[str, Any], key: Key) -> tuple[Any, ...]:
    """The values of an item's key fields (defaults filled in)."""
    return tuple(item.get(k, _KEY_DEFAULTS.get(k)) for k in key)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, everything else (lists included) replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Merge patch, but the keyed lists of built-in kinds merge item by item (``$patch: delete`` removes one)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            merge_key = list_key(key, value) if value else None
            live_key = list_key(key, out[key])
            if merge_key and live_key == merge_key:
                out[key] = _merge_keyed(out[key], value, merge_key)
            else:
                out[key] = copy.deepcopy(value)
        else:
            out[key] = strategic_merge_patch(out.get(key), value)
    return out


def _merge_keyed(live: list[Any], patch: list[Any], key: Key) -> list[Any]:
    result = list(live)
    index = {key_of(item, key): i for i, item in enumerate(result)}
    removed: set[Any] = set()
    for item in patch:
        item_key = key_of(item, key)
        if item.get("$patch") == "delete":
            removed.add(item_key)
            continue
        if item_key in index:
            result[index[item_key]] = strategic_merge_patch(result[index[item_key]], item)
        else:
            index[item_key] = len(result)
            result.append(copy.deepcopy(item))
    return [item for item in result if key_of(item, key) not in removed]


# ------------------------------------------------------------------------------------------ RFC 6902


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], path: str) -> Any:
    node = doc
    for part in parts[:-1]:
        node = _child(node, part, path)
    return node


def _child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, dict) and part in node:
        return node[part]
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our request: {path} not found")


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        node = _child(node, part, path)
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = _parent(doc, parts, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise ApiError(422, "Invalid", f"index out of range in {path}")
    else:
        raise ApiError(422, "Invalid", f"cannot add at {path}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise ApiError(422, "Invalid", "cannot remove the whole document")
    parent = _parent(doc, parts, path)
    _child(parent, parts[-1], path)  # must exist
    if isinstance(parent, dict):
        del parent[parts[-1]]
    else:
        del parent[int(parts[-1])]
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    """Apply RFC 6902 operations (add, remove, replace, move, copy, test) to a copy of ``doc``."""
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in operations:
        kind, path = op.get("op"), op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)
            doc = _add(_remove(doc, path), path, copy.deepcopy(op["value"])) if _pointer(path) else op["value"]
        elif kind in ("move", "copy"):
            value = copy.deepcopy(_get(doc, op["from"]))
            if kind == "move":
                doc = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise ApiError(422, "Invalid", f"the server rejected our request: test operation failed at {path}")
        else:
            raise ApiError(400, "BadRequest", f"unknown JSON patch operation {kind!r}")
    return doc

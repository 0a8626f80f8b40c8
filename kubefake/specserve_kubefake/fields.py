"""Field ownership: metadata.managedFields (fieldsV1) and server-side apply on top of it.

A field path is a tuple of fieldsV1 elements: ``f:name`` for a map key and ``k:{"name":"x"}`` for an item of a
keyed list (the item itself is owned when its path is in the set; fieldsV1 writes that as ``".": {}``). Lists
that are not keyed are atomic: the whole list is one field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specserve_kubefake.errors import ApiError
from specserve_kubefake.patching import Key, key_of, list_key

JSON = dict[str, Any]
Path = tuple[str, ...]
_ITEM = object()  # the value recorded for a keyed list item itself

# metadata the server owns: never part of a manager's fields.
_SERVER_METADATA = frozenset(
    {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
     "deletionGracePeriodSeconds", "managedFields", "selfLink", "generateName"}
)  # fmt: skip


def _item_element(key: Key, item: JSON) -> str:
    return "k:" + json.dumps(dict(zip(key, key_of(item, key), strict=True)), separators=(",", ":"), sort_keys=True)


def _walk(node: JSON, prefix: Path, keyed: bool, out: dict[Path, Any]) -> None:
    for name, value in node.items():
        path = (*prefix, f"f:{name}")
        if isinstance(value, dict) and value:
            _walk(value, path, keyed, out)
        elif isinstance(value, list) and value and keyed and (key := list_key(name, value)):
            for item in value:
                item_path = (*path, _item_element(key, item))
                out[item_path] = _ITEM
                _walk(item, item_path, keyed, out)
        else:
            out[path] = value


def flatten(obj: JSON, *, keyed: bool, status: bool | None) -> dict[Path, Any]:
    """Every owned-able field of ``obj`` with its value. ``status``: True only .status, False all but .status,
    None everything (kinds without the status subresource)."""
    out: dict[Path, Any] = {}
    for top, value in obj.items():
        if top in ("apiVersion", "kind"):
            continue
        if status is True and top != "status":
            continue
        if status is False and top == "status":
            continue
        if top == "metadata" and isinstance(value, dict):
            meta = {k: v for k, v in value.items() if k not in _SERVER_METADATA}
            _walk(meta, ("f:metadata",), keyed, out)
        elif isinstance(value, dict):
            _walk({top: value}, (), keyed, out) if value else out.__setitem__((f"f:{top}",), value)
        else:
            out[(f"f:{top}",)] = value
    return out


def to_fields_v1(paths: Iterable[Path]) -> JSON:
    root: JSON = {}
    for path in sorted(paths):
        node = root
        for element in path:
            node = node.setdefault(element, {})
        if path[-1].startswith("k:"):
            node["."] = {}
    return root


def from_fields_v1(tree: JSON, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for element, child in tree.items():
        if element == ".":
            out.add(prefix)
            continue
        path = (*prefix, element)
        if child:
            out |= from_fields_v1(child, path)
        else:
            out.add(path)
    return out


@dataclass
class Entry:
    manager: str
    operation: str  # Apply or Update
    api_version: str
    subresource: str
    time: str
    paths: set[Path] = field(default_factory=set)

    def same_owner(self, manager: str, operation: str, subresource: str) -> bool:
        return (self.manager, self.operation, self.subresource) == (manager, operation, subresource)


def read_entries(obj: JSON | None) -> list[Entry]:
    out = []
    for raw in ((obj or {}).get("metadata") or {}).get("managedFields") or []:
        out.append(
            Entry(
                manager=raw.get("manager", ""),
                operation=raw.get("operation", "Update"),
                api_version=raw.get("apiVersion", ""),
                subresource=raw.get("subresource", ""),
                time=raw.get("time", ""),
                paths=from_fields_v1(raw.get("fieldsV1") or {}),
            )
        )
    return out


def write_entries(obj: JSON, entries: list[Entry], previous: list[JSON]) -> None:
    """Store the entries in metadata.managedFields; an unchanged entry keeps its old time (no-op stays no-op)."""
    old_times = {(e.get("manager"), e.get("operation"), e.get("subresource", "")): e for e in previous}
    out = []
    for entry in entries:
        if not entry.paths:
            continue
        raw: JSON = {
            "manager": entry.manager,
            "operation": entry.operation,
            "apiVersion": entry.api_version,
            "time": entry.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(entry.paths),
        }
        if entry.subresource:
            raw["subresource"] = entry.subresource
        old = old_times.get((entry.manager, entry.operation, entry.subresource))
        if old is not None and old.get("fieldsV1") == raw["fieldsV1"] and old.get("apiVersion") == raw["apiVersion"]:
            raw["time"] = old.get("time", entry.time)
        out.append(raw)
    if out:
        obj.setdefault("metadata", {})["managedFields"] = out
    else:
        obj.get("metadata", {}).pop("managedFields", None)


def _others_prefixes(entries: list[Entry], me: Entry | None) -> set[Path]:
    out: set[Path] = set()
    for entry in entries:
        if entry is me:
            continue
        for path in entry.paths:
            for i in range(1, len(path) + 1):
                out.add(path[:i])
    return out


def _find_item(items: list[Any], element: str) -> int | None:
    wanted = json.loads(element[2:])
    key = tuple(wanted)
    for i, item in enumerate(items):
        if isinstance(item, dict) and key_of(item, key) == tuple(wanted.values()):
            return i
    return None


def remove_path(obj: JSON, path: Path) -> None:
    """Delete one field (or keyed item) from ``obj``; absent paths are ignored. Maps left empty go too."""
    parents: list[tuple[Any, Any]] = []
    node: Any = obj
    for element in path[:-1]:
        if element.startswith("f:") and isinstance(node, dict) and element[2:] in node:
            parents.append((node, element[2:]))
            node = node[element[2:]]
        elif element.startswith("k:") and isinstance(node, list) and (i := _find_item(node, element)) is not None:
            parents.append((node, i))
            node = node[i]
        else:
            return
    last = path[-1]
    if last.startswith("f:") and isinstance(node, dict):
        node.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(node, list) and (i := _find_item(node, last)) is not None:
        del node[i]
    for container, key in reversed(parents):
        child = container[key]
        if isinstance(child, dict) and not child and isinstance(key, str) and key not in ("metadata", "spec"):
            del container[key]
        else:
            break


def apply_merge(live: Any, applied: Any, keyed: bool) -> Any:
    """The applied configuration laid over the live object: maps merge, keyed lists merge by key, the rest
    (atomic lists, scalars) replace."""
    if not isinstance(applied, dict) or not isinstance(live, dict):
        return copy.deepcopy(applied)
    out = dict(live)
    for name, value in applied.items():
        if value is None:
            out.pop(name, None)
            continue
        current = out.get(name)
        key = list_key(name, value) if keyed and isinstance(value, list) and isinstance(current, list) else None
        if key and isinstance(current, list) and list_key(name, current) == key:
            # As structured-merge-diff merges a list map: the live items in their order (merged with the applied
            # one of the same key), then the applied items that are new, in the applied order.
            applied_items = {key_of(item, key): item for item in value}
            live_keys = {key_of(item, key) for item in current}
            merged = [
                apply_merge(item, applied_items[k], keyed) if (k := key_of(item, key)) in applied_items else item
                for item in current
            ]
            merged.extend(item for item in value if key_of(item, key) not in live_keys)
            out[name] = merged
            continue
        out[name] = apply_merge(current, value, keyed)
    return out


def _conflict_text(conflicts: list[tuple[str, Path]]) -> str:
    lines = []
    for manager, path in conflicts:
        dotted = "".join("." + e[2:] if e.startswith("f:") else "[" + e[2:] + "]" for e in path)
        lines.append(f'conflict with "{manager}": {dotted}')
    return f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: " + "; ".join(lines)


def server_side_apply(
    live: JSON | None,
    applied: JSON,
    *,
    manager: str,
    force: bool,
    keyed: bool,
    status: bool | None,
    api_version: str,
    now: str,
) -> JSON:
    """The object after ``manager`` applied ``applied`` (before defaulting): merged, fields the manager applied
    before and leaves out now removed (unless another manager owns them), managedFields updated.
    Raises 409 Conflict when another manager owns a field with a different value and ``force`` is False."""
    subresource = "status" if status else ""
    base: JSON = copy.deepcopy(live) if live is not None else {}
    previous_raw = list((base.get("metadata") or {}).get("managedFields") or [])
    entries = read_entries(base)
    part = applied if status is not True else {"status": applied.get("status") or {}}
    new_paths = flatten(part, keyed=keyed, status=status)
    live_flat = flatten(base, keyed=keyed, status=status)
    mine = next((e for e in entries if e.same_owner(manager, "Apply", subresource)), None)
    conflicts: list[tuple[str, Path]] = []
    for entry in entries:
        if entry is mine:
            continue
        for path in entry.paths & new_paths.keys():
            value = new_paths[path]
            if value is not _ITEM and live_flat.get(path, _ITEM) != value:
                conflicts.append((entry.manager, path))
    if conflicts and not force:
        raise ApiError(409, "Conflict", _conflict_text(sorted(conflicts)), {"causes": [
            {"reason": "FieldManagerConflict", "message": f'conflict with "{m}"', "field": ".".join(p)}
            for m, p in conflicts
        ]})  # fmt: skip
    for entry in entries:
        if entry is not mine:
            entry.paths -= {p for _, p in conflicts}
    if status is True:
        merged = dict(base)
        merged["status"] = apply_merge(base.get("status") or {}, part["status"], keyed)
    else:
        applied_main = {k: v for k, v in applied.items() if status is None or k != "status"}
        merged = apply_merge(base, applied_main, keyed)
    if mine is not None:
        others = _others_prefixes(entries, mine)
        for path in sorted(mine.paths - new_paths.keys(), key=len):  # items before their fields
            if path not in others:
                remove_path(merged, path)
        mine.paths = set(new_paths)
        mine.time, mine.api_version = now, api_version
    else:
        entries.append(Entry(manager, "Apply", api_version, subresource, now, set(new_paths)))
    write_entries(merged, entries, previous_raw)
    return merged


def record_update(
    old: JSON | None, new: JSON, *, manager: str, keyed: bool, status: bool | None, api_version: str, now: str
) -> None:
    """An Update (POST, PUT, patch) takes the fields whose values it changed from every other manager;
    fields it removed are nobody's any more. Writes ``new``'s managedFields in place."""
    subresource = "status" if status else ""
    previous_raw = list(((old or {}).get("metadata") or {}).get("managedFields") or [])
    entries = read_entries(old)
    before = flatten(old or {}, keyed=keyed, status=status)
    after = flatten(new, keyed=keyed, status=status)
    changed = {p for p, v in after.items() if before.get(p, _ITEM) != v or p not in before}
    gone = before.keys() - after.keys()
    for entry in entries:
        entry.paths -= changed
        entry.paths -= gone
    if changed:
        mine = next((e for e in entries if e.same_owner(manager, "Update", subresource)), None)
        if mine is None:
            mine = Entry(manager, "Update", api_version, subresource, now)
            entries.append(mine)
        mine.paths |= changed
        mine.time = now
    write_entries(new, entries, previous_raw)

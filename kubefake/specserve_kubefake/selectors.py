"""Label and field selectors of LIST and WATCH (labels.Parse and fields.ParseSelector, the parts clients use)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from specserve_kubefake.errors import ApiError

JSON = dict[str, Any]
Term = Callable[[JSON], bool]
_SET = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQUALITY = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s!=,()]*)\s*$")


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def _label_term(text: str) -> Term:
    eq = _EQUALITY.match(text)
    if eq:
        key, op, value = eq.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    match = _SET.match(text)
    if not match:
        raise ApiError(400, "BadRequest", f"unable to parse requirement: {text!r}")
    negate, key, op, values = match.groups()
    if op:
        if negate:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {text!r}")
        members = {v.strip() for v in values.split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in members
        return lambda labels: labels.get(key) not in members
    if negate:
        return lambda labels: key not in labels
    return lambda labels: key in labels


_FIELDS: dict[str, Callable[[JSON], Any]] = {
    "metadata.name": lambda o: o["metadata"].get("name"),
    "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
    "status.phase": lambda o: (o.get("status") or {}).get("phase"),
    "spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName"),
    "involvedObject.name": lambda o: (o.get("involvedObject") or {}).get("name"),
    "involvedObject.uid": lambda o: (o.get("involvedObject") or {}).get("uid"),
}


def _field_term(text: str) -> Callable[[JSON], bool]:
    eq = _EQUALITY.match(text)
    if not eq or eq.group(1) not in _FIELDS:
        raise ApiError(400, "BadRequest", f'field label not supported: "{text}"')
    key, op, value = eq.groups()
    get = _FIELDS[key]
    if op == "!=":
        return lambda obj: get(obj) != value
    return lambda obj: get(obj) == value


class Selector:
    """labelSelector and fieldSelector together; ``matches`` takes a whole object."""

    def __init__(self, labels: str = "", field: str = "") -> None:
        terms = _split(labels)
        self._labels = [_label_term(t) for t in terms]
        self._fields = [_field_term(t) for t in _split(field)]
        # key=value requirements: the store looks them up in its label index instead of scanning every object.
        self.label_equalities = [
            (m.group(1), m.group(3)) for t in terms if (m := _EQUALITY.match(t)) and m.group(2) != "!="
        ]

    def __bool__(self) -> bool:
        return bool(self._labels or self._fields)

    def matches(self, obj: JSON) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(t(labels) for t in self._labels) and all(t(obj) for t in self._fields)

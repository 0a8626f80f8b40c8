"""Turning raw objects into validated models, and every failure into messages that name the field and the fix."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from specserve.api import k8s_rules
from specserve.api.models import (
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    PRINTABLE_PATTERN,
    PROMETHEUS_URL_PATTERN,
    QUANTITY_PATTERN,
    SpecServe,
    SpecServeSpec,
)
from specserve.api.rules import FieldError, check, check_annotations, check_name

M = TypeVar("M", bound=BaseModel)


class InvalidSpecServe(ValueError):  # noqa: N818 - reads better at call sites than InvalidSpecServeError
    """A SpecServe that cannot be served; `errors` name each field and its fix."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


_HINTS = {
    "extra_forbidden": "unknown field; remove it or fix its spelling (kubectl explain specserve.spec lists fields)",
    "missing": "is required",
}

# Strict types: the API server refuses these too, so say how to write the value.
_TYPE_FIXES = {
    "int_type": "write a whole number without quotes, e.g. 2",
    "bool_type": "write true or false without quotes",
    "float_type": "write a number without quotes, e.g. 0.5",
    "finite_number": "write a finite number (not .inf or .nan), e.g. 16",
    "string_type": 'quote it, e.g. "4"',
}

_PATTERNS = {
    QUANTITY_PATTERN: "must be a Kubernetes quantity such as 32Gi, 500m or 4",
    DNS_LABEL_PATTERN: "must be a lowercase RFC 1123 name (a-z, 0-9 and '-', starting and ending alphanumeric)",
    DNS_SUBDOMAIN_PATTERN: "must be a lowercase RFC 1123 name (a-z, 0-9, '-' and '.')",
    r"^/": "must be an absolute path starting with /",
    PRINTABLE_PATTERN: "may not contain control characters (newlines, tabs, escape sequences); remove them",
    PROMETHEUS_URL_PATTERN: "must be an http:// or https:// URL without credentials (user:password@), query or "
    "fragment, e.g. http://prometheus.monitoring:9090 (credentials in a URL show wherever it does: status, events, "
    "logs)",
    r"^[0-9]+$": "must be a batch size (a whole number such as 1, 8 or 32)",
    k8s_rules.LABEL_VALUE_PATTERN: "must be a label value: at most 63 alphanumerics, '-', '_' or '.', starting and "
    "ending alphanumeric",
    k8s_rules.ENV_NAME_PATTERN: "must be an environment variable name (letters, digits, '_', '-' and '.', not "
    "starting with a digit)",
}


def _message(err: Any) -> str:
    if err["type"] in _HINTS:
        return _HINTS[err["type"]]
    message = str(err["msg"])
    if err["type"] == "string_pattern_mismatch":
        pattern = err.get("ctx", {}).get("pattern", "")
        message = _PATTERNS.get(pattern, f"must match {pattern}")
    if "input" in err and not isinstance(err["input"], Mapping | list):
        message = f"{message} (got {err['input']!r})"
        if err["type"] in _TYPE_FIXES:
            message = f"{message}; {_TYPE_FIXES[err['type']]}"
    return message


def _path(prefix: str, loc: tuple[int | str, ...]) -> str:
    parts = [prefix] if prefix else []
    for item in loc:
        if isinstance(item, int):
            parts[-1] = f"{parts[-1]}[{item}]" if parts else f"[{item}]"
        else:
            parts.append(str(item))
    return ".".join(parts)


def describe(exc: ValidationError, prefix: str = "spec") -> list[FieldError]:
    """One FieldError per pydantic error, with the camelCase path as written in YAML."""
    errors = []
    for err in exc.errors(include_url=False):
        # Pydantic appends the failing union branch or function name to loc; keep the field path only.
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))
        errors.append(FieldError(_path(prefix, loc), _message(err)))
    return errors


def strict(model: type[M], raw: Any) -> M:
    """Validate with the API server's typing: the JSON text in strict mode refuses "2" for an integer and "yes"
    for a boolean (no coercion), yet takes 2 for a number and enum values as strings, as the API server does.
    Values YAML turns into other types (dates) go through as strings, as kubectl sends them."""
    return model.model_validate_json(json.dumps(raw, default=_json_default), strict=True)


def _json_default(value: Any) -> Any:
    # kopf hands over its own Mapping views (Body, Spec, Meta); YAML turns unquoted dates into date objects.
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


MAX_DEPTH = 16  # levels of nesting below .spec; the deepest field (a curve point's value) is 5


def too_deep(raw: Any, prefix: str = "spec", limit: int = MAX_DEPTH) -> str | None:
    """The path of the first value nested more than `limit` levels below `raw`, or None (iterative: no recursion
    limit to hit, whatever the depth). The JSON parser behind validation would otherwise refuse it with a bare
    line and column."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(raw, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, Mapping | list) and len(path) >= limit:
            shown = "".join(path[:10]) + (f"... ({len(path)} levels)" if len(path) > 10 else "")
            return prefix + shown
        if isinstance(node, Mapping):
            stack += [(v, (*path, f".{k}")) for k, v in node.items()]
        elif isinstance(node, list):
            stack += [(v, (*path, f"[{i}]")) for i, v in enumerate(node)]
    return None


def parse_spec(raw: Any) -> SpecServeSpec:
    """Validate a raw `.spec` (field rules, then cross-field rules); raises InvalidSpecServe."""
    if not isinstance(raw, Mapping):
        raise InvalidSpecServe([FieldError("spec", "must be a mapping with at least spec.model.path")])
    if (deep := too_deep(raw)) is not None:
        message = f"nests values more than {MAX_DEPTH} levels deep, which no SpecServe field does; remove the nesting"
        raise InvalidSpecServe([FieldError(deep, message)])
    try:
        spec = strict(SpecServeSpec, raw)
    except ValidationError as exc:
        raise InvalidSpecServe(describe(exc)) from None
    errors = check(spec)
    if errors:
        raise InvalidSpecServe(errors)
    return spec


def parse_object(raw: Any) -> SpecServe:
    """Validate a whole SpecServe document (apiVersion, kind, metadata, spec); raises InvalidSpecServe."""
    if not isinstance(raw, Mapping):
        raise InvalidSpecServe([FieldError("(document)", "must be a SpecServe mapping, not " + type(raw).__name__)])
    spec = parse_spec(raw.get("spec"))
    if (deep := too_deep({k: v for k, v in raw.items() if k != "spec"}, prefix="")) is not None:
        message = f"nests values more than {MAX_DEPTH} levels deep; remove the nesting"
        raise InvalidSpecServe([FieldError(deep.lstrip("."), message)])
    try:
        head = strict(SpecServe, {**raw, "spec": {"model": {"path": "-"}}})
    except ValidationError as exc:
        raise InvalidSpecServe(describe(exc, prefix="")) from None
    errors = check_name(head.metadata.name) + check_annotations(head.metadata.annotations)
    if errors:
        raise InvalidSpecServe(errors)
    return head.model_copy(update={"spec": spec})

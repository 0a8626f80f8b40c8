"""Schema validation: built-in kinds against the official JSON schemas, custom resources against their CRD.

Validators are built once per kind (the official definitions file is 1.5 MB; kubernetes_validate reads it on
every call) and CEL programs once per rule.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: FakeApiServer(validate=False) runs without these dev dependencies
    import referencing

JSON = dict[str, Any]
Causes = list[tuple[str, str]]
SCHEMA_VERSION = "v1.35.0-local-strict"
_MAX_CAUSES = 5
_MEMO_SIZE = 20000
_ABSENT = object()


def _field(path: Iterator[Any] | Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _causes(validator: Any, obj: JSON) -> Causes:
    from jsonschema.exceptions import best_match  # noqa: PLC0415

    out: Causes = []
    for error in validator.iter_errors(obj):
        best = best_match([error]) if error.context else error
        out.append((_field(best.absolute_path), f"Invalid value: {json.dumps(best.instance)[:80]}: {best.message}"))
        if len(out) >= _MAX_CAUSES:
            break
    return out


# ------------------------------------------------------------------------------------------ built-in kinds


@functools.cache
def _registry() -> referencing.Registry[Any]:
    import referencing  # noqa: PLC0415

    base = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema", SCHEMA_VERSION)
    definitions = json.loads(base.joinpath("_definitions.json").read_text(encoding="utf-8"))
    resource: referencing.Resource[Any] = referencing.Resource.from_contents(definitions)
    registry: referencing.Registry[Any] = resource @ referencing.Registry()
    return registry


@functools.cache
def builtin_validator(api_version: str, kind: str) -> Any | None:
    """The official schema's validator for a built-in kind, or None when kubernetes_validate has none."""
    group, _, version = api_version.rpartition("/")
    name = f"{kind.lower()}-{group.split('.')[0]}-{version}" if group else f"{kind.lower()}-{version}"
    base = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema", SCHEMA_VERSION)
    try:
        schema = json.loads(base.joinpath(f"{name}.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    from jsonschema import Draft202012Validator  # noqa: PLC0415

    return Draft202012Validator(schema, registry=_registry())


def _client_view(obj: JSON) -> JSON:
    """What the schema checks: status is the controllers' and managedFields and resourceVersion the server's own;
    only what clients send is checked."""
    body = {k: v for k, v in obj.items() if k != "status"}
    meta = body.get("metadata")
    if isinstance(meta, dict):
        body["metadata"] = {k: v for k, v in meta.items() if k not in ("managedFields", "resourceVersion")}
    return body


def validate_builtin(obj: JSON, old: JSON | None = None) -> Causes:
    """The official schema's causes. A write that left the checked part as ``old`` had it (a status write) is not
    checked again: it was valid when stored, and the check is most of the fake's CPU per write (a Deployment:
    several ms)."""
    validator = builtin_validator(obj.get("apiVersion", ""), obj.get("kind", ""))
    if validator is None:
        return []
    body = _client_view(obj)
    if old is not None and _client_view(old) == body:
        return []
    return _causes(validator, body)


# ------------------------------------------------------------------------------------------ custom resources


def to_jsonschema(node: Any) -> Any:
    """A Kubernetes structural schema as JSON Schema: nullable, int-or-string, boolean exclusive bounds."""
    if isinstance(node, list):
        return [to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_jsonschema(v) for k, v in node.items() if not k.startswith("x-kubernetes") and k != "nullable"}
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if out.get(bound) is True:
            out[bound] = out.pop(limit)
        elif out.get(bound) is False:
            del out[bound]
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    out.pop("format", None)  # int32/int64/... are not JSON Schema formats
    if "properties" in out and node.get("type") == "object" and "metadata" in out["properties"]:
        out["properties"]["metadata"] = {"type": "object"}
    return out


def prune_and_default(node: Any, schema: Mapping[str, Any], root: bool = False) -> Any:
    """What the API server does to a custom resource before validation: unknown fields pruned (unless
    x-kubernetes-preserve-unknown-fields), nulls of non-nullable fields dropped, schema defaults filled in."""
    if isinstance(node, dict) and (schema.get("type") == "object" or "properties" in schema):
        props: Mapping[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") or additional is True
        out: JSON = {}
        for key, value in node.items():
            sub = props.get(key)
            if root and key in ("apiVersion", "kind", "metadata"):
                out[key] = value
            elif sub is not None:
                if value is None and not sub.get("nullable"):
                    continue
                out[key] = prune_and_default(value, sub)
            elif isinstance(additional, dict):
                out[key] = prune_and_default(value, additional)
            elif preserve:
                out[key] = value
        for key, sub in props.items():
            if key not in out and "default" in sub:
                out[key] = prune_and_default(copy.deepcopy(sub["default"]), sub)
        return out
    if isinstance(node, list) and isinstance(schema.get("items"), Mapping):
        return [prune_and_default(item, schema["items"]) for item in node]
    return node


def _cel_rules(schema: Mapping[str, Any], path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], JSON]]:
    """(path, rule) for every x-kubernetes-validations rule; ``"*"`` in a path means every item or map value."""
    for rule in schema.get("x-kubernetes-validations") or []:
        yield path, rule
    for key, sub in (schema.get("properties") or {}).items():
        yield from _cel_rules(sub, (*path, key))
    if isinstance(schema.get("items"), Mapping):
        yield from _cel_rules(schema["items"], (*path, "*"))
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from _cel_rules(schema["additionalProperties"], (*path, "*"))


def _nodes(value: Any, path: tuple[Any, ...], at: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if not path:
        yield at, value
        return
    head, rest = path[0], path[1:]
    if head == "*":
        children = enumerate(value) if isinstance(value, list) else (value.items() if isinstance(value, dict) else ())
        for key, child in children:
            yield from _nodes(child, rest, (*at, key))
    elif isinstance(value, dict) and head in value:
        yield from _nodes(value[head], rest, (*at, head))


# ``self`` and, when it is a field selection (not a method or macro: ``self.all(...)``), the field's name.
_SELF = re.compile(r"\bself\b(\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)(?!\s*\(|[A-Za-z0-9_]))?")


def fields_read(rule: str) -> frozenset[str] | None:
    """The fields of ``self`` a rule can see, when every ``self`` in it selects a field (``self.field``); None
    when it uses ``self`` whole (``self.all(...)``, ``size(self)``, ``self["a"]``) or compares with ``oldSelf``.
    A rule's outcome depends on these fields only, so it is evaluated on them alone: a status write does not
    re-run a root rule about metadata.name, and SpecServes that differ only in fields a rule does not read share
    its outcome."""
    if "oldSelf" in rule:
        return None
    names = set()
    for match in _SELF.finditer(rule):
        if match.group(2) is None:
            return None
        names.add(match.group(2))
    return frozenset(names)


def _narrow(value: Any, names: frozenset[str] | None) -> Any:
    if names is None or not isinstance(value, dict):
        return value
    return {k: value[k] for k in names if k in value}


def _root_view(obj: JSON) -> JSON:
    """The object as a root-level rule sees it: of metadata, only name and generateName are accessible."""
    meta = obj.get("metadata") or {}
    return {**obj, "metadata": {k: meta[k] for k in ("name", "generateName") if k in meta}}


def _bounded_repr(self: Exception) -> str:
    return f"{type(self).__name__}({str(self.args)[:120]})"


def _tame_celpy() -> None:
    """celpy embeds the repr of both operands in the error of `error && error`, and that repr dumps the parse
    tree, so an `.all()` over a long literal list whose items all error grows exponentially (24 items: 18 s).
    A bounded repr keeps the evaluation linear; the outcome is unchanged."""
    from celpy.evaluation import CELEvalError  # noqa: PLC0415

    CELEvalError.__repr__ = _bounded_repr  # type: ignore[method-assign]


def _is_sorted(items: Any) -> Any:
    """Kubernetes' CEL list library `isSorted()`, which cel-python lacks (the CRD's curve rules use it)."""
    from celpy import celtypes  # noqa: PLC0415

    return celtypes.BoolType(all(a <= b for a, b in zip(items, list(items)[1:], strict=False)))


class CustomResourceSchema:
    """One CRD version's schema, compiled: a JSON Schema validator and the CEL programs."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        import celpy  # noqa: PLC0415 - heavy; only servers with CRDs pay for it
        from jsonschema import Draft202012Validator  # noqa: PLC0415

        _tame_celpy()
        self.schema = schema
        translated = to_jsonschema(dict(schema))
        self.validator = Draft202012Validator(translated)
        # Per top-level field (spec, status): an update re-checks only the parts it changed.
        self.parts = {k: Draft202012Validator(v) for k, v in (translated.get("properties") or {}).items()}
        env = celpy.Environment()
        self.rules = []
        for path, rule in _cel_rules(schema):
            program = env.program(env.compile(rule["rule"]), functions={"isSorted": _is_sorted})
            self.rules.append((path, rule, program, "oldSelf" in rule["rule"], fields_read(rule["rule"])))
        self._memo: dict[tuple[int, str, str], str] = {}
        # The CEL form of the nodes of the object being validated (several rules on one node convert it once).
        self._converted: dict[int, tuple[Any, Any]] = {}

    def validate(self, obj: JSON, old: JSON | None) -> Causes:
        """Schema errors, else the CEL rules' failures. A rule whose value did not change since ``old`` is not
        evaluated again (the API server's validation ratcheting); outcomes are memoised per value."""
        causes = self._schema_causes(obj, old)
        if causes:
            return causes  # CEL runs only on schema-valid objects, as in the API server
        self._converted.clear()
        olds = {}
        dumped: dict[int, str] = {}  # one serialisation per node for the memo keys, however many rules read it
        # The views rules see, one per node and set of fields read: held here, so their ids key ``dumped``.
        views: dict[tuple[int, frozenset[str] | None], Any] = {}

        def view(node: Any, names: frozenset[str] | None) -> Any:
            key = (id(node), names)
            if key not in views:
                views[key] = _narrow(node, names)
            return views[key]

        root, old_root = _root_view(obj), _root_view(old) if old is not None else None
        for index, (path, rule, program, transition, names) in enumerate(self.rules):
            if old is not None:
                olds = {at: _narrow(v, names) for at, v in _nodes(old_root if not path else old, path)}
            for at, whole in _nodes(root if not path else obj, path):
                value = view(whole, names)
                if old is not None and not transition and at in olds and olds[at] == value:
                    continue
                old_value = olds.get(at, _ABSENT) if transition else None
                failure = self._evaluate(index, rule, program, value, old_value, dumped)
                if failure:
                    field = _field(at) + (rule.get("fieldPath") or "" if failure != "error" else "")
                    causes.append((field, f'Invalid value: "object": {failure}'))
        return causes

    def _schema_causes(self, obj: JSON, old: JSON | None) -> Causes:
        if old is None or set(obj) - set(self.parts) - {"apiVersion", "kind", "metadata"}:
            return _causes(self.validator, obj)
        causes: Causes = []
        for key, validator in self.parts.items():
            if key in obj and obj[key] != old.get(key) and key != "metadata":
                causes += [(f"{key}.{f}" if f != "<root>" else key, m) for f, m in _causes(validator, obj[key])]
        return causes

    def _evaluate(
        self, index: int, rule: JSON, program: Any, value: Any, old_value: Any, dumped: dict[int, str]
    ) -> str:
        """ "" when the rule holds, else the message."""
        from celpy.adapter import json_to_cel  # noqa: PLC0415
        from celpy.evaluation import CELEvalError  # noqa: PLC0415

        if old_value is _ABSENT:
            return ""  # transition rules apply to updates only
        text = dumped.get(id(value))
        if text is None:
            text = dumped[id(value)] = json.dumps(value, sort_keys=True)
        key = (index, text, json.dumps(old_value, sort_keys=True) if old_value is not None else "")
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        converted = self._converted.get(id(value))
        if converted is None or converted[0] is not value:
            converted = self._converted[id(value)] = (value, json_to_cel(value))
        activation: JSON = {"self": converted[1]}
        if old_value is not None:
            activation["oldSelf"] = json_to_cel(old_value)
        try:
            result = program.evaluate(activation)
        except CELEvalError as exc:
            outcome = f"rule evaluation error: {str(exc)[:200]}"
        else:
            ok = not isinstance(result, Exception) and bool(result)
            outcome = "" if ok else (rule.get("message") or f"failed rule: {rule['rule']}")
        if len(self._memo) > _MEMO_SIZE:
            self._memo.clear()
        self._memo[key] = outcome
        return outcome

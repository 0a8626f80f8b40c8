"""The SpecServe CustomResourceDefinition, generated from the pydantic models.

Pydantic emits JSON Schema 2020-12; Kubernetes wants a structural OpenAPI v3 subset: no $ref, no anyOf
for optional fields, no `additionalProperties: false`, no `const`, boolean exclusive bounds, and
defaults on object fields so nested defaults apply. This module does that translation and adds the CEL
rules from rules.py, printer columns and names.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from specserve.api import models, rules

JSON = dict[str, Any]

# Keys Kubernetes rejects or ignores in a structural schema.
_DROP_KEYS = ("title", "$defs", "propertyNames")


def _resolve(node: Any, defs: JSON) -> Any:
    """Inline $refs and translate JSON Schema constructs to the Kubernetes subset, recursively."""
    if isinstance(node, list):
        return [_resolve(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _resolve(merged, defs)
    out: JSON = {}
    for key, value in node.items():
        if key in _DROP_KEYS:
            continue
        out[key] = _resolve(value, defs)
    # Optional[X] comes as anyOf [X, null]: keep X (absence is how Kubernetes says "unset").
    if "anyOf" in out:
        branches = [b for b in out.pop("anyOf") if b.get("type") != "null"]
        if len(branches) == 1:
            out = {**branches[0], **out}
        else:
            out["anyOf"] = branches
    if "default" in out and out["default"] is None:
        del out["default"]  # unset optional fields stay absent rather than null
    if "patternProperties" in out:
        # Kubernetes has no patternProperties: keep the value schema; key patterns become CEL rules.
        (value_schema,) = out.pop("patternProperties").values()
        out["additionalProperties"] = value_schema
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if out.get("additionalProperties") is False:
        del out["additionalProperties"]
    for bound in ("exclusiveMinimum", "exclusiveMaximum"):
        if bound in out and not isinstance(out[bound], bool):
            out["minimum" if bound == "exclusiveMinimum" else "maximum"] = out[bound]
            out[bound] = True
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    if out.get("type") == "object" and "properties" not in out and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _add_factory_defaults(model: type[BaseModel], schema: JSON) -> None:
    """Give fields built by default_factory a schema default, so the API server fills nested defaults."""
    for name, field in model.model_fields.items():
        prop = schema.get("properties", {}).get(field.alias or name)
        if prop is None:
            continue
        if field.default_factory is not None:
            value = field.default_factory()  # type: ignore[call-arg]
            if isinstance(value, BaseModel):
                prop["default"] = value.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
            elif isinstance(value, dict):
                prop["default"] = value
            else:
                prop["default"] = [
                    v.model_dump(mode="json", by_alias=True, exclude_none=True) if isinstance(v, BaseModel) else v
                    for v in value
                ]
        nested = _model_of(field.annotation)
        if nested is not None:
            target = prop.get("items", prop) if prop.get("type") == "array" else prop
            _add_factory_defaults(nested, target)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def schema_of(model: type[BaseModel]) -> JSON:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    schema: JSON = _resolve(raw, raw.get("$defs", {}))
    _add_factory_defaults(model, schema)
    return schema


def spec_schema() -> JSON:
    schema = schema_of(models.SpecServeSpec)
    schema["x-kubernetes-validations"] = [
        {"rule": r.cel, "message": f"{r.field}: {r.message}", "fieldPath": "." + r.field.removeprefix("spec.")}
        for r in rules.RULES
    ]
    # Key patterns (batch sizes) are checked by the operator: a CEL rule over map keys of unbounded length
    # would not fit the API server's cost budget.
    return schema


def crd() -> JSON:
    """The CustomResourceDefinition manifest."""
    status = schema_of(models.SpecServeStatus)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{models.PLURAL}.{models.GROUP}"},
        "spec": {
            "group": models.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": models.KIND,
                "listKind": f"{models.KIND}List",
                "plural": models.PLURAL,
                "singular": models.SINGULAR,
                "shortNames": models.SHORT_NAMES,
                "categories": models.CATEGORIES,
            },
            "versions": [
                {
                    "name": models.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {
                            "name": "Ready",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
                        },
                        {
                            # Ready=True alone hides a SpecServe that serves but is Degraded (an invalid spec
                            # held, an autoscaler conflict): the column shows it in `kubectl get`.
                            "name": "Degraded",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Degraded")].status',
                        },
                        {"name": "Strategy", "type": "string", "jsonPath": ".spec.strategy"},
                        {"name": "Mode", "type": "string", "jsonPath": ".status.activeMode"},
                        {"name": "Spec weight", "type": "integer", "jsonPath": ".status.weights.speculative"},
                        {"name": "Load", "type": "number", "jsonPath": ".status.load.concurrency"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "SpecServe serves one model with SGLang, with and without speculative "
                            "decoding, and switches between them by load.",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema(),
                                "status": status,
                            },
                            "x-kubernetes-validations": [
                                {"rule": r.cel, "message": f"metadata.name: {r.message}"} for r in rules.NAME_RULES
                            ],
                        }
                    },
                }
            ],
        },
    }

"""The CRD is generated from the models; the committed copy must match, and Kubernetes must accept its shape."""

from __future__ import annotations

import copy
import itertools
import json
import re
from typing import Any

import celpy
import jsonschema
import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel

from specserve.api.crd import crd
from specserve.api.models import SpecServeSpec
from specserve.api.rules import RULES
from specserve.api.selector import syntax_problem
from specserve.commands.crd import render_crd_yaml
from tests.conftest import EXAMPLES, ROOT, load_yaml
from tests.unit.test_api import MINIMAL, with_

COMMITTED = ROOT / "crds" / "specserve.io_specserves.yaml"


def schema() -> dict[str, Any]:
    result: dict[str, Any] = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return result


def test_committed_crd_matches_the_models() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == render_crd_yaml(), (
        "crds/ drifted from specserve.api.models: run `specserve crd -o crds/specserve.io_specserves.yaml`"
    )


def _walk(node: Any, path: str = "") -> Any:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}[{i}]")


def test_schema_is_structural() -> None:
    for path, node in _walk(schema()):
        for forbidden in ("$ref", "anyOf", "oneOf", "patternProperties", "const", "title", "$defs"):
            assert forbidden not in node, f"{forbidden} at {path}"
        assert node.get("additionalProperties") is not False, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if "default" in node:
            assert node["default"] is not None, path
        if path.endswith("properties") or path.endswith("x-kubernetes-validations") or "enum" in path:
            continue
        if "properties" in node or "items" in node:
            assert "type" in node, f"no type at {path}"


def test_printer_columns_and_names() -> None:
    version = crd()["spec"]["versions"][0]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Ready",
        "Degraded",  # Ready=True does not hide a Degraded SpecServe in `kubectl get`
        "Strategy",
        "Mode",
        "Spec weight",
        "Load",
        "Age",
    ]
    degraded = version["additionalPrinterColumns"][1]
    assert degraded["jsonPath"] == '.status.conditions[?(@.type=="Degraded")].status'
    assert version["subresources"] == {"status": {}}
    names = crd()["spec"]["names"]
    assert names["shortNames"] and names["categories"]


def to_jsonschema(node: Any) -> Any:
    """Kubernetes OpenAPI -> JSON Schema: boolean exclusive bounds become numeric ones."""
    if isinstance(node, list):
        return [to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_jsonschema(v) for k, v in node.items() if not k.startswith("x-kubernetes")}
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if out.get(bound) is True:
            out[bound] = out.pop(limit)
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate_against_the_crd_schema(path: Any) -> None:
    jsonschema.validate(load_yaml(path), to_jsonschema(schema()))


def test_schema_rejects_what_the_models_reject() -> None:
    bad = {
        "apiVersion": "specserve.io/v1alpha1",
        "kind": "SpecServe",
        "metadata": {"name": "x"},
        "spec": with_({"pools.baseline.replicas": -1}),
    }
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, to_jsonschema(schema()))


# ------------------------------------------------------------------------------------------ CEL rules

SAMPLES: list[dict[str, Any]] = [
    MINIMAL,
    with_({"placement.gpusPerPod": 6, "engine.tensorParallelSize": 4}),
    with_({"placement.gpusPerPod": 8, "engine.tensorParallelSize": 4}),
    with_({"speculative.draftModelPath": None}),
    with_({"speculative.draftModelPath": None, "speculative.algorithm": "NGRAM"}),
    with_({"speculative.numDraftTokens": 8}),
    with_({"speculative.numDraftTokens": 4}),
    with_({"speculative.numDraftTokens": 8, "speculative.eagleTopk": 4}),
    with_({"strategy": "Adaptive", "speculative.eagleTopk": 4}),
    with_({"strategy": "Adaptive", "speculative.algorithm": "NEXTN"}),
    with_({"strategy": "Adaptive", "engine.sglangVersion": "0.5.9"}),
    with_({"strategy": "Adaptive", "speculative.adaptiveConfig": {"1": [3], "16": [0]}}),
    with_({"speculative.adaptiveConfig": {"1": [3]}}),
    with_({"strategy": "Adaptive", "speculative.numSteps": 2, "speculative.adaptiveConfig": {"1": [1, 3], "16": [0]}}),
    with_({"strategy": "Adaptive", "speculative.numSteps": 2}),
    with_({"strategy": "Adaptive", "speculative.numSteps": 2, "switching.crossoverConcurrency": 9}),
    # SGLang 0.5.17: adaptive CUDA graphs sized by the launch steps (numSteps must cover every candidate)
    with_({"strategy": "Adaptive", "engine.sglangVersion": "0.5.17"}),
    with_({"strategy": "Adaptive", "engine.sglangVersion": "0.5.17", "speculative.numSteps": 7}),
    with_({"strategy": "Adaptive", "engine.sglangVersion": "0.5.17", "switching.crossoverConcurrency": 16}),
    with_(
        {"strategy": "Adaptive", "engine.sglangVersion": "0.5.17", "speculative.adaptiveConfig": {"1": [3], "16": [0]}}
    ),
    with_({"strategy": "Adaptive", "engine.sglangVersion": "0.5.17", "speculative.adaptiveConfig": {"1": [3, 5]}}),
    with_({"routing": {}}),
    with_({"routing": {}, "strategy": "Restart"}),
    with_({"model.cache": {"pvcName": "a", "hostPath": "/b"}}),
    with_({"model.cache": {}}),
    with_({"model.cache": {"hostPath": "/b"}}),
    with_({"engine.extraArgs": ["--tp-size", "2"]}),
    with_({"engine.extraArgs": ["--cuda-graph-max-bs-decode", "64"]}),
    with_({"engine.extraArgs": ["--port=1"]}),
    with_({"engine.extraArgs": ["--mem-frac"]}),
    with_({"engine.env": [{"name": "SGLANG_ENABLE_SPEC_V2", "value": "1"}]}),
    with_({"engine.env": [{"name": "NCCL_DEBUG", "value": "INFO"}]}),
    with_({"engine.attentionBackend": "fa4", "placement.gpuProduct": "NVIDIA-GeForce-RTX-5090"}),
    with_({"engine.attentionBackend": "fa4", "placement.gpuProduct": "NVIDIA-H100-80GB-HBM3"}),
    with_({"engine.attentionBackend": "fa4", "placement.sm120": True}),
    with_({"engine.attentionBackend": "fa4", "placement.sm120": False, "placement.gpuProduct": "NVIDIA-RTX-5090"}),
    with_({"engine.env": [{"name": "A", "value": "1"}, {"name": "B"}, {"name": "A", "value": "2"}]}),
    with_({"placement.tolerations": [{"key": "gpu", "operator": "Exists", "value": "x"}]}),
    with_({"placement.tolerations": [{"key": "gpu", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]}),
    with_({"placement.tolerations": [{"operator": "Equal", "value": "x"}]}),
    with_({"placement.tolerations": [{"operator": "Exists"}]}),
    with_({"placement.tolerations": [{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 30}]}),
    with_({"placement.tolerations": [{"key": "k", "tolerationSeconds": 30}]}),
    with_({"placement.tolerations": [{"key": "k", "effect": "NoExecute", "tolerationSeconds": 30}]}),
    with_({"monitoring.labels": {"release": "kps", "app.kubernetes.io/name": "x"}}),
    with_({"monitoring.labels": {"specserve.io/pool": "x"}}),
    with_({"monitoring.labels": {"release": "kps", "specserve.iox/a": "b"}}),
    with_({"routing.pathPrefix": "/v1//chat"}),
    with_({"routing.pathPrefix": "/v1/.."}),
    with_({"routing.pathPrefix": "/v1/%2F"}),
    with_({"routing.pathPrefix": "/v1/chat.completions"}),
    with_({"model.cache": {"hostPath": "/models/../etc"}}),
    with_({"model.cache": {"hostPath": "/models/."}}),
    with_({"model.cache": {"hostPath": "/models/..x/a.b"}}),
    with_({"switching.curves": {"speculative": [{"concurrency": 1, "tokensPerSecond": 10}]}}),
    with_({"switching.curves": {"baseline": [{"concurrency": 1, "tokensPerSecond": 10}]}}),
    with_(
        {
            "switching.curves": {
                "speculative": [{"concurrency": 4, "tokensPerSecond": 10}, {"concurrency": 2, "tokensPerSecond": 5}]
            }
        }
    ),
    with_(
        {
            "switching.curves": {
                "baseline": [{"concurrency": 2, "tokensPerSecond": 10}, {"concurrency": 2, "tokensPerSecond": 5}]
            }
        }
    ),
    with_(
        {
            "switching.curves": {
                "speculative": [{"concurrency": c, "tokensPerSecond": 1} for c in range(1, 65)],
                "baseline": [{"concurrency": c, "tokensPerSecond": 1} for c in (1, 2.5, 8)],
            }
        }
    ),
    with_(
        {"switching.curves": {"speculative": [{"concurrency": c, "tokensPerSecond": 1} for c in [*range(1, 64), 63]]}}
    ),  # hostile curves: zero everywhere, one mode only
    with_({"switching.curves": {"speculative": [{"concurrency": c, "tokensPerSecond": 0} for c in (1, 8)]}}),
    with_({"switching.curves": {"baseline": [{"concurrency": c, "tokensPerSecond": 0} for c in (1, 8)]}}),
    with_(
        {
            "switching.curves": {
                "speculative": [{"concurrency": c, "tokensPerSecond": 0} for c in (1, 8)],
                "baseline": [{"concurrency": c, "tokensPerSecond": 5} for c in (1, 8)],
            }
        }
    ),
    with_({"switching.curves": {"speculative": [], "baseline": []}}),
    # series selectors: scoped to the own namespace or not
    with_({"switching.metrics": {"seriesSelector": 'namespace="$namespace",app="$name"'}}),
    with_({"switching.metrics": {"seriesSelector": 'kubernetes_namespace = "$namespace"'}}),
    with_({"switching.metrics": {"seriesSelector": 'app="$name",k8s_namespace="$namespace"'}}),
    with_({"switching.metrics": {"seriesSelector": 'namespace="kube-system"'}}),
    with_({"switching.metrics": {"seriesSelector": 'namespace=~"$namespace"'}}),
    with_({"switching.metrics": {"seriesSelector": 'namespace!="$namespace"'}}),
    with_({"switching.metrics": {"seriesSelector": 'app="x,namespace=\\"$namespace\\""'}}),
]


SAMPLES.append(with_({"speculative": {"algorithm": "NGRAM", "numDraftTokens": 12}}))  # no chain rule for NGRAM


def _as_api_server_sees_it(raw: dict[str, Any]) -> tuple[SpecServeSpec, Any]:
    spec = SpecServeSpec.model_validate(raw)  # field rules and defaults only, as the schema applies them
    return spec, json_to_cel(spec.model_dump(mode="json", by_alias=True, exclude_none=True))


def _is_sorted(items: Any) -> Any:
    return celtypes.BoolType(all(a <= b for a, b in itertools.pairwise(items)))


# Kubernetes' CEL libraries the rules use that cel-python lacks, written after their Kubernetes definitions.
KUBERNETES_CEL_FUNCTIONS = {"isSorted": _is_sorted}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.field)
def test_cel_rule_agrees_with_its_python_twin(rule: Any) -> None:
    env = celpy.Environment()
    program = env.program(env.compile(rule.cel), functions=KUBERNETES_CEL_FUNCTIONS)
    outcomes = set()
    for sample in SAMPLES:
        spec, activation = _as_api_server_sees_it(copy.deepcopy(sample))
        cel_ok = bool(program.evaluate({"self": activation}))
        assert cel_ok == rule.holds(spec), f"{rule.field}: CEL {cel_ok} on {json.dumps(sample)}"
        outcomes.add(cel_ok)
    assert outcomes == {True, False}, f"the samples never exercise both outcomes of {rule.field}"


def test_crd_carries_every_rule() -> None:
    rules = {v["rule"] for v in schema()["properties"]["spec"]["x-kubernetes-validations"]}
    assert rules == {r.cel for r in RULES}


def test_every_rule_field_path_names_a_field_of_the_schema() -> None:
    """The API server refuses a CRD whose x-kubernetes-validations fieldPath does not resolve in the schema."""
    for validation in schema()["properties"]["spec"]["x-kubernetes-validations"]:
        node = schema()["properties"]["spec"]
        for part in validation["fieldPath"].lstrip(".").split("."):
            node = node["properties"][part]
        assert "type" in node, validation["fieldPath"]


@pytest.mark.parametrize(
    "text",
    [
        'namespace="$namespace",app="$name"',
        'a="b"}) or vector(1) or sum({x="y"',
        'namespace="$namespace",__name__=~".+"',
        'app=~"a\\"b",namespace="$namespace"',
        "namespace=$namespace",
        'app="unterminated',
        'app="x" app="y"',
    ],
)
def test_the_selector_pattern_the_api_server_checks_agrees_with_the_operator(text: str) -> None:
    prop = schema()["properties"]["spec"]["properties"]["switching"]["properties"]["metrics"]["properties"]
    pattern = prop["seriesSelector"]["pattern"]
    assert (re.search(pattern, text) is not None) is (syntax_problem(text) is None), text

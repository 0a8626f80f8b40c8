"""The SpecServe API: defaults, field rules and cross-field rules, with messages that name the field and the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from specserve.api.models import Mode, Strategy
from specserve.api.rules import OWNED_FLAGS, owns_flag
from specserve.api.validation import InvalidSpecServe, parse_object, parse_spec
from tests.conftest import EXAMPLES, load_yaml

MINIMAL: dict[str, Any] = {
    "model": {"path": "meta-llama/Llama-3.1-8B-Instruct"},
    "speculative": {"draftModelPath": "org/eagle3-head"},
    "routing": {"gateway": {"name": "gw"}},
}


def with_(patch: dict[str, Any], base: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(base or MINIMAL)
    for key, value in patch.items():
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


def errors_of(raw: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(InvalidSpecServe) as info:
        parse_spec(raw)
    return {e.field: e.message for e in info.value.errors}


def test_minimal_spec_gets_documented_defaults() -> None:
    spec = parse_spec(MINIMAL)
    assert spec.strategy == Strategy.TRAFFIC_SPLIT
    assert spec.engine.sglang_version == "0.5.23"
    assert spec.speculative.algorithm == "EAGLE3"
    assert spec.speculative.draft_tokens() == spec.speculative.num_steps + 1  # topk 1 chain
    assert spec.switching.initial_mode == Mode.SPECULATIVE
    assert [t.key for t in spec.placement.tolerations] == ["nvidia.com/gpu"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_valid(path: Any) -> None:
    for doc in [load_yaml(path)]:
        parse_object(doc)


@pytest.mark.parametrize(
    ("patch", "field", "fix"),
    [
        ({"strategy": "Canary"}, "spec.strategy", "'TrafficSplit', 'Restart' or 'Adaptive'"),
        ({"pools.baseline.replicas": -1}, "spec.pools.baseline.replicas", "greater than or equal to 0"),
        ({"engine.shmSize": "lots"}, "spec.engine.shmSize", "Kubernetes quantity"),
        ({"engine.resources": {"limits": {"memory": "1 GB"}}}, "spec.engine.resources.limits.memory", "quantity"),
        ({"engine.tensorParallelSize": 0}, "spec.engine.tensorParallelSize", "greater than or equal to 1"),
        ({"engine.sglangVersion": "0.4.0"}, "spec.engine.sglangVersion", "'0.5.23', '0.5.17' or '0.5.9'"),
        ({"speculative.algorithm": "MEDUSA"}, "spec.speculative.algorithm", "'EAGLE3'"),
        ({"model.path": ""}, "spec.model.path", "at least 1 character"),
        ({"speculativ": {}}, "spec.speculativ", "unknown field"),
        ({"placement.gpusPerPod": 6, "engine.tensorParallelSize": 4}, "spec.placement.gpusPerPod", "multiple of"),
        ({"speculative.draftModelPath": None}, "spec.speculative.draftModelPath", "required for the EAGLE3"),
        ({"speculative.numDraftTokens": 8}, "spec.speculative.numDraftTokens", "numSteps + 1"),
        (
            {"strategy": "Adaptive", "speculative.eagleTopk": 4, "speculative.numDraftTokens": 8},
            "spec.speculative.eagleTopk",
            "eagleTopk 1",
        ),
        ({"strategy": "Adaptive", "speculative.algorithm": "NGRAM"}, "spec.speculative.algorithm", "EAGLE3 and EAGLE"),
        ({"strategy": "Adaptive", "engine.sglangVersion": "0.5.9"}, "spec.engine.sglangVersion", "0.5.17 or newer"),
        ({"speculative.adaptiveConfig": {"1": [3]}}, "spec.speculative.adaptiveConfig", "strategy: Adaptive"),
        (
            {"strategy": "Adaptive", "speculative.numSteps": 4, "speculative.adaptiveConfig": {"1": [1, 3], "16": [0]}},
            "spec.speculative.numSteps",
            "candidate steps in spec.speculative.adaptiveConfig",
        ),
        ({"strategy": "Adaptive", "speculative.numSteps": 2}, "spec.speculative.numSteps", "[1, 3, 5, 7]"),
        (
            {"strategy": "Adaptive", "engine.sglangVersion": "0.5.17"},
            "spec.speculative.numSteps",
            "set numSteps to the largest candidate step",
        ),
        (
            {"strategy": "Adaptive", "engine.sglangVersion": "0.5.17", "speculative.adaptiveConfig": {"1": [3, 5]}},
            "spec.speculative.numSteps",
            "crashes at start when a candidate step is larger",
        ),
        ({"routing": {}}, "spec.routing.gateway", "name the Gateway"),
        ({"model.cache": {"pvcName": "a", "hostPath": "/b"}}, "spec.model.cache", "exactly one"),
        ({"engine.extraArgs": ["--tp-size", "2"]}, "spec.engine.extraArgs", "use the matching spec field"),
        ({"engine.extraArgs": ["--mem-frac=0.8"]}, "spec.engine.extraArgs", "flags the operator owns"),
        ({"engine.env": [{"name": "HF_TOKEN", "value": "x"}]}, "spec.engine.env", "hfTokenSecret"),
        (
            {"engine.attentionBackend": "trtllm_mha", "placement.gpuProduct": "NVIDIA-RTX-PRO-6000-Blackwell"},
            "spec.engine.attentionBackend",
            "flashinfer or triton",
        ),
    ],
)
def test_bad_input_names_the_field_and_the_fix(patch: dict[str, Any], field: str, fix: str) -> None:
    errors = errors_of(with_(patch))
    assert field in errors, errors
    assert fix in errors[field]


def test_all_cross_field_problems_are_reported_at_once() -> None:
    errors = errors_of(with_({"placement.gpusPerPod": 3, "engine.tensorParallelSize": 2, "routing": {}}))
    assert {"spec.placement.gpusPerPod", "spec.routing.gateway"} <= errors.keys()


def test_sm100_backend_is_fine_off_sm120() -> None:
    parse_spec(with_({"engine.attentionBackend": "trtllm_mha", "placement.gpuProduct": "NVIDIA-B200"}))


@pytest.mark.parametrize("arg", ["--tp-size", "--tp-size=4", "--tp", "--model", "--speculative-adaptive-config=x"])
def test_owned_flags_and_abbreviations_are_caught(arg: str) -> None:
    assert owns_flag(arg)


@pytest.mark.parametrize("arg", ["--cuda-graph-max-bs-decode", "64", "--enable-torch-compile", "-", "--"])
def test_other_args_pass(arg: str) -> None:
    assert not owns_flag(arg)


def test_every_owned_flag_is_caught() -> None:
    assert all(owns_flag(flag) for flag in OWNED_FLAGS)


def test_object_metadata_is_checked() -> None:
    doc = {
        "apiVersion": "specserve.io/v1alpha1",
        "kind": "SpecServe",
        "metadata": {"name": "Bad_Name"},
        "spec": MINIMAL,
    }
    with pytest.raises(InvalidSpecServe) as info:
        parse_object(doc)
    assert info.value.errors[0].field == "metadata.name"
    assert "RFC 1123" in info.value.errors[0].message


@pytest.mark.parametrize("raw", [None, [], "text", 3])
def test_non_mapping_spec_is_rejected_clearly(raw: Any) -> None:
    with pytest.raises(InvalidSpecServe) as info:
        parse_spec(raw)
    assert "spec.model.path" in str(info.value)


@pytest.mark.parametrize(
    "patch",
    [
        {"speculative.numSteps": 7},  # SGLang's built-in config at its largest candidate
        {"switching.crossoverConcurrency": 16},  # the operator's config: candidates numSteps and 0
        {"speculative.adaptiveConfig": {"1": [1, 3], "16": [0]}},  # numSteps 3 is the largest candidate
    ],
)
def test_adaptive_on_0_5_17_is_accepted_when_the_launch_steps_cover_every_candidate(patch: dict[str, Any]) -> None:
    spec = parse_spec(with_({"strategy": "Adaptive", "engine.sglangVersion": "0.5.17", **patch}))
    assert spec.engine.sglang_version == "0.5.17"


@pytest.mark.parametrize("tokens", [4, 12])
def test_ngram_takes_any_draft_token_count(tokens: int) -> None:
    """NGRAM has no draft steps (SGLang runs it with numSteps 0 and its own tree width), so the EAGLE chain rule
    numDraftTokens == numSteps + 1 does not bind it: 12 is SGLang's own NGRAM default, 4 the loop's pool."""
    spec = parse_spec(with_({"speculative": {"algorithm": "NGRAM", "numDraftTokens": tokens}}))
    assert spec.speculative.draft_tokens() == tokens

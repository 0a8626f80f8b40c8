"""The front door for names and files: a SpecServe's name yields valid names for every object it owns (a Service
name is an RFC 1035 label, so no leading digit), the CEL rule and its Python twin agree, and YAML files are read
as strictly as kubectl reads them (a duplicate key is an error naming the key and the line)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy.adapter import json_to_cel

from specserve.api import yamlfile
from specserve.api.crd import crd
from specserve.api.k8s_rules import object_name_problem
from specserve.api.models import Strategy
from specserve.api.rules import NAME_RULES
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.cli import main
from specserve.render import render
from specserve_kubefake import SPECSERVES, ApiError, FakeApiServer
from specserve_tools.bench.specyaml import SpecFileError, spec_doc_from_text, update_spec_text
from tests.conftest import EXAMPLES, load_yaml

NAMES = ["1model", "model-1", "a", "a-", "-a", "Model", "m" * 52, "m" * 53, "a.b", "a_b", "x9", "9", "model--2"]


def _doc(name: str, example: Path = EXAMPLES[0], strategy: Strategy | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(load_yaml(example))
    doc["metadata"] = {"name": name, "namespace": "llm"}
    if strategy is not None:
        doc["spec"]["strategy"] = strategy.value
    return doc


def _everything(doc: dict[str, Any]) -> dict[str, Any]:
    """Every optional child rendered: PodMonitor, NetworkPolicy, PDBs (2 replicas per pool)."""
    spec = doc["spec"]
    spec["monitoring"] = {**spec.get("monitoring", {}), "podMonitor": True}
    spec["networkPolicy"] = {"enabled": True}
    spec["pools"] = {role: {**(spec.get("pools") or {}).get(role, {}), "replicas": 2}
                     for role in ("speculative", "baseline")}  # fmt: skip
    return doc


@pytest.mark.parametrize("rule", NAME_RULES, ids=lambda r: r.cel)
def test_name_cel_rules_agree_with_their_python_twins(rule: Any) -> None:
    env = celpy.Environment()
    program = env.program(env.compile(rule.cel))
    outcomes = set()
    for name in NAMES:
        cel_ok = bool(program.evaluate({"self": json_to_cel({"metadata": {"name": name}})}))
        assert cel_ok == rule.holds(name), f"{rule.cel}: CEL {cel_ok} for {name!r}"
        outcomes.add(cel_ok)
    assert outcomes == {True, False}


def test_the_crd_carries_the_name_rules() -> None:
    root = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert {v["rule"] for v in root["x-kubernetes-validations"]} == {r.cel for r in NAME_RULES}


@pytest.mark.parametrize("name", ["1model", "9"])
def test_a_leading_digit_is_refused_naming_the_field_and_the_fix(name: str) -> None:
    with pytest.raises(InvalidSpecServe) as info:
        parse_object(_doc(name))
    (error,) = info.value.errors
    assert error.field == "metadata.name"
    assert "start with a lowercase letter" in error.message and "rename" in error.message


def test_names_that_start_with_a_letter_pass() -> None:
    for name in ("model-1", "a", "m" * 52, "model--2"):
        assert parse_object(_doc(name)).metadata.name == name


def test_the_api_server_refuses_a_leading_digit_with_the_crd_rule() -> None:
    api = FakeApiServer()  # validates custom resources with the CRD's CEL rules
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm"}})
    with pytest.raises(ApiError) as info:
        api.create(_doc("1model"))
    assert info.value.status == 422 and "metadata.name" in info.value.message
    assert api.get(SPECSERVES, "llm", "1model") is None
    assert api.create(_doc("model-1"))["metadata"]["name"] == "model-1"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("strategy", list(Strategy))
@pytest.mark.parametrize("name", ["m" * 52, "a", "a1", "a-1"])
def test_every_derived_name_is_valid_for_its_kind(example: Path, strategy: Strategy, name: str) -> None:
    try:
        obj = parse_object(_everything(_doc(name, example, strategy)))
    except InvalidSpecServe:
        pytest.skip(f"{example.stem} does not take strategy {strategy}")
    manifests = render(obj)
    assert {"Deployment", "Service", "PodMonitor", "NetworkPolicy", "PodDisruptionBudget"} <= {
        m["kind"] for m in manifests
    }
    for manifest in manifests:
        kind, derived = manifest["kind"], manifest["metadata"]["name"]
        assert object_name_problem(kind, derived) is None, (kind, derived)
        if kind == "HTTPRoute":
            for rule in manifest["spec"]["rules"]:
                for ref in rule["backendRefs"]:
                    assert object_name_problem("Service", ref["name"]) is None, ref
        if kind == "Deployment":  # the pods' hostnames: <name>-<10>-<5> is cut to 63 by the kubelet, fine
            volumes = manifest["spec"]["template"]["spec"].get("volumes") or []
            for volume in volumes:
                ref = (volume.get("configMap") or {}).get("name")
                if ref is not None:
                    assert object_name_problem("ConfigMap", ref) is None, ref


def test_object_name_problem_by_kind() -> None:
    assert object_name_problem("Service", "1model-spec") is not None
    assert object_name_problem("Deployment", "1model-spec") is None  # a subdomain may start with a digit
    assert object_name_problem("Service", "m" * 64) is not None
    assert object_name_problem("ConfigMap", "UPPER") is not None


# --------------------------------------------------------------------------------------------- strict YAML

DUPLICATE = """\
apiVersion: specserve.io/v1alpha1
kind: SpecServe
metadata:
  name: kimi
spec:
  model:
    path: /models/kimi
  strategy: TrafficSplit
  strategy: Restart
"""


def test_a_duplicate_key_is_an_error_naming_the_key_and_both_lines() -> None:
    with pytest.raises(yamlfile.DuplicateKeyError) as info:
        yamlfile.load_all(DUPLICATE)
    assert (info.value.key, info.value.line, info.value.first_line) == ("strategy", 9, 8)
    assert 'duplicate key "strategy" on line 9 (first on line 8)' in str(info.value)
    assert isinstance(info.value, yaml.YAMLError)  # callers that report bad YAML report it


def test_the_strict_loader_still_reads_what_kubectl_reads() -> None:
    text = "a: 1\n---\n---\nb: &x {c: 2}\nd:\n  <<: *x\n  e: 3\n"
    assert yamlfile.load_all(text) == [{"a": 1}, {"b": {"c": 2}, "d": {"c": 2, "e": 3}}]
    assert yamlfile.load_all("a: {b: 1}\nc: {b: 2}\n") == [{"a": {"b": 1}, "c": {"b": 2}}]  # same key, other maps


def test_specserve_render_refuses_a_duplicate_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(DUPLICATE)
    assert main(["render", str(path)]) == 2
    out, err = capsys.readouterr()
    assert 'duplicate key "strategy" on line 9' in err and out == ""


def test_calibrate_write_refuses_a_duplicate_key() -> None:
    with pytest.raises(SpecFileError, match=r'line 9: found duplicate key "strategy"'):
        spec_doc_from_text(DUPLICATE, "spec.yaml")
    with pytest.raises(SpecFileError, match=r"line 9: .*duplicate key.*remove one"):
        update_spec_text(DUPLICATE, None, "spec.yaml")  # type: ignore[arg-type]

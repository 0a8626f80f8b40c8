"""examples/gitops: the kustomize overlays build and yield valid SpecServes; the Argo CD and Flux manifests
have the expected kinds, point at things that exist, and pass values the chart accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from specserve.api.crd import crd
from specserve.api.models import KIND
from specserve.api.validation import parse_object
from specserve.kube.client import FIELD_MANAGER
from tests.chart.chartlib import CHART, REPO, Obj, parse_docs, run, tool, validate_custom

GITOPS = REPO / "examples" / "gitops"
OVERLAYS = sorted(p.name for p in (GITOPS / "kustomize" / "overlays").iterdir() if p.is_dir())


def kustomize(path: Path) -> list[Obj]:
    return parse_docs(run([tool("kubectl"), "kustomize", str(path)]).stdout)


def load(relative: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all((GITOPS / relative).read_text(encoding="utf-8")) if d]


def values_validator() -> jsonschema.Draft7Validator:
    schema: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    return jsonschema.Draft7Validator(schema)


def chart_defaults_with(overrides: dict[str, Any]) -> dict[str, Any]:
    """Helm merges user values over values.yaml; the schema validates the merged result."""

    def merge(base: Any, over: Any) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            return {**base, **{k: merge(base.get(k), v) for k, v in over.items()}}
        return over

    defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    merged: dict[str, Any] = merge(defaults, overrides)
    return merged


def test_overlays_exist() -> None:
    assert OVERLAYS == ["production", "staging"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_builds_valid_specserves(overlay: str) -> None:
    objs = kustomize(GITOPS / "kustomize" / "overlays" / overlay)
    assert [o["kind"] for o in objs] == [KIND]
    definition = crd()
    for obj in objs:
        assert validate_custom(obj, definition) == []
        parse_object(obj)
        assert obj["metadata"]["namespace"] == f"llm-{'prod' if overlay == 'production' else overlay}"
        assert "status" not in obj


def test_production_overlay_patches() -> None:
    (prod,) = kustomize(GITOPS / "kustomize" / "overlays" / "production")
    (base,) = kustomize(GITOPS / "kustomize" / "base")
    assert base["spec"]["pools"]["speculative"]["replicas"] == 1
    assert prod["spec"]["pools"] == {"speculative": {"replicas": 4}, "baseline": {"replicas": 4}}
    assert prod["spec"]["routing"]["hostnames"] == ["llama.prod.example.com"]
    assert prod["metadata"]["labels"]["environment"] == "production"
    assert prod["metadata"]["name"] == base["metadata"]["name"]


def test_staging_overlay_is_advisory() -> None:
    (stg,) = kustomize(GITOPS / "kustomize" / "overlays" / "staging")
    assert stg["spec"]["switching"]["advisory"] is True
    assert stg["metadata"]["name"] == "llama31-8b-stg"
    assert parse_object(stg).spec.switching.advisory


def test_no_operator_owned_kinds_in_git() -> None:
    """Git holds SpecServes only: the operator owns the HTTPRoute and the other children."""
    for path in GITOPS.rglob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc:
                assert doc.get("kind") not in ("HTTPRoute", "Deployment", "PodMonitor"), path


def test_argocd_applications() -> None:
    (operator,) = load("argocd/specserve-operator.yaml")
    (workloads,) = load("argocd/specserve-workloads.yaml")
    for app in (operator, workloads):
        assert (app["apiVersion"], app["kind"]) == ("argoproj.io/v1alpha1", "Application")
        assert (REPO / app["spec"]["source"]["path"]).is_dir()
        assert "ServerSideApply=true" in app["spec"]["syncPolicy"]["syncOptions"]
    assert operator["spec"]["source"]["path"] == "charts/specserve"
    values_validator().validate(chart_defaults_with(operator["spec"]["source"]["helm"]["valuesObject"]))
    ignored = {(d["group"], d["kind"]): d for d in workloads["spec"]["ignoreDifferences"]}
    assert ignored[("specserve.io", "SpecServe")]["jsonPointers"] == ["/status"]
    route = ignored[("gateway.networking.k8s.io", "HTTPRoute")]
    assert route["managedFieldsManagers"] == [FIELD_MANAGER]
    assert ".spec.rules[].backendRefs[].weight" in route["jqPathExpressions"]
    assert "RespectIgnoreDifferences=true" in workloads["spec"]["syncPolicy"]["syncOptions"]


def test_field_manager_matches_the_operator() -> None:
    (workloads,) = load("argocd/specserve-workloads.yaml")
    managers = [m for d in workloads["spec"]["ignoreDifferences"] for m in d.get("managedFieldsManagers", [])]
    assert managers == [FIELD_MANAGER]


def test_flux_manifests() -> None:
    source, release = load("flux/specserve-operator.yaml")
    assert (source["apiVersion"], source["kind"]) == ("source.toolkit.fluxcd.io/v1", "OCIRepository")
    assert (release["apiVersion"], release["kind"]) == ("helm.toolkit.fluxcd.io/v2", "HelmRelease")
    ref = release["spec"]["chartRef"]
    assert (ref["kind"], ref["name"], ref["namespace"]) == (
        "OCIRepository",
        source["metadata"]["name"],
        source["metadata"]["namespace"],
    )
    assert source["spec"]["url"].endswith("/specserve")
    values_validator().validate(chart_defaults_with(release["spec"]["values"]))

    git, kustomization = load("flux/specserve-workloads.yaml")
    assert (git["apiVersion"], git["kind"]) == ("source.toolkit.fluxcd.io/v1", "GitRepository")
    assert (kustomization["apiVersion"], kustomization["kind"]) == ("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
    assert kustomization["spec"]["sourceRef"] == {"kind": "GitRepository", "name": git["metadata"]["name"]}
    assert (REPO / kustomization["spec"]["path"]).is_dir()


def test_values_check_is_not_vacuous() -> None:
    with pytest.raises(jsonschema.ValidationError):
        values_validator().validate(chart_defaults_with({"watch": {"allNamespace": True}}))

"""Helpers for the delivery tests: finding kubectl/helm/hadolint, rendering the chart, and validating
objects against the official Kubernetes schemas and against a CRD's openAPIV3Schema."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "specserve"
KUBE_VERSION = "1.35.0"  # kubernetes-validate's bundled schema version the objects must satisfy

Obj = dict[str, Any]

# Kinds served by Kubernetes itself (validated with kubernetes-validate); everything else is custom.
BUILTIN_GROUPS = {"", "v1", "apps", "rbac.authorization.k8s.io", "apiextensions.k8s.io", "policy", "batch"}


def tool(name: str) -> str:
    """Path of kubectl/helm (from PATH or .tools/bin, installing them there when missing) or hadolint."""
    found = shutil.which(name)
    if found:
        return found
    for candidate in (REPO / ".tools" / "bin" / name, REPO / ".venv" / "bin" / name):
        if candidate.exists():
            return str(candidate)
    if name in ("kubectl", "helm"):
        subprocess.run(
            ["bash", str(REPO / "scripts" / "install-kube-tools.sh"), str(REPO / ".tools" / "bin")], check=True
        )
        return str(REPO / ".tools" / "bin" / name)
    raise FileNotFoundError(f"{name} is not installed (scripts/test.sh installs it)")


def run(args: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HELM_CACHE_HOME": "/tmp/specserve-helm/cache",
        "HELM_CONFIG_HOME": "/tmp/specserve-helm/config",
        "HELM_DATA_HOME": "/tmp/specserve-helm/data",
    }
    proc = subprocess.run(args, check=False, capture_output=True, text=True, env=env, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def set_args(values: Mapping[str, str] | None) -> list[str]:
    out: list[str] = []
    for key, value in (values or {}).items():
        out += ["--set", f"{key}={value}"]
    return out


def helm_template(
    values: Mapping[str, str] | None = None,
    api_versions: Iterable[str] = (),
    release: str = "ops",
    namespace: str = "specserve-system",
    extra: Iterable[str] = (),
) -> list[Obj]:
    args = [tool("helm"), "template", release, str(CHART), "--namespace", namespace, *set_args(values)]
    for api in api_versions:
        args += ["--api-versions", api]
    args += list(extra)
    return parse_docs(run(args).stdout)


def parse_docs(text: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all(text) if d]


def group_of(obj: Mapping[str, Any]) -> str:
    api_version = str(obj["apiVersion"])
    return api_version.split("/", maxsplit=1)[0] if "/" in api_version else ""


def is_builtin(obj: Mapping[str, Any]) -> bool:
    return group_of(obj) in BUILTIN_GROUPS


def validate_builtin(obj: Obj) -> None:
    """Raise unless `obj` is valid against the official schema of Kubernetes KUBE_VERSION (strict: no unknown
    fields)."""
    kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


def _k8s_to_jsonschema(node: Any) -> Any:
    """OpenAPI v3 (Kubernetes structural subset) -> JSON Schema draft 4, which shares its boolean
    exclusiveMinimum/exclusiveMaximum. x-kubernetes-* keys are ignored except preserve-unknown-fields, and
    objects with properties reject unknown fields, as kubectl's strict field validation does."""
    if isinstance(node, list):
        return [_k8s_to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _k8s_to_jsonschema(v) for k, v in node.items() if not k.startswith("x-kubernetes-")}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if (
        node.get("type") == "object"
        and "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    out.pop("format", None)  # int32/int64/date-time etc. are not draft-4 formats worth enforcing here
    out.pop("nullable", None)
    return out


def crd_validator(crd: Mapping[str, Any], version: str | None = None) -> jsonschema.Draft4Validator:
    versions = crd["spec"]["versions"]
    chosen = next(v for v in versions if version is None or v["name"] == version)
    schema = _k8s_to_jsonschema(copy.deepcopy(chosen["schema"]["openAPIV3Schema"]))
    return jsonschema.Draft4Validator(schema)


def validate_custom(obj: Mapping[str, Any], crd: Mapping[str, Any]) -> list[str]:
    """Errors of `obj` against the CRD (group/kind/version and its openAPIV3Schema); empty when valid."""
    group, _, version = str(obj["apiVersion"]).partition("/")
    errors: list[str] = []
    if group != crd["spec"]["group"] or obj.get("kind") != crd["spec"]["names"]["kind"]:
        return [f"{obj['apiVersion']} {obj.get('kind')} is not served by {crd['metadata']['name']}"]
    if version not in [v["name"] for v in crd["spec"]["versions"] if v.get("served")]:
        return [f"version {version} is not served"]
    for err in crd_validator(crd, version).iter_errors(dict(obj)):
        errors.append(f"{'/'.join(str(p) for p in err.absolute_path)}: {err.message}")
    return errors

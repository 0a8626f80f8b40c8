"""The Helm chart: lint, render in every supported shape, and check each object against the official
Kubernetes schemas (built-in kinds) or the SpecServe CRD (custom objects)."""

from __future__ import annotations

import argparse
import functools
import json
from collections import Counter
from typing import Any

import pytest

from specserve.api.crd import crd as generated_crd
from specserve.api.models import API_VERSION, KIND
from specserve.api.validation import parse_object
from specserve.commands import run as run_command
from tests.chart.chartlib import (
    CHART,
    Obj,
    helm_template,
    is_builtin,
    run,
    set_args,
    tool,
    validate_builtin,
    validate_custom,
)

SERVICE_MONITOR_API = "monitoring.coreos.com/v1/ServiceMonitor"

NAMESPACED = {"watch.allNamespaces": "false", "watch.namespaces": "{llm,llm-canary}"}

# name -> (--set values, --api-versions)
SCENARIOS: dict[str, tuple[dict[str, str], list[str]]] = {
    "default": ({}, []),
    "namespaced": (NAMESPACED, []),
    "service-monitor": ({"metrics.serviceMonitor.enabled": "true"}, [SERVICE_MONITOR_API]),
    "crds-disabled": ({"crds.enabled": "false"}, []),
    "prometheus-auth": ({"prometheusAuth.secretName": "prom-token", "prometheusAuth.key": "bearer"}, []),
    "crds-not-kept": ({"crds.keep": "false"}, []),
    "example-adaptive": ({"example.enabled": "true"}, []),
    "example-traffic-split": ({"example.enabled": "true", "example.strategy": "TrafficSplit"}, []),
    "example-restart": (
        {"example.enabled": "true", "example.strategy": "Restart", "example.namespace": "llm"},
        [],
    ),
    "everything-non-default": (
        {
            **NAMESPACED,
            "metrics.serviceMonitor.enabled": "true",
            "metrics.serviceMonitor.labels.release": "kube-prometheus-stack",
            "example.enabled": "true",
            "crds.keep": "false",
            "logLevel": "debug",
            "prometheusUrl": "http://prometheus.monitoring:9090",
            "image.repository": "registry.example.com/specserve-operator",
            "image.tag": "0.1.0-rc1",
            "image.pullPolicy": "Always",
            "imagePullSecrets[0].name": "regcred",
            "serviceAccount.name": "specserve-op",
            "serviceAccount.annotations.team": "ml",
            "podLabels.team": "ml",
            "podAnnotations.note": "x",
            "priorityClassName": "system-cluster-critical",
            "nodeSelector.kubernetes\\.io/os": "linux",
            "tolerations[0].key": "dedicated",
            "tolerations[0].operator": "Equal",
            "tolerations[0].value": "ops",
            "tolerations[0].effect": "NoSchedule",
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions[0].key": "kubernetes.io/arch",
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions[0].operator": "In",
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions[0].values[0]": "amd64",
            "podSecurityContext.runAsUser": "10001",
            "podSecurityContext.fsGroupChangePolicy": "OnRootMismatch",
            "resources.limits.cpu": "1",
            "resources.requests.memory": "256Mi",
            "extraArgs[0]": "--some-future-flag=1",
            "metrics.port": "9100",
            "health.port": "8081",
        },
        [SERVICE_MONITOR_API],
    ),
}


@functools.cache
def _rendered(name: str) -> str:
    values, apis = SCENARIOS[name]
    return json.dumps(helm_template(values, apis))


def render(name: str) -> list[Obj]:
    """The scenario's objects (rendered once per session; each call returns a fresh copy)."""
    objs: list[Obj] = json.loads(_rendered(name))
    return objs


def only(objs: list[Obj], kind: str) -> Obj:
    found = [o for o in objs if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def container(objs: list[Obj]) -> dict[str, Any]:
    containers = only(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    result: dict[str, Any] = containers[0]
    return result


# --------------------------------------------------------------------------------------------------- lint


@pytest.mark.parametrize("name", ["default", "namespaced", "everything-non-default"])
def test_helm_lint_strict(name: str) -> None:
    values, _ = SCENARIOS[name]  # `helm lint` has no --api-versions; the render tests cover the ServiceMonitor
    proc = run([tool("helm"), "lint", "--strict", str(CHART), *set_args(values)])
    assert "0 chart(s) failed" in proc.stdout


# ---------------------------------------------------------------------------------- schema validity


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_object_is_valid(name: str) -> None:
    objs = render(name)
    assert objs, "nothing rendered"
    crd = generated_crd()  # what the chart installs (test_chart_crd checks they are equal)
    for obj in objs:
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        if is_builtin(obj):
            validate_builtin(obj)  # raises kubernetes_validate.ValidationError with the path
        elif obj["kind"] == KIND:
            assert validate_custom(obj, crd) == [], where
            parse_object(obj)  # the operator's own parsing and cross-field rules (the CRD's CEL rules)
        elif obj["kind"] == "ServiceMonitor":
            assert obj["apiVersion"] == "monitoring.coreos.com/v1"
            assert obj["spec"]["endpoints"] and obj["spec"]["selector"]["matchLabels"], where
        else:
            pytest.fail(f"unexpected custom object {obj['apiVersion']} {where}")


def test_custom_validation_catches_bad_specserve() -> None:
    """The CRD-schema check is not vacuous: a wrong type, an unknown field and a bad enum are each reported."""
    crd = generated_crd()  # what the chart installs (test_chart_crd checks they are equal)
    good = only(render("example-adaptive"), KIND)
    assert validate_custom(good, crd) == []
    bad_type = json.loads(json.dumps(good))
    bad_type["spec"]["pools"]["speculative"]["replicas"] = "two"
    unknown = json.loads(json.dumps(good))
    unknown["spec"]["engine"]["tensorParalelSize"] = 1
    bad_enum = json.loads(json.dumps(good))
    bad_enum["spec"]["strategy"] = "Sometimes"
    zero_crossover = json.loads(json.dumps(good))  # gt=0: an exclusiveMinimum boolean in the CRD
    zero_crossover["spec"]["switching"]["crossoverConcurrency"] = 0
    for bad in (bad_type, unknown, bad_enum, zero_crossover):
        assert validate_custom(bad, crd), bad["spec"]


def test_default_render_kinds() -> None:
    kinds = Counter(o["kind"] for o in render("default"))
    assert kinds == Counter(
        {
            "ServiceAccount": 1,
            "CustomResourceDefinition": 1,
            "ClusterRole": 3,  # the operator's, and -view/-edit for users (aggregated)
            "ClusterRoleBinding": 1,
            "Role": 1,  # leader election, in the release namespace
            "RoleBinding": 1,
            "Service": 1,
            "Deployment": 1,
        }
    )


def test_namespaced_render_kinds() -> None:
    kinds = Counter(o["kind"] for o in render("namespaced"))
    assert kinds["Role"] == 3 and kinds["RoleBinding"] == 3  # + leader election in the release namespace
    assert kinds["ClusterRole"] == 3 and kinds["ClusterRoleBinding"] == 1  # + the users' -view and -edit
    roles = {o["metadata"]["namespace"] for o in render("namespaced") if o["kind"] in ("Role", "RoleBinding")}
    assert roles == {"llm", "llm-canary", "specserve-system"}


# ------------------------------------------------------------------------------------- the Deployment


def test_deployment_is_hardened() -> None:
    objs = render("default")
    pod = only(objs, "Deployment")["spec"]["template"]["spec"]
    c = container(objs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert "add" not in sc["capabilities"]
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    assert c["resources"]["limits"]["memory"]
    # A writable /tmp on an emptyDir (the root filesystem is read-only).
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert only(objs, "Deployment")["spec"]["replicas"] == 1
    # Replicas may overlap (only the Lease holder acts): never wait on a pod stuck Terminating.
    assert only(objs, "Deployment")["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }


@pytest.mark.parametrize("name", ["default", "everything-non-default"])
def test_liveness_probe_targets_the_operators_healthz(name: str) -> None:
    c = container(render(name))
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    probe = c["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz"
    liveness_arg = next(a for a in c["args"] if a.startswith("--liveness="))
    assert liveness_arg == f"--liveness=http://0.0.0.0:{ports[probe['port']]}/healthz"
    metrics_arg = next(a for a in c["args"] if a.startswith("--metrics-port="))
    assert metrics_arg == f"--metrics-port={ports['metrics']}"


def test_operator_args_all_namespaces() -> None:
    c = container(render("default"))
    assert c["args"] == [
        "run",
        "--liveness=http://0.0.0.0:8080/healthz",
        "--metrics-port=9090",
        "--log-level=info",
        "--prometheus-url=http://prometheus-operated.monitoring.svc:9090",
        "--leader-elect",
        "--leader-election-namespace=specserve-system",
        "--leader-election-name=ops-specserve",
        "--lease-seconds=15",
        "--max-concurrent-reconciles=8",
        "--all-namespaces",
    ]
    assert c["image"] == "ghcr.io/specserve/specserve-operator:0.1.0"


def test_operator_args_namespace_list() -> None:
    c = container(render("everything-non-default"))
    assert c["args"] == [
        "run",
        "--liveness=http://0.0.0.0:8081/healthz",
        "--metrics-port=9100",
        "--log-level=debug",
        "--prometheus-url=http://prometheus.monitoring:9090",
        "--leader-elect",
        "--leader-election-namespace=specserve-system",
        "--leader-election-name=ops-specserve",
        "--lease-seconds=15",
        "--max-concurrent-reconciles=8",
        "--namespace=llm",
        "--namespace=llm-canary",
        "--some-future-flag=1",
    ]
    assert c["image"] == "registry.example.com/specserve-operator:0.1.0-rc1"
    assert c["imagePullPolicy"] == "Always"


def test_namespace_list_mode_needs_namespaces() -> None:
    args = [tool("helm"), "template", "ops", str(CHART), "--set", "watch.allNamespaces=false"]
    proc = run(args, check=False)
    assert proc.returncode != 0
    assert "watch.namespaces" in proc.stderr


# ---------------------------------------------------------------------------- Service / ServiceMonitor


@pytest.mark.parametrize("name", ["default", "service-monitor", "everything-non-default"])
def test_metrics_service_selects_the_operator_pod(name: str) -> None:
    objs = render(name)
    svc = only(objs, "Service")
    pod_labels = only(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    port_names = {p["name"] for p in container(objs)["ports"]}
    assert all(p["targetPort"] in port_names for p in svc["spec"]["ports"])
    if name != "default":
        monitor = only(objs, "ServiceMonitor")
        assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in svc["spec"]["ports"]}
        assert monitor["spec"]["namespaceSelector"]["matchNames"] == [svc["metadata"]["namespace"]]


def test_service_monitor_needs_the_api_and_the_value() -> None:
    assert not [o for o in helm_template({"metrics.serviceMonitor.enabled": "true"}) if o["kind"] == "ServiceMonitor"]
    assert not [o for o in helm_template({}, [SERVICE_MONITOR_API]) if o["kind"] == "ServiceMonitor"]
    labelled = only(render("everything-non-default"), "ServiceMonitor")
    assert labelled["metadata"]["labels"]["release"] == "kube-prometheus-stack"


# ------------------------------------------------------------------------------------------- example


@pytest.mark.parametrize("name", ["example-adaptive", "example-traffic-split", "example-restart"])
def test_example_specserve(name: str) -> None:
    objs = render(name)
    example = only(objs, KIND)
    assert example["apiVersion"] == API_VERSION
    values, _ = SCENARIOS[name]
    assert example["spec"]["strategy"] == values.get("example.strategy", "Adaptive")
    assert example["metadata"]["namespace"] == values.get("example.namespace", "specserve-system")
    # Created after the CRD: a post-install/post-upgrade hook.
    assert "post-install" in example["metadata"]["annotations"]["helm.sh/hook"]
    parsed = parse_object(example)
    assert parsed.spec.strategy.value == example["spec"]["strategy"]


def test_example_off_by_default() -> None:
    assert not [o for o in render("default") if o["kind"] == KIND]


# -------------------------------------------------------------------------------------------- values


def test_values_schema_rejects_unknown_keys() -> None:
    for key in (
        "bogus",
        "image.bogus",
        "watch.namespace",
        "metrics.serviceMonitor.bogus",
        "crds.install",
        "podSecurityContext.runAsUsr",
        "example.replicas",
    ):
        proc = run([tool("helm"), "template", "ops", str(CHART), "--set", f"{key}=1"], check=False)
        assert proc.returncode != 0, key
        assert "additional properties" in proc.stderr, proc.stderr


def test_values_schema_rejects_bad_values() -> None:
    for key, value in (
        ("logLevel", "loud"),
        ("image.pullPolicy", "Sometimes"),
        ("watch.namespaces[0]", "Not_A_Namespace"),
        ("prometheusUrl", "prometheus:9090"),
        ("example.strategy", "Sometimes"),
    ):
        proc = run([tool("helm"), "template", "ops", str(CHART), "--set", f"{key}={value}"], check=False)
        assert proc.returncode != 0, (key, value)


def _open_objects(node: Any, path: str = "") -> list[str]:
    """Object nodes of a JSON schema that accept arbitrary keys."""
    found: list[str] = []
    if not isinstance(node, dict):
        return found
    if node.get("type") == "object" and "additionalProperties" not in node:
        found.append(path or "/")
    for key, child in node.get("properties", {}).items():
        found += _open_objects(child, f"{path}/{key}")
    if isinstance(node.get("additionalProperties"), dict):
        found += _open_objects(node["additionalProperties"], f"{path}/*")
    if isinstance(node.get("items"), dict):
        found += _open_objects(node["items"], f"{path}[]")
    return found


def test_values_schema_closed_at_every_level() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    # Only Helm's own `global` and the Kubernetes affinity and spread terms (passed through verbatim and
    # validated by the API server; the render tests validate them against the official schema) are open.
    assert sorted(_open_objects(schema)) == [
        "/affinity/nodeAffinity",
        "/affinity/podAffinity",
        "/affinity/podAntiAffinity",
        "/global",
        "/topologySpreadConstraints[]",
    ]


@pytest.mark.parametrize("name", ["default", "namespaced"])
def test_args_parse_with_the_real_specserve_run(name: str) -> None:
    """The chart's arguments are accepted by `specserve run` and mean what the chart intends."""
    c = container(render(name))
    assert c["args"][0] == "run"
    parser = argparse.ArgumentParser(prog="specserve run", exit_on_error=False)
    run_command.add_arguments(parser)
    args = parser.parse_args(c["args"][1:])
    config = run_command.config_from(args)
    assert config.liveness_endpoint == "http://0.0.0.0:8080/healthz"
    assert config.metrics_port == 9090
    assert config.prometheus_url == "http://prometheus-operated.monitoring.svc:9090"
    assert args.log_level == "info"
    assert config.leader_election is not None and config.leader_election.namespace == "specserve-system"
    assert config.leader_election.name == "ops-specserve" and config.max_concurrent_reconciles == 8
    if name == "namespaced":
        assert config.namespaces == ("llm", "llm-canary")
    else:
        assert args.all_namespaces and config.namespaces == ()


def notes(*values: str) -> str:
    args = [tool("helm"), "install", "ops", str(CHART), "--namespace", "specserve-system", "--dry-run=client"]
    for value in values:
        args += ["--set", value]
    out = run(args).stdout
    assert "NOTES:" in out
    return out.split("NOTES:", 1)[1]


def test_notes_describe_the_install() -> None:
    default = notes()
    assert "Watching: all namespaces" in default
    assert "kept on uninstall" in default
    assert "kubectl -n specserve-system rollout status deployment/ops-specserve" in default
    listed = notes(
        "watch.allNamespaces=false", "watch.namespaces={llm,llm-canary}", "crds.enabled=false",
        "metrics.serviceMonitor.enabled=true",
    )  # fmt: skip
    assert "Watching: llm, llm-canary" in listed
    assert "NOT managed by this release" in listed
    assert "no ServiceMonitor was created" in listed


def test_prometheus_credentials_come_from_a_mounted_secret() -> None:
    """prometheusAuth mounts the Secret read-only and hands its file to `specserve run`, which reads the token
    from it (no credentials in any URL, none in a SpecServe); without the value nothing is mounted or passed."""
    objs = render("prometheus-auth")
    c = container(objs)
    token = "/var/run/secrets/specserve/prometheus/bearer"
    assert f"--prometheus-bearer-token-file={token}" in c["args"]
    assert {"name": "prometheus-auth", "mountPath": "/var/run/secrets/specserve/prometheus", "readOnly": True} in c[
        "volumeMounts"
    ]
    volumes = only(objs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "prometheus-auth",
        "secret": {"secretName": "prom-token", "items": [{"key": "bearer", "path": "bearer"}]},
    } in volumes
    parser = argparse.ArgumentParser(prog="specserve run", exit_on_error=False)
    run_command.add_arguments(parser)
    assert run_command.config_from(parser.parse_args(c["args"][1:])).prometheus_token_file == token
    default = container(render("default"))
    assert not any("bearer" in a for a in default["args"])
    assert all(m["name"] != "prometheus-auth" for m in default["volumeMounts"])

"""What a cluster admin expects of the chart on day 2: RBAC for the plugin's users (aggregated view/edit roles), a
PodDisruptionBudget and spreading with more than one replica, a readiness probe, a NetworkPolicy guarding the
unauthenticated metrics endpoint, and operator pods that a SpecServe's NetworkPolicy admits (metrics.source Direct)."""

from __future__ import annotations

from typing import Any

import pytest

from specserve.render.manifests import OPERATOR_POD_LABELS
from tests.chart.chartlib import CHART, Obj, helm_template, is_builtin, run, set_args, tool, validate_builtin

SELECTOR = {"app.kubernetes.io/name": "specserve", "app.kubernetes.io/instance": "ops"}
OPERATOR = {**SELECTOR, "app.kubernetes.io/component": "operator"}


def kinds(objs: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objs if o["kind"] == kind]


def pod_of(objs: list[Obj]) -> dict[str, Any]:
    (deployment,) = kinds(objs, "Deployment")
    pod: dict[str, Any] = deployment["spec"]["template"]
    return pod


def allows(role: Obj, resource: str, verb: str) -> bool:
    return any(
        "specserve.io" in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in role["rules"]
    )


def test_view_and_edit_roles_aggregate_into_the_builtin_user_roles() -> None:
    objs = helm_template({})
    roles = {o["metadata"]["name"]: o for o in kinds(objs, "ClusterRole")}
    view, edit = roles["ops-specserve-view"], roles["ops-specserve-edit"]
    for label in ("view", "edit", "admin"):
        assert view["metadata"]["labels"][f"rbac.authorization.k8s.io/aggregate-to-{label}"] == "true"
    assert "rbac.authorization.k8s.io/aggregate-to-view" not in edit["metadata"]["labels"]  # view stays read-only
    # kubectl specserve status/explain/history (get, list; watch for -w) and the status subresource.
    assert all(allows(view, r, v) for r in ("specserves", "specserves/status") for v in ("get", "list", "watch"))
    assert not any(allows(view, "specserves", v) for v in ("create", "update", "patch", "delete"))
    # pause/resume patch the annotation; apply and delete for whoever edits the namespace. Never the status.
    assert all(allows(edit, "specserves", v) for v in ("create", "update", "patch", "delete"))
    assert not allows(edit, "specserves/status", "patch")
    # Bound to nobody by the chart: aggregation does the binding.
    bound = {b["roleRef"]["name"] for b in objs if b["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    assert not {"ops-specserve-view", "ops-specserve-edit"} & bound
    off = helm_template({"rbac.aggregatedRoles": "false"})
    assert not [o for o in kinds(off, "ClusterRole") if o["metadata"]["name"].endswith(("-view", "-edit"))]


def test_one_replica_has_no_pdb_and_no_spreading() -> None:
    objs = helm_template({})
    assert kinds(objs, "PodDisruptionBudget") == []
    spec = pod_of(objs)["spec"]
    assert "affinity" not in spec and "topologySpreadConstraints" not in spec


def test_replicas_get_a_pdb_and_spread_over_nodes_and_zones() -> None:
    objs = helm_template({"replicaCount": "3"})
    (pdb,) = kinds(objs, "PodDisruptionBudget")
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": OPERATOR}}
    spec = pod_of(objs)["spec"]
    (term,) = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"] == {"matchLabels": OPERATOR}
    (spread,) = spec["topologySpreadConstraints"]
    assert spread["whenUnsatisfiable"] == "ScheduleAnyway" and spread["labelSelector"] == {"matchLabels": OPERATOR}
    # The pod template carries the labels every selector matches.
    assert OPERATOR.items() <= pod_of(objs)["metadata"]["labels"].items()
    for obj in objs:
        if is_builtin(obj) and obj["kind"] != "CustomResourceDefinition":
            validate_builtin(obj)


def test_the_users_affinity_and_spread_win() -> None:
    required = "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
    objs = helm_template(
        {
            "replicaCount": "2",
            f"{required}.topologyKey": "zone",
            f"{required}.labelSelector.matchLabels.a": "b",
            "topologySpreadConstraints[0].maxSkew": "2",
            "topologySpreadConstraints[0].topologyKey": "rack",
            "topologySpreadConstraints[0].whenUnsatisfiable": "DoNotSchedule",
        }
    )
    spec = pod_of(objs)["spec"]
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in spec["affinity"]["podAntiAffinity"]
    assert [c["topologyKey"] for c in spec["topologySpreadConstraints"]] == ["rack"]


def test_a_pdb_that_would_block_every_drain_is_refused() -> None:
    args = ["--set", "replicaCount=2", "--set", "podDisruptionBudget.minAvailable=2"]
    proc = run([tool("helm"), "template", "ops", str(CHART), *args], check=False)
    assert proc.returncode != 0 and "minAvailable must be below replicaCount" in proc.stderr


def test_readiness_probe_reads_the_health_endpoint() -> None:
    (container,) = pod_of(helm_template({"health.port": "8181"}))["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    probe = container["readinessProbe"]["httpGet"]
    assert probe["path"] == "/healthz" and ports[probe["port"]] == 8181
    assert f"--liveness=http://0.0.0.0:{ports[probe['port']]}/healthz" in container["args"]


def test_the_metrics_network_policy_admits_only_prometheus_to_the_metrics_port() -> None:
    assert [o for o in kinds(helm_template({}), "NetworkPolicy")] == []
    objs = helm_template({"metrics.networkPolicy.enabled": "true", "metrics.port": "9100",
                          "metrics.networkPolicy.prometheusNamespaces": "{monitoring,obs,obs}"})  # fmt: skip
    (policy,) = kinds(objs, "NetworkPolicy")
    validate_builtin(policy)
    assert policy["spec"]["podSelector"] == {"matchLabels": OPERATOR}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert [p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for p in rule["from"]] == [
        "monitoring",
        "obs",
    ]
    (container,) = pod_of(objs)["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert [p["port"] for p in rule["ports"]] == ["metrics"] and ports["metrics"] == 9100


@pytest.mark.parametrize("values", [{}, {"nameOverride": "llm-operator", "podLabels.team": "ml"}])
def test_the_operator_pods_carry_the_labels_a_specserve_network_policy_admits(values: dict[str, str]) -> None:
    """switching.metrics.source Direct: the operator scrapes the engines; their NetworkPolicy admits its pods."""
    labels = pod_of(helm_template(values))["metadata"]["labels"]
    assert OPERATOR_POD_LABELS.items() <= labels.items()


def test_the_schema_refuses_an_empty_prometheus_namespace_list() -> None:
    args = set_args({"metrics.networkPolicy.enabled": "true", "metrics.networkPolicy.prometheusNamespaces": "null"})
    proc = run([tool("helm"), "template", "ops", str(CHART), *args], check=False)
    assert proc.returncode != 0

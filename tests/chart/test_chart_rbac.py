"""The chart grants exactly the permissions in specserve.kube.rbac.REQUIRED_RULES, which the integration
tests keep equal to the API calls the operator makes: a missing verb fails here (the operator would get
403s), and so does a grant the code never uses (least privilege)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from specserve.kube.rbac import REQUIRED_RULES, PolicyRule, allows
from tests.chart.chartlib import Obj, helm_template

CLUSTER = "*cluster*"  # scope of a grant through a ClusterRoleBinding
SA = ("specserve-system", "ops-specserve")


@dataclass(frozen=True)
class Grant:
    scope: str  # CLUSTER or a namespace
    api_group: str
    resource: str
    verb: str


def grants_to(objs: list[Obj], sa: tuple[str, str]) -> set[Grant]:
    """Every (scope, group, resource, verb) the ServiceAccount gets from the rendered (Cluster)Role(Binding)s."""
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in objs
        if o["kind"] in ("Role", "ClusterRole")
    }
    out: set[Grant] = set()
    for binding in (o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        subjects = {(s.get("namespace"), s["name"]) for s in binding["subjects"] if s["kind"] == "ServiceAccount"}
        if sa not in subjects:
            continue
        ref = binding["roleRef"]
        ns = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else None, ref["name"])]
        scope = CLUSTER if binding["kind"] == "ClusterRoleBinding" else str(ns)
        for rule in role["rules"]:
            assert "resourceNames" not in rule and "nonResourceURLs" not in rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add(Grant(scope, group, resource, verb))
    return out


def missing(required: tuple[PolicyRule, ...], granted: set[Grant], namespaces: list[str] | None) -> list[str]:
    """Required permissions the chart does not grant; namespaces None means all-namespaces mode."""
    problems = []
    for rule in required:
        scopes = [CLUSTER] if rule.cluster_scoped or namespaces is None else namespaces
        if rule.operator_namespace:
            scopes = [SA[0]]  # the release namespace: the leader-election Lease
        for scope in scopes:
            for verb in rule.verbs:
                if (
                    Grant(scope, rule.api_group, rule.resource, verb) not in granted
                    and Grant(CLUSTER, rule.api_group, rule.resource, verb) not in granted
                ):
                    problems.append(f"{verb} {rule.api_group or 'core'}/{rule.resource} in {scope}")
    return problems


def excess(required: tuple[PolicyRule, ...], granted: set[Grant], namespaces: list[str] | None) -> list[str]:
    """Grants the code never needs, or wider than needed (cluster-wide in namespace-list mode)."""
    problems = []
    cluster_only = tuple(r for r in required if r.cluster_scoped)
    operator_only = tuple(r for r in required if r.operator_namespace)
    for g in granted:
        if "*" in (g.api_group, g.resource, g.verb):
            problems.append(f"wildcard {g}")
        elif not allows(required, g.api_group, g.resource, g.verb):
            problems.append(f"{g.verb} {g.api_group or 'core'}/{g.resource} is never used")
        elif allows(operator_only, g.api_group, g.resource, g.verb):
            if g.scope != SA[0]:
                problems.append(f"{g.verb} {g.api_group}/{g.resource} granted beyond the operator's namespace")
        elif (
            namespaces is not None and g.scope == CLUSTER and not allows(cluster_only, g.api_group, g.resource, g.verb)
        ):
            problems.append(f"{g.verb} {g.api_group or 'core'}/{g.resource} granted cluster-wide in namespaced mode")
        elif namespaces is not None and g.scope not in (CLUSTER, *namespaces):
            problems.append(f"{g} outside the watched namespaces")
    return problems


MODES: dict[str, tuple[dict[str, str], list[str] | None]] = {
    "all-namespaces": ({}, None),
    "namespace-list": ({"watch.allNamespaces": "false", "watch.namespaces": "{llm,llm-canary}"}, ["llm", "llm-canary"]),
    "one-namespace-custom-sa": (
        {"watch.allNamespaces": "false", "watch.namespaces": "{team-a}", "serviceAccount.name": "op"},
        ["team-a"],
    ),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_chart_grants_exactly_the_required_rules(mode: str) -> None:
    values, namespaces = MODES[mode]
    objs = helm_template(values)
    sa = (SA[0], values.get("serviceAccount.name", SA[1]))
    (account,) = [o for o in objs if o["kind"] == "ServiceAccount"]
    assert (account["metadata"]["namespace"], account["metadata"]["name"]) == sa
    (deployment,) = [o for o in objs if o["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == sa[1]
    granted = grants_to(objs, sa)
    assert missing(REQUIRED_RULES, granted, namespaces) == []
    assert excess(REQUIRED_RULES, granted, namespaces) == []


def test_checker_fails_when_code_needs_more() -> None:
    """If the operator starts calling something new (and REQUIRED_RULES says so), the chart test fails."""
    granted = grants_to(helm_template(), SA)
    needs_more = (*REQUIRED_RULES, PolicyRule("", "secrets", ("get",)), PolicyRule("apps", "deployments", ("update",)))
    assert missing(needs_more, granted, None) == [
        "get core/secrets in *cluster*",
        "update apps/deployments in *cluster*",
    ]


def test_checker_fails_on_grants_the_code_never_uses() -> None:
    granted = grants_to(helm_template(), SA)
    fewer = tuple(r for r in REQUIRED_RULES if r.resource != "pods")
    assert sorted(excess(fewer, granted, None)) == [
        "get core/pods is never used",
        "list core/pods is never used",
    ]


def test_namespaced_mode_keeps_only_discovery_cluster_wide() -> None:
    values, _ = MODES["namespace-list"]
    granted = grants_to(helm_template(values), SA)
    cluster = {(g.api_group, g.resource) for g in granted if g.scope == CLUSTER}
    assert cluster == {(r.api_group, r.resource) for r in REQUIRED_RULES if r.cluster_scoped}


def test_no_rbac_when_disabled() -> None:
    objs = helm_template({"rbac.create": "false"})
    assert not [o for o in objs if o["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")]

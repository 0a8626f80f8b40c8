"""The Kubernetes API permissions the operator needs: exactly what specserve.kube and kopf call.

The Helm chart's RBAC is checked against this list, and the integration tests check that every request
the operator makes against the emulated API is covered by it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PolicyRule:
    api_group: str
    resource: str
    verbs: tuple[str, ...]
    # Cluster-scoped needs (CRD discovery, namespace scanning) go into a ClusterRole even in namespaced mode.
    cluster_scoped: bool = False


REQUIRED_RULES: tuple[PolicyRule, ...] = (
    # The SpecServe objects: kopf watches them, stores its annotations, we patch status.
    PolicyRule("specserve.io", "specserves", ("get", "list", "watch", "patch")),
    PolicyRule("specserve.io", "specserves/status", ("get", "patch")),
    # What a SpecServe becomes: server-side apply (patch; create on first apply), prune stale children.
    PolicyRule("apps", "deployments", ("get", "list", "watch", "create", "patch", "delete")),
    PolicyRule("", "services", ("get", "list", "create", "patch", "delete")),
    PolicyRule("", "configmaps", ("get", "list", "create", "patch", "delete")),
    PolicyRule("gateway.networking.k8s.io", "httproutes", ("get", "list", "create", "patch", "delete")),
    PolicyRule("monitoring.coreos.com", "podmonitors", ("get", "list", "create", "patch", "delete")),
    # Pods are only ever read: load-based switching must not act while pods are pending (not called yet).
    PolicyRule("", "pods", ("get", "list", "watch")),
    # kopf posts Kubernetes events for warnings and handler outcomes.
    PolicyRule("", "events", ("create", "patch")),
    PolicyRule("events.k8s.io", "events", ("create", "patch")),
    # kopf's resource and namespace discovery.
    PolicyRule("apiextensions.k8s.io", "customresourcedefinitions", ("get", "list", "watch"), cluster_scoped=True),
    PolicyRule("", "namespaces", ("get", "list", "watch"), cluster_scoped=True),
)


def allows(rules: tuple[PolicyRule, ...], api_group: str, resource: str, verb: str) -> bool:
    return any(r.api_group == api_group and r.resource == resource and verb in r.verbs for r in rules)

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
    # Needed only in the operator's own namespace (the leader-election Lease): a Role there, in every mode.
    operator_namespace: bool = False


REQUIRED_RULES: tuple[PolicyRule, ...] = (
    # The SpecServe objects: kopf watches them, stores its annotations, we patch status.
    PolicyRule("specserve.io", "specserves", ("get", "list", "watch", "patch")),
    PolicyRule("specserve.io", "specserves/status", ("get", "patch")),
    # Children carry ownerReferences with blockOwnerDeletion: under OwnerReferencesPermissionEnforcement
    # (OpenShift, hardened clusters) setting that needs update on the owner's finalizers subresource.
    PolicyRule("specserve.io", "specserves/finalizers", ("update",)),
    # What a SpecServe becomes: server-side apply (patch; create on first apply), prune stale children.
    # Deployments are also watched: the reconcile reacts when a pool's readiness changes (rollouts).
    PolicyRule("apps", "deployments", ("get", "list", "watch", "create", "patch", "delete")),
    PolicyRule("", "services", ("get", "list", "create", "patch", "delete")),
    PolicyRule("", "configmaps", ("get", "list", "create", "patch", "delete")),
    PolicyRule("policy", "poddisruptionbudgets", ("get", "list", "create", "patch", "delete")),
    PolicyRule("networking.k8s.io", "networkpolicies", ("get", "list", "create", "patch", "delete")),
    PolicyRule("gateway.networking.k8s.io", "httproutes", ("get", "list", "create", "patch", "delete")),
    PolicyRule("monitoring.coreos.com", "podmonitors", ("get", "list", "create", "patch", "delete")),
    # Pods are only read, in the watched namespaces: the Direct metrics source lists a SpecServe's pods to
    # scrape their /metrics. No watch: nothing follows pod events.
    # Also by the reconcile, only while a pool is not complete: the pods' reasons (ImagePullBackOff, OOMKilled,
    # Unschedulable) name why a roll is stuck.
    PolicyRule("", "pods", ("get", "list")),
    # HPAs are listed only when another manager wrote the replicas of a pool the operator owns: to name the
    # autoscaler that fights it.
    PolicyRule("autoscaling", "horizontalpodautoscalers", ("list",)),
    # kopf posts Kubernetes events for warnings and handler outcomes.
    PolicyRule("", "events", ("create", "patch")),
    PolicyRule("events.k8s.io", "events", ("create", "patch")),
    # kopf's resource and namespace discovery.
    PolicyRule("apiextensions.k8s.io", "customresourcedefinitions", ("get", "list", "watch"), cluster_scoped=True),
    PolicyRule("", "namespaces", ("get", "list", "watch"), cluster_scoped=True),
    # Leader election (specserve.kube.lease): read, create once, renew by PUT.
    PolicyRule("coordination.k8s.io", "leases", ("get", "create", "update"), operator_namespace=True),
)


def allows(rules: tuple[PolicyRule, ...], api_group: str, resource: str, verb: str) -> bool:
    return any(r.api_group == api_group and r.resource == resource and verb in r.verbs for r in rules)

"""The resource types the fake serves: REST names, scope, subresources, and whether generation is tracked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

NAMESPACES = "v1/namespaces"
PODS = "v1/pods"
SERVICES = "v1/services"
CONFIGMAPS = "v1/configmaps"
SECRETS = "v1/secrets"
EVENTS = "v1/events"
DEPLOYMENTS = "apps/v1/deployments"
PODDISRUPTIONBUDGETS = "policy/v1/poddisruptionbudgets"
NETWORKPOLICIES = "networking.k8s.io/v1/networkpolicies"
LEASES = "coordination.k8s.io/v1/leases"
NEW_EVENTS = "events.k8s.io/v1/events"
HTTPROUTES = "gateway.networking.k8s.io/v1/httproutes"
PODMONITORS = "monitoring.coreos.com/v1/podmonitors"
CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"
SPECSERVES = "specserve.io/v1alpha1/specserves"

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One REST resource. ``key`` is ``group/version/plural`` (``v1/plural`` for the core group)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status_subresource: bool = False
    # Deployments, CRs, ... carry metadata.generation; ConfigMaps, Services, Pods do not.
    generation: bool = False
    builtin: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # A CRD's openAPIV3Schema for the served version (custom resources only).
    schema: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def key(self) -> str:
        return f"{self.api_version}/{self.plural}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None, name: str | None = None) -> str:
        """The REST path of the collection (name None) or of one object."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        scope = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        tail = f"/{name}" if name else ""
        return f"{prefix}{scope}/{self.plural}{tail}"

    def discovery(self) -> list[JSON]:
        """The entries of this resource in its group-version's APIResourceList (kopf reads subresources here)."""
        main: JSON = {
            "name": self.plural,
            "singularName": self.singular or self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(VERBS),
        }
        if self.short_names:
            main["shortNames"] = list(self.short_names)
        if self.categories:
            main["categories"] = list(self.categories)
        entries = [main]
        if self.status_subresource:
            entries.append(
                {
                    "name": f"{self.plural}/status",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": self.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        return entries


def _b(group: str, version: str, plural: str, kind: str, **kw: Any) -> ResourceType:
    return ResourceType(group=group, version=version, plural=plural, kind=kind, **kw)


BUILTINS: tuple[ResourceType, ...] = (
    _b("", "v1", "namespaces", "Namespace", namespaced=False, status_subresource=True),
    _b("", "v1", "pods", "Pod", status_subresource=True),
    _b("", "v1", "services", "Service", status_subresource=True),
    _b("", "v1", "configmaps", "ConfigMap"),
    _b("", "v1", "secrets", "Secret"),
    _b("", "v1", "events", "Event"),
    _b("apps", "v1", "deployments", "Deployment", status_subresource=True, generation=True),
    _b("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", status_subresource=True, generation=True),
    _b("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", generation=True),
    _b("coordination.k8s.io", "v1", "leases", "Lease"),
    _b("events.k8s.io", "v1", "events", "Event"),
    _b("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
       namespaced=False, status_subresource=True, generation=True),
)  # fmt: skip

# Custom resources of other projects, served without their (large) CRD schemas; defaults come from defaults.py.
GATEWAY_HTTPROUTE = _b(
    "gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute", status_subresource=True, generation=True,
    builtin=False,
)  # fmt: skip
PROMETHEUS_PODMONITOR = _b("monitoring.coreos.com", "v1", "podmonitors", "PodMonitor", generation=True, builtin=False)


def from_crd(crd: Mapping[str, Any]) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition serves (one per served version)."""
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        out.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                status_subresource="status" in (version.get("subresources") or {}),
                generation=True,
                builtin=False,
                singular=names.get("singular", ""),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                schema=(version.get("schema") or {}).get("openAPIV3Schema"),
            )
        )
    return out


def minimal_crd(rt: ResourceType) -> JSON:
    """A CRD object for a custom resource served without its real CRD (listed under customresourcedefinitions)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{rt.plural}.{rt.group}"},
        "spec": {
            "group": rt.group,
            "names": {"plural": rt.plural, "singular": rt.kind.lower(), "kind": rt.kind},
            "scope": "Namespaced" if rt.namespaced else "Cluster",
            "versions": [
                {
                    "name": rt.version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                    "subresources": {"status": {}} if rt.status_subresource else {},
                }
            ],
        },
    }


class Registry:
    """Resource types by key and by (group, version, plural), and the discovery documents built from them."""

    def __init__(self, types: Iterable[ResourceType]) -> None:
        self._by_key: dict[str, ResourceType] = {}
        for rt in types:
            self._by_key[rt.key] = rt

    def add(self, rt: ResourceType) -> None:
        self._by_key[rt.key] = rt

    def remove(self, key: str) -> None:
        self._by_key.pop(key, None)

    def __iter__(self) -> Any:
        return iter(list(self._by_key.values()))

    def get(self, key: str) -> ResourceType | None:
        return self._by_key.get(key)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_key.get(f"{group}/{version}/{plural}" if group else f"{version}/{plural}")

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for rt in self._by_key.values():
            if rt.api_version == api_version and rt.kind == kind:
                return rt
        return None

    def core_versions(self) -> JSON:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}

    def groups(self) -> JSON:
        versions: dict[str, list[str]] = {}
        for rt in self._by_key.values():
            if rt.group and rt.version not in versions.setdefault(rt.group, []):
                versions[rt.group].append(rt.version)
        groups = []
        for name, vs in sorted(versions.items()):
            listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in vs]
            groups.append({"name": name, "versions": listed, "preferredVersion": listed[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def group(self, group: str) -> JSON | None:
        for entry in self.groups()["groups"]:
            if entry["name"] == group:
                return {"kind": "APIGroup", "apiVersion": "v1", **entry}
        return None

    def resource_list(self, group: str, version: str) -> JSON | None:
        members = [rt for rt in self._by_key.values() if rt.group == group and rt.version == version]
        if not members:
            return None
        resources = [entry for rt in members for entry in rt.discovery()]
        group_version = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}

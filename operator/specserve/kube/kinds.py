"""The object kinds the operator reads and writes, and their REST paths."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def collection_path(self, namespace: str | None) -> str:
        """The objects of one namespace, or of every namespace (None)."""
        prefix = "/api" if not self.group else "/apis"
        if namespace is None:
            return f"{prefix}/{self.api_version}/{self.plural}"
        return f"{prefix}/{self.api_version}/namespaces/{namespace}/{self.plural}"

    def object_path(self, namespace: str, name: str) -> str:
        return f"{self.collection_path(namespace)}/{name}"


class Ref(str):
    """An object by kind and name, as the text "Kind/name": the key of every object a reconcile reads, applies or
    prunes (a str, so sets, logs and events read it as the text it always was)."""

    __slots__ = ()

    @classmethod
    def of(cls, kind: Kind | str, name: str) -> Ref:
        return cls(f"{kind.kind if isinstance(kind, Kind) else kind}/{name}")

    @classmethod
    def of_object(cls, obj: Mapping[str, Any]) -> Ref:
        return cls.of(str(obj["kind"]), str(obj["metadata"]["name"]))

    @property
    def kind(self) -> str:
        return self.partition("/")[0]

    @property
    def name(self) -> str:
        return self.partition("/")[2]

    def is_a(self, kind: Kind) -> bool:
        return self.kind == kind.kind


DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments")
SERVICE = Kind("v1", "Service", "services")
CONFIGMAP = Kind("v1", "ConfigMap", "configmaps")
HTTPROUTE = Kind("gateway.networking.k8s.io/v1", "HTTPRoute", "httproutes")
PODMONITOR = Kind("monitoring.coreos.com/v1", "PodMonitor", "podmonitors")
PODDISRUPTIONBUDGET = Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets")
NETWORKPOLICY = Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies")
POD = Kind("v1", "Pod", "pods")
HORIZONTALPODAUTOSCALER = Kind("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")
SPECSERVE = Kind("specserve.io/v1alpha1", "SpecServe", "specserves")

# Every kind a SpecServe may own, in apply order (config before the pods that mount it).
# The NetworkPolicy comes before the pods it guards.
OWNED_KINDS: tuple[Kind, ...] = (
    CONFIGMAP,
    NETWORKPOLICY,
    DEPLOYMENT,
    SERVICE,
    PODDISRUPTIONBUDGET,
    HTTPROUTE,
    PODMONITOR,
)
_BY_KEY = {(k.api_version, k.kind): k for k in (*OWNED_KINDS, POD, HORIZONTALPODAUTOSCALER, SPECSERVE)}


def kind_of(manifest: dict[str, Any]) -> Kind:
    return _BY_KEY[(manifest["apiVersion"], manifest["kind"])]

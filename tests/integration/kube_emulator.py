"""kmock's Kubernetes emulator, taught the one server behaviour the operator relies on that it lacks:
server-side apply creates a missing object (a real API server does; kmock answers 404).

Everything else kmock lacks (apply merge semantics, validation, GC) is covered by unit tests instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import enums, rendering

RESOURCES: dict[str, dict[str, Any]] = {
    "v1/namespaces": {"kind": "Namespace", "namespaced": False},
    "apiextensions.k8s.io/v1/customresourcedefinitions": {"kind": "CustomResourceDefinition", "namespaced": False},
    "specserve.io/v1alpha1/specserves": {"kind": "SpecServe", "subresources": {"status"}},
    "apps/v1/deployments": {"kind": "Deployment"},
    "v1/services": {"kind": "Service"},
    "v1/configmaps": {"kind": "ConfigMap"},
    "v1/pods": {"kind": "Pod"},
    "v1/events": {"kind": "Event"},
    "gateway.networking.k8s.io/v1/httproutes": {"kind": "HTTPRoute"},
    "monitoring.coreos.com/v1/podmonitors": {"kind": "PodMonitor"},
}


@attrs.define(kw_only=True)
class ApplyingEmulator(kmock.KubernetesEmulator):
    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        is_apply = "apply-patch" in request.headers.get("Content-Type", "")
        resource, name = request.resource, request.name
        if is_apply and request.action == enums.action.UPDATE and resource is not None and name is not None:
            key = (resource, request.namespace, name)
            if key not in self.objects or self.objects[key].deleted:
                # Create it empty; the apply below then fills it in as kmock's plain merge.
                self.objects[key] = {"metadata": {"name": name, "namespace": request.namespace}}
        return await super()._handle(request)


def write_kubeconfig(path: Path, server: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": server}}],
        "users": [{"name": "kmock", "user": {"token": "test-token"}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "kmock"}}],
        "current-context": "kmock",
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")


@asynccontextmanager
async def emulated_cluster() -> AsyncIterator[tuple[ApplyingEmulator, str]]:
    async with ApplyingEmulator() as api, kmock.Server(api) as server:
        for key, info in RESOURCES.items():
            api.resources[key] = kmock.ResourceInfo(
                kind=info["kind"],
                namespaced=info.get("namespaced", True),
                verbs={"list", "watch", "get", "patch", "create", "delete"},
                subresources=info.get("subresources", set()),
            )
        yield api, str(server.url).rstrip("/")

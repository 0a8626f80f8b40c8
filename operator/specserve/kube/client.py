"""A thin async wrapper over the Kubernetes REST API: get, list, server-side apply, delete, status.

Built on the official client's configuration loading (in-cluster or kubeconfig) and its HTTP transport;
calls run in a worker thread because that client is synchronous.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any
from urllib.parse import urlencode

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from specserve.kube.kinds import Kind, kind_of

FIELD_MANAGER = "specserve"
JSON = dict[str, Any]


class KubeError(RuntimeError):
    """An API call failed; `status` is the HTTP status (0 when the server was not reached)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


class KubeClient:
    def __init__(self, api: k8s.ApiClient) -> None:
        self._api = api
        self._host = api.configuration.host.rstrip("/")

    @classmethod
    def from_environment(cls) -> KubeClient:
        """In-cluster service account when inside a pod, else KUBECONFIG / ~/.kube/config."""
        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException:
            # Read KUBECONFIG now: the client library captured it at import time.
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=os.environ.get("KUBECONFIG"), client_configuration=configuration
            )
        return cls(k8s.ApiClient(configuration))

    async def _call(
        self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None, content_type: str = ""
    ) -> tuple[int, Any]:
        url = self._host + path + (f"?{urlencode(query)}" if query else "")
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        # The client does not add credentials to raw calls by itself; ask it for the auth headers.
        self._api.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
        try:
            response = await asyncio.to_thread(self._api.call_api, method, url, headers, body)
            raw = await asyncio.to_thread(response.read)
        except Exception as exc:  # transport errors: connection refused, TLS, timeouts
            raise KubeError(0, f"{method} {path}: {exc}") from exc
        data = json.loads(raw) if raw else None
        return int(response.status), data

    @staticmethod
    def _fail(method: str, path: str, status: int, data: Any) -> KubeError:
        message = data.get("message") if isinstance(data, dict) else None
        return KubeError(status, f"{method} {path}: HTTP {status}: {message or data}")

    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        path = kind.object_path(namespace, name)
        status, data = await self._call("GET", path)
        if status == 404:
            return None
        if status >= 300:
            raise self._fail("GET", path, status, data)
        return dict(data)

    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]:
        path = kind.collection_path(namespace)
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        status, data = await self._call("GET", path, query={"labelSelector": selector})
        if status == 404:
            return []  # the kind is not installed (e.g. no Prometheus Operator)
        if status >= 300:
            raise self._fail("GET", path, status, data)
        items = data.get("items") or []
        # Filter again on our side too: a selector is a request, the labels are the truth.
        return [i for i in items if labels.items() <= (i.get("metadata", {}).get("labels") or {}).items()]

    async def apply(self, manifest: JSON) -> JSON:
        """Server-side apply as the `specserve` field manager, taking over conflicting fields."""
        kind = kind_of(manifest)
        meta = manifest["metadata"]
        path = kind.object_path(meta["namespace"], meta["name"])
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        status, data = await self._call(
            "PATCH", path, query=query, body=manifest, content_type="application/apply-patch+yaml"
        )
        if status >= 300:
            raise self._fail("PATCH", path, status, data)
        return dict(data)

    async def delete(self, kind: Kind, namespace: str, name: str) -> None:
        path = kind.object_path(namespace, name)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        status, data = await self._call("DELETE", path, body=body, content_type="application/json")
        if status >= 300 and status != 404:
            raise self._fail("DELETE", path, status, data)

    async def patch_status(self, kind: Kind, namespace: str, name: str, status_body: JSON) -> None:
        path = kind.object_path(namespace, name) + "/status"
        status, data = await self._call(
            "PATCH", path, body={"status": status_body}, content_type="application/merge-patch+json"
        )
        if status >= 300:
            raise self._fail("PATCH", path, status, data)

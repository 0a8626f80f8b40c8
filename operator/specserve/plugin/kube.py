"""The plugin's Kubernetes access, kubectl's way: the kubeconfig ($KUBECONFIG or ~/.kube/config, or
--kubeconfig), its current context or --context, that context's namespace unless -n; in a pod, the service
account. Synchronous (the kubernetes client library): a command makes one or two calls."""

from __future__ import annotations

import os
from typing import Any, cast

import kubernetes
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from specserve.api.models import GROUP, PLURAL, VERSION

JSON = dict[str, Any]


class PluginError(RuntimeError):
    """A failure worded for the user (no traceback)."""


class Cluster:
    def __init__(self, kubeconfig: str | None = None, context: str | None = None) -> None:
        self.default_namespace = "default"
        try:
            if kubeconfig or os.environ.get("KUBECONFIG") or not os.environ.get("KUBERNETES_SERVICE_HOST"):
                client = kubernetes.config.new_client_from_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call]
                self.default_namespace = _context_namespace(kubeconfig, context) or "default"
            else:
                kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
                client = kubernetes.client.ApiClient()
        except (ConfigException, FileNotFoundError, OSError) as exc:
            raise PluginError(f"cannot load the kubeconfig: {exc} (set KUBECONFIG or pass --kubeconfig)") from exc
        self.api = kubernetes.client.CustomObjectsApi(client)

    def get(self, namespace: str, name: str) -> JSON:
        try:
            obj = cast(JSON, self.api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))
        except ApiException as exc:
            if exc.status == 404:
                raise PluginError(f'specserve "{name}" not found in namespace "{namespace}"') from exc
            raise _error(exc, f"get specserve {namespace}/{name}") from exc
        return obj

    def list(self, namespace: str | None) -> list[JSON]:
        try:
            if namespace is None:
                found = cast(JSON, self.api.list_cluster_custom_object(GROUP, VERSION, PLURAL))
            else:
                found = cast(JSON, self.api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL))
        except ApiException as exc:
            raise _error(exc, "list specserves") from exc
        items: list[JSON] = found.get("items", [])
        return sorted(items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def annotate(self, namespace: str, name: str, key: str, value: str | None) -> JSON:
        """Set (or with None remove) one annotation with a JSON merge patch, as `kubectl annotate` does."""
        body = {"metadata": {"annotations": {key: value}}}
        try:
            obj = cast(
                JSON,
                self.api.patch_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, body, _content_type="application/merge-patch+json"
                ),
            )
        except ApiException as exc:
            if exc.status == 404:
                raise PluginError(f'specserve "{name}" not found in namespace "{namespace}"') from exc
            raise _error(exc, f"annotate specserve {namespace}/{name}") from exc
        return obj


def _context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    try:
        contexts, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError):
        return None
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else None


def _error(exc: ApiException, what: str) -> PluginError:
    if exc.status == 403:
        return PluginError(f"{what}: forbidden (your user lacks RBAC for specserves.specserve.io): {exc.reason}")
    return PluginError(f"{what}: the API server answered {exc.status} {exc.reason}")

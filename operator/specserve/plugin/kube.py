"""The plugin's Kubernetes access, kubectl's way: the kubeconfig ($KUBECONFIG or ~/.kube/config, or
--kubeconfig), its current context or --context, that context's namespace unless -n; in a pod, the service
account. Synchronous (the kubernetes client library): a command makes one or two calls, each bounded by the
request timeout (an API server that accepts and never answers must not hang the terminal), and a server that
cannot be reached is one line naming it, not urllib3's traceback."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar, cast

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from specserve.api.models import GROUP, PLURAL, VERSION

JSON = dict[str, Any]
T = TypeVar("T")
DEFAULT_TIMEOUT = 30.0  # seconds per request, unless --request-timeout says otherwise (0: none, as kubectl's)


class PluginError(RuntimeError):
    """A failure worded for the user (no traceback)."""


class Cluster:
    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        impersonate: str | None = None,
        impersonate_groups: tuple[str, ...] = (),
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.default_namespace = "default"
        self.timeout = timeout
        config = kubernetes.client.Configuration()
        try:
            if kubeconfig or os.environ.get("KUBECONFIG") or not os.environ.get("KUBERNETES_SERVICE_HOST"):
                kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=kubeconfig, context=context, client_configuration=config, persist_config=False
                )
                self.default_namespace = _context_namespace(kubeconfig, context) or "default"
            else:
                kubernetes.config.load_incluster_config(client_configuration=config)  # type: ignore[no-untyped-call]
        except (ConfigException, FileNotFoundError, OSError) as exc:
            raise PluginError(f"cannot load the kubeconfig: {exc} (set KUBECONFIG or pass --kubeconfig)") from exc
        # One retry of a refused connection; none of a read that timed out (it would double the wait).
        config.retries = urllib3.Retry(total=1, connect=1, read=0, redirect=0, status=0)
        self.server = str(config.host)
        client = kubernetes.client.ApiClient(config)
        if impersonate:  # kubectl --as / --as-group: the API server checks RBAC as that user
            client.default_headers["Impersonate-User"] = impersonate
            for group in impersonate_groups:
                client.default_headers["Impersonate-Group"] = group
        self.api = kubernetes.client.CustomObjectsApi(client)

    def _call(self, what: str, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One API call with the request timeout; a server that is down or silent becomes one PluginError."""
        timeout = self.timeout if self.timeout > 0 else None
        try:
            return call(*args, _request_timeout=timeout, **kwargs)
        except urllib3.exceptions.HTTPError as exc:
            raise PluginError(_unreachable(what, self.server, exc, self.timeout)) from exc

    def get(self, namespace: str, name: str) -> JSON:
        try:
            obj = cast(
                JSON,
                self._call(f"get specserve {namespace}/{name}", self.api.get_namespaced_custom_object,
                           GROUP, VERSION, namespace, PLURAL, name),
            )  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                raise PluginError(f'specserve "{name}" not found in namespace "{namespace}"') from exc
            raise _error(exc, f"get specserve {namespace}/{name}") from exc
        return obj

    def list(self, namespace: str | None) -> list[JSON]:
        try:
            if namespace is None:
                listed = self._call("list specserves", self.api.list_cluster_custom_object, GROUP, VERSION, PLURAL)
                found = cast(JSON, listed)
            else:
                found = cast(
                    JSON,
                    self._call("list specserves", self.api.list_namespaced_custom_object,
                               GROUP, VERSION, namespace, PLURAL),
                )  # fmt: skip
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
                self._call(
                    f"annotate specserve {namespace}/{name}",
                    self.api.patch_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    name,
                    body,
                    _content_type="application/merge-patch+json",
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


def _unreachable(what: str, server: str, exc: urllib3.exceptions.HTTPError, timeout: float) -> str:
    reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None else exc
    # NewConnectionError (refused, no route) is a ConnectTimeoutError too, for urllib3's backward compatibility.
    if isinstance(reason, urllib3.exceptions.TimeoutError) and not isinstance(
        reason, urllib3.exceptions.NewConnectionError
    ):
        return (
            f"{what}: the API server {server} did not answer within {timeout:g}s (is it overloaded, or the address "
            "wrong? check `kubectl cluster-info`; --request-timeout waits longer)"
        )
    detail = str(reason).split(": ", 1)[-1] if ": " in str(reason) else str(reason)
    return (
        f"{what}: cannot reach the API server {server}: {detail} (is the cluster up and the kubeconfig's "
        "current context the one you mean? check `kubectl cluster-info`, or pass --context/--kubeconfig)"
    )

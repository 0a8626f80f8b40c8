"""FakeApiServer: the store, the HTTP front and the test-facing helpers, started and stopped together."""

from __future__ import annotations

import asyncio
import builtins
import copy
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

import aiohttp.web

from specserve.kubefake import controllers
from specserve.kubefake.faults import Faults
from specserve.kubefake.http import build_app
from specserve.kubefake.recording import RecordedRequest
from specserve.kubefake.resources import (
    BUILTINS,
    GATEWAY_HTTPROUTE,
    PROMETHEUS_PODMONITOR,
    Registry,
    ResourceType,
    from_crd,
    minimal_crd,
)
from specserve.kubefake.store import ApiError, Store
from specserve.kubefake.validation import Validator

JSON = dict[str, Any]


def default_crds() -> list[JSON]:
    """The SpecServe CRD as the operator's chart installs it (generated from the models)."""
    from specserve.api.crd import crd  # noqa: PLC0415 - only when the caller did not pass CRDs

    return [crd()]


class FakeApiServer:
    """An in-memory Kubernetes API server on loopback HTTP.

    ``async with FakeApiServer() as api:`` starts it; ``api.url`` is its base URL (``http://127.0.0.1:PORT``).

    Arguments:
        crds: CustomResourceDefinitions to install (default: the SpecServe CRD). Their ``openAPIV3Schema`` and
            CEL rules validate the custom resources.
        gateway_api: serve ``gateway.networking.k8s.io/v1`` HTTPRoutes (with the Gateway CRD's defaults).
        prometheus_operator: serve ``monitoring.coreos.com/v1`` PodMonitors; False is a cluster without the
            Prometheus Operator: 404 on their paths and absent from discovery.
        validate: 422 for objects the API server would refuse (schemas, CEL, the API server's own rules).
        auto_ready: act as the Deployment controller and kubelet for tests that do not care: every Deployment is
            marked fully ready (a separate status write) right after each change of its spec.
        observe_rollouts: (without auto_ready) a spec change of a Deployment is observed at once, as the real
            controller does: observedGeneration catches up, updatedReplicas is 0 and maxUnavailable old pods
            stop being ready; ``set_deployment_ready`` finishes the rollout.
        host, port: where to listen (port 0: any free port).
        history: how many watch events to keep for watches that resume from a resourceVersion (older: 410 Gone).
        record_requests: False keeps no request log (a long-running demo); ``requests`` stays empty.
        block_owner_deletion: False models the OwnerReferencesPermissionEnforcement admission plugin with a
            client lacking ``update`` on ``<owner>/finalizers``: setting ``blockOwnerDeletion: true`` is 403.
    """

    def __init__(
        self,
        *,
        crds: Iterable[Mapping[str, Any]] | None = None,
        gateway_api: bool = True,
        prometheus_operator: bool = True,
        validate: bool = True,
        auto_ready: bool = False,
        observe_rollouts: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        history: int = 20000,
        block_owner_deletion: bool = True,
        record_requests: bool = True,
    ) -> None:
        types: list[ResourceType] = list(BUILTINS)
        optional = ((GATEWAY_HTTPROUTE, gateway_api), (PROMETHEUS_PODMONITOR, prometheus_operator))
        extra = [rt for rt, on in optional if on]
        types.extend(extra)
        crd_objects = [copy.deepcopy(dict(c)) for c in (default_crds() if crds is None else crds)]
        for crd in crd_objects:
            types.extend(from_crd(crd))
        self.registry = Registry(types)
        self.faults = Faults()
        self.requests: list[RecordedRequest] = []
        self.store = Store(self.registry, Validator(enabled=validate), history=history)
        self.store.block_owner_deletion_allowed = block_owner_deletion
        self.auto_ready = auto_ready
        if auto_ready:
            self.store.after_write.append(controllers.auto_ready_hook)
        elif observe_rollouts:
            self.store.after_write.append(controllers.observe_rollout_hook)
        for crd in [*crd_objects, *(minimal_crd(rt) for rt in extra)]:
            self.create(crd)
        self._host, self._port = host, port
        self._record = record_requests
        self._runner: aiohttp.web.AppRunner | None = None
        self.url = ""

    # -------------------------------------------------------------------------------------------- lifecycle

    async def start(self) -> str:
        """Listen and return the base URL."""
        app = build_app(self.store, self.faults, self.requests if self._record else None)
        self._runner = aiohttp.web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = aiohttp.web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        port = server.sockets[0].getsockname()[1]
        self.url = f"http://{self._host}:{port}"
        return self.url

    async def stop(self) -> None:
        """Close open watches and stop listening."""
        self.store.hub.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeApiServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        """For the demo and ``python -m specserve.kubefake``: run until cancelled."""
        if not self.url:
            await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    # -------------------------------------------------------------------------------------- direct access
    # These act on the store as another client would (same semantics as the HTTP verbs, not recorded as requests)
    # and return deep copies: mutating a result changes nothing stored.

    def get(self, resource: str, namespace: str | None, name: str) -> JSON | None:
        """The stored object, or None when absent (an object with a deletionTimestamp is still present)."""
        obj = self.store.get(self._rt(resource), namespace, name)
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, resource: str, namespace: str | None = None) -> builtins.list[JSON]:
        """Every stored object of a resource (in one namespace, or all), sorted by namespace and name."""
        items, _ = self.store.select(self._rt(resource), namespace)
        return copy.deepcopy(items)

    def create(self, obj: Mapping[str, Any]) -> JSON:
        """Create an object as a POST would (uid, resourceVersion, generation 1, defaults, validation).
        The resource is found from apiVersion and kind. Raises ApiError (e.g. 409 AlreadyExists, 422)."""
        rt = self.registry.by_kind(obj["apiVersion"], obj["kind"])
        if rt is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({obj['kind']})")
        return copy.deepcopy(self.store.create(copy.deepcopy(dict(obj)), rt=rt, manager="kubefake"))

    def patch(self, resource: str, namespace: str | None, name: str, patch: Mapping[str, Any]) -> JSON:
        """A merge patch (RFC 7386) of the main resource, as a user's ``kubectl patch --type merge``."""
        rt = self._rt(resource)
        return copy.deepcopy(self.store.patch(rt, namespace, name, "merge", dict(patch), manager="kubectl-patch"))

    def patch_status(self, resource: str, namespace: str | None, name: str, status: Mapping[str, Any]) -> JSON:
        """A merge patch of ``.status`` through the status subresource, as another controller would write it."""
        rt = self._rt(resource)
        body = {"status": copy.deepcopy(dict(status))}
        return copy.deepcopy(
            self.store.patch(rt, namespace, name, "merge", body, subresource="status", manager="kubefake-controller")
        )

    def delete(self, resource: str, namespace: str | None, name: str, propagation: str = "Background") -> None:
        """Delete as a DELETE would: finalizers hold the object (deletionTimestamp set), dependents are collected."""
        self.store.delete(self._rt(resource), namespace, name, propagation=propagation)

    def set_deployment_ready(
        self, namespace: str, name: str, ready: int | None = None, updated: int | None = None
    ) -> JSON:
        """The Deployment controller's word: the current generation is observed, ``updated`` pods run its template
        and ``ready`` are Ready (both default to all of ``spec.replicas``). Writes status observedGeneration,
        replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas and the
        Available/Progressing conditions (zero counts omitted, as the server stores them)."""
        return copy.deepcopy(controllers.set_deployment_ready(self.store, namespace, name, ready, updated))

    def set_route_accepted(self, namespace: str, name: str, accepted: bool = True) -> JSON:
        """The Gateway controller's word on an HTTPRoute: its parents' Accepted condition."""
        return copy.deepcopy(controllers.set_route_accepted(self.store, namespace, name, accepted))

    # ------------------------------------------------------------------------------------------ request log

    def writes_since(self, index: int) -> builtins.list[RecordedRequest]:
        """The POST/PUT/PATCH/DELETE requests recorded after ``index`` (``len(api.requests)`` taken earlier)."""
        return [r for r in self.requests[index:] if r.is_write]

    def _rt(self, resource: str) -> ResourceType:
        rt = self.registry.get(resource)
        if rt is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({resource})")
        return rt

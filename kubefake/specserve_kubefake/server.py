"""FakeApiServer: the store, the HTTP front and the test-facing helpers, started and stopped together."""

from __future__ import annotations

import asyncio
import builtins
import copy
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

import aiohttp.web

from specserve_kubefake import controllers, patching
from specserve_kubefake.admission import Admission, Mutate, Mutator
from specserve_kubefake.faults import Faults
from specserve_kubefake.http import build_app
from specserve_kubefake.pods import PodState
from specserve_kubefake.recording import RecordedRequest
from specserve_kubefake.resources import (
    BUILTINS,
    CRDS,
    DEPLOYMENTS,
    GATEWAY_HTTPROUTE,
    PROMETHEUS_PODMONITOR,
    Registry,
    ResourceType,
    from_crd,
    minimal_crd,
)
from specserve_kubefake.store import ApiError, Store
from specserve_kubefake.validation import Validator

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
        accept_routes: act as a Gateway controller: accept every new HTTPRoute generation (status.parents with
            observedGeneration) this many seconds after the write (0: at once); None: only set_route_accepted.
            ``api.gateway.accepted = False`` makes it refuse (Accepted=False) from then on.
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
        accept_routes: float | None = None,
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
        self.deployments = controllers.DeploymentController(
            "auto" if auto_ready else "observe" if observe_rollouts else None
        )
        self.store.after_write.append(self.deployments.hook)
        self.gateway: controllers.GatewayController | None = None
        if accept_routes is not None:
            self.gateway = controllers.GatewayController(delay=accept_routes)
            self.store.after_write.append(self.gateway.hook)
        self._optional = {rt.key: rt for rt, _ in optional}
        self._removed_crds: dict[str, JSON] = {}
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

    def drop_connections(self) -> None:
        """End every open watch stream and close each connection once its request is answered (idle keep-alive
        connections at once), as an API server restart does to its clients; the store and the listener stay.
        For a test whose client runs in the server's event loop and waits for every task it did not start (kopf
        gives those 5 s when it stops): the server's connection handlers are such tasks."""
        for watches in self.store.hub.watches.values():
            for watch in list(watches):
                watch.put(None)
        server = self._runner.server if self._runner is not None else None
        for handler in server.connections if server is not None else []:
            handler.close()

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
        """For the demo and ``python -m specserve_kubefake``: run until cancelled."""
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

    # ----------------------------------------------------------------------------------- fault injection
    # Faults on the HTTP path are in ``api.faults`` (refuse/slow/hang by object, or by method and path).

    @property
    def admission(self) -> Admission:
        """The mutating webhooks (``api.admission.mutating_webhook(kind, mutate, manager=...)``)."""
        return self.store.admission

    def mutating_webhook(
        self, kind: str, mutate: Mutate, *, manager: str | None = "mutating-webhook", namespace: str | None = None,
        name: str | None = None,
    ) -> Mutator:  # fmt: skip
        """Install a mutating webhook for ``kind`` (Deployment, deployments or apps/v1/deployments): ``mutate``
        changes each created or updated object (never /status) before it is validated and stored; the fields it
        changes are owned by ``manager`` in managedFields (None: by nobody, as with a plain webhook).
        ``admission.pod_template_annotation`` and ``admission.pod_template_env`` build the usual ones.
        ``.cancel()`` on the result uninstalls it."""
        return self.store.admission.mutating_webhook(kind, mutate, manager=manager, namespace=namespace, name=name)

    def write_as(
        self, manager: str, resource: str, namespace: str | None, name: str, body: Mapping[str, Any], *,
        verb: str = "apply", subresource: str = "", force: bool = False,
    ) -> JSON:  # fmt: skip
        """Write as another field manager would (an HPA, ``kubectl edit``, another controller, a GitOps tool):
        ``verb`` apply (server-side apply of ``body``, which needs apiVersion/kind/metadata.name; ``force``
        takes fields over), patch (merge patch), strategic (strategic merge patch), json (JSON patch, body
        ``{"ops": [...]}``) or update (GET, merge ``body`` in, PUT with the read resourceVersion: ``kubectl edit``).
        managedFields records the write under ``manager``. Raises ApiError (409 conflict, 422, ...)."""
        rt = self._rt(resource)
        store, data = self.store, copy.deepcopy(dict(body))
        if verb == "apply":
            data.setdefault("apiVersion", rt.api_version)
            data.setdefault("kind", rt.kind)
            data.setdefault("metadata", {}).setdefault("name", name)
            if rt.namespaced:
                data["metadata"].setdefault("namespace", namespace)
            result = store.patch(rt, namespace, name, "apply", data, subresource=subresource, manager=manager,
                                 force=force)  # fmt: skip
        elif verb in ("patch", "strategic"):
            kind = "merge" if verb == "patch" else "strategic"
            result = store.patch(rt, namespace, name, kind, data, subresource=subresource, manager=manager)
        elif verb == "json":
            result = store.patch(rt, namespace, name, "json", data.get("ops", []), subresource=subresource,
                                 manager=manager)  # fmt: skip
        elif verb == "update":
            current = store.must_get(rt, namespace, name)
            edited = patching.merge_patch(current, data)
            edited.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
            result = store.replace(rt, namespace, name, edited, subresource=subresource, manager=manager)
        else:
            raise ValueError(f"verb {verb!r}: use apply, patch, strategic, json or update")
        return copy.deepcopy(result)

    def hpa_scale(self, namespace: str, name: str, replicas: int, manager: str = "horizontal-pod-autoscaler") -> JSON:
        """An HPA setting a Deployment's ``spec.replicas`` (an Update by its own field manager, as through
        ``/scale``)."""
        return self.write_as(manager, DEPLOYMENTS, namespace, name, {"spec": {"replicas": int(replicas)}},
                             verb="update")  # fmt: skip

    def set_pods(
        self, namespace: str, deployment: str, states: Sequence[PodState | str], *,
        progressing: controllers.Progressing | None = None,
    ) -> builtins.list[JSON]:  # fmt: skip
        """Replace a Deployment's pods by ``states`` (``PodState(state, updated=True, message="")`` or a state name:
        Ready, Running, Pending, ContainerCreating, Unschedulable, ImagePullBackOff, ErrImagePull,
        CrashLoopBackOff, OOMKilled) and write its status to match (replicas = pods, updatedReplicas = pods on the
        current template, readyReplicas = Ready pods). Pods carry the template's labels, ``pod-template-hash``
        and an ownerReference to the Deployment (the fake has no ReplicaSets). Returns the stored pods."""
        return copy.deepcopy(controllers.set_pods(self.store, namespace, deployment, states, progressing=progressing))

    def set_progress_deadline_exceeded(self, namespace: str, name: str) -> JSON:
        """The Deployment controller gives up on the current rollout: Progressing=False,
        reason ProgressDeadlineExceeded (counts unchanged)."""
        return copy.deepcopy(controllers.set_progress_deadline_exceeded(self.store, namespace, name))

    def stall_rollouts(
        self, namespace: str, name: str, state: str = "ImagePullBackOff", *, message: str = "",
        deadline: float | None = None,
    ) -> None:  # fmt: skip
        """Make this Deployment's rollouts stall (also the one in progress): the new template's pods stay in
        ``state`` (ImagePullBackOff, CrashLoopBackOff, OOMKilled, Unschedulable, Pending, ...), old Ready pods are
        kept down to ``replicas - maxUnavailable`` and, ``deadline`` seconds later (None: the Deployment's own
        progressDeadlineSeconds; 0: at once), Progressing=False/ProgressDeadlineExceeded. Works with any of
        auto_ready / observe_rollouts / neither. ``unstall_rollouts`` ends it."""
        stall = controllers.Stall(state=state, message=message, deadline=deadline)
        PodState(state)  # a clear error for an unknown state, now
        self.deployments.stall(self.store, namespace, name, stall)

    def unstall_rollouts(self, namespace: str, name: str) -> None:
        """The cause is fixed: the stall's pods go; with auto_ready the rollout completes at once."""
        self.deployments.unstall(self.store, namespace, name)

    def lose_pods(self, namespace: str, name: str) -> JSON:
        """Every pod of the Deployment stops being Ready (node lost, OOM): readyReplicas 0, Available=False."""
        return self.set_deployment_ready(namespace, name, ready=0)

    def remove_crd(self, resource: str) -> None:
        """Delete the CRD of a custom resource at run time (``HTTPROUTES``, ``PODMONITORS``, ...): its objects are
        deleted, open watches on it end, and its paths answer 404 and leave discovery."""
        rt = self._rt(resource)
        if rt.builtin:
            raise ValueError(f"{resource} is a built-in resource, not served from a CRD")
        for obj in self.store.select(rt, None)[0]:
            self.store._remove(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], obj)
        crds = self._rt(CRDS)
        crd_name = f"{rt.plural}.{rt.group}"
        crd = self.store.get(crds, None, crd_name)
        if crd is not None:
            keep = ("name", "labels", "annotations")
            self._removed_crds[rt.key] = {
                **{k: v for k, v in crd.items() if k not in ("metadata", "status")},
                "metadata": {k: v for k, v in crd["metadata"].items() if k in keep},
            }
            self.store._remove(crds, "", crd_name, crd)
        self.registry.remove(rt.key)
        for watch in builtins.list(self.store.hub.watches.get(rt.key, ())):
            watch.put(None)
        self._optional.setdefault(rt.key, rt)

    def install_crd(self, resource: str) -> None:
        """(Re)install the CRD of an optional resource removed earlier (or served off: ``gateway_api=False``)."""
        rt = self._optional.get(resource)
        if rt is None:
            raise ValueError(f"{resource}: not an optional resource of this server ({sorted(self._optional)})")
        if self.registry.get(rt.key) is None:
            self.registry.add(rt)
            self.create(self._removed_crds.pop(rt.key, minimal_crd(rt)))

    # ------------------------------------------------------------------------------------------ request log

    def writes_since(self, index: int) -> builtins.list[RecordedRequest]:
        """The POST/PUT/PATCH/DELETE requests recorded after ``index`` (``len(api.requests)`` taken earlier)."""
        return [r for r in self.requests[index:] if r.is_write]

    def _rt(self, resource: str) -> ResourceType:
        rt = self.registry.get(resource)
        if rt is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({resource})")
        return rt

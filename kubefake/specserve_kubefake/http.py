"""The HTTP front: REST paths to store calls, discovery, watch streams, the request log and fault injection."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import yaml

from specserve_kubefake.errors import ApiError
from specserve_kubefake.faults import REASONS, Faults
from specserve_kubefake.faults import Request as FaultRequest
from specserve_kubefake.recording import RecordedRequest
from specserve_kubefake.resources import ResourceType
from specserve_kubefake.selectors import Selector
from specserve_kubefake.store import Store
from specserve_kubefake.watch import Event, Watch

JSON = dict[str, Any]
_PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "apply",
}
_APPLY_TYPES = frozenset(t for t, kind in _PATCH_TYPES.items() if kind == "apply")
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
VERSION = {"major": "1", "minor": "35", "gitVersion": "v1.35.0-kubefake", "platform": "linux/amd64"}


@dataclass
class ResourcePath:
    """What a REST path names."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str


def _json(data: Any, status: int = 200) -> aiohttp.web.Response:
    return aiohttp.web.Response(body=json.dumps(data, separators=(",", ":")), status=status,
                                content_type="application/json")  # fmt: skip


def parse_target(store: Store, path: str) -> ResourcePath | JSON | None:
    """A ResourcePath for resource paths, a discovery document for discovery paths, None when unknown (404)."""
    parts = [p for p in path.split("/") if p]
    registry = store.registry
    if parts[:1] == ["api"]:
        if len(parts) == 1:
            return registry.core_versions()
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"]:
        if len(parts) == 1:
            return registry.groups()
        if len(parts) == 2:
            return registry.group(parts[1])
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if not rest:
        return registry.resource_list(group, version)
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        candidate = registry.lookup(group, version, rest[2])
        if candidate is not None and candidate.namespaced:
            namespace, rest = rest[1], rest[2:]
    rt = registry.lookup(group, version, rest[0])
    if rt is None or len(rest) > 3:
        return None
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else ""
    if sub and not (sub == "status" and rt.status_subresource) and sub != "finalize":
        return None
    return ResourcePath(rt, namespace, name, sub)


def _body(raw: bytes, content_type: str) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        if "yaml" in content_type:
            try:
                return yaml.load(raw, Loader=_YAML_LOADER)
            except yaml.YAMLError as exc:
                raise ApiError(400, "BadRequest", f"error decoding YAML: {exc}") from exc
        raise ApiError(400, "BadRequest", "the body of the request is not valid JSON") from None


def _manager(request: aiohttp.web.Request) -> str:
    """fieldManager, or the user agent's product name as the API server infers it."""
    manager = request.query.get("fieldManager")
    if manager:
        return manager
    agent = request.headers.get("User-Agent", "")
    return agent.split("/", 1)[0].strip() or "unknown"


def _fault_view(record: RecordedRequest, target: ResourcePath | JSON | None) -> FaultRequest:
    """What a fault rule matches: the verb (a server-side apply is ``apply``), the resource's names and the object
    (a create names it in its body)."""
    if not isinstance(target, ResourcePath):
        return FaultRequest(record.method, record.path)
    verb = "apply" if record.content_type in _APPLY_TYPES else record.verb
    name = target.name
    if name is None and record.method == "POST" and isinstance(record.body, dict):
        name = (record.body.get("metadata") or {}).get("name")
    rt = target.rt
    return FaultRequest(record.method, record.path, verb, frozenset((rt.kind, rt.plural, rt.key)), target.namespace,
                        name, target.subresource)  # fmt: skip


async def _hang(closed: asyncio.Event, http: aiohttp.web.Request) -> None:
    """Until the server stops or the client gives up (its timeout, a cancelled call): a real API server ends a
    request's work when its client disconnects, so the call is answered (recorded as finished) then."""
    with contextlib.suppress(asyncio.CancelledError):
        while not closed.is_set():
            transport = http.transport
            if transport is None or transport.is_closing():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closed.wait(), timeout=0.05)


async def _next(watch: Watch) -> Event | None:
    return await watch.queue.get()


class Handler:
    def __init__(self, store: Store, faults: Faults, log: list[RecordedRequest] | None) -> None:
        self.store, self.faults, self.log = store, faults, log

    async def handle(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        method, path = request.method, request.path
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        raw = await request.read() if request.can_read_body else b""
        record = RecordedRequest(method, path, dict(request.query), content_type, None, dict(request.headers))
        if self.log is not None:
            self.log.append(record)
        try:
            record.body = _body(raw, content_type)
            target = parse_target(self.store, path)
            if isinstance(target, ResourcePath):
                record.resource, record.group, record.plural = target.rt.key, target.rt.group, target.rt.plural
                record.namespace, record.name, record.subresource = target.namespace, target.name, target.subresource
            response = await self._faulted(_fault_view(record, target), request) if self.faults.rules else None
            if response is None:
                response = await self._dispatch(request, record, target)
        except ApiError as exc:
            response = _json(exc.body(), exc.status)
        record.status = response.status
        record.finished = time.monotonic()
        return response

    async def _faulted(self, request: FaultRequest, http: aiohttp.web.Request) -> aiohttp.web.StreamResponse | None:
        fault = self.faults.take(request)
        if fault is None:
            return None
        if fault.hang:
            await _hang(self.store.hub.closed, http)
            raise ApiError(503, "ServiceUnavailable", "the fake API server is shutting down, or the client left")
        if fault.delay:
            await asyncio.sleep(fault.delay)
        if fault.status is None:
            return None
        raise ApiError(fault.status, REASONS.get(fault.status, "Unknown"), fault.message)

    async def _dispatch(
        self, request: aiohttp.web.Request, record: RecordedRequest, target: ResourcePath | JSON | None
    ) -> aiohttp.web.StreamResponse:
        path = request.path
        if path == "/version":
            return _json(VERSION)
        if path in ("/healthz", "/livez", "/readyz"):
            return aiohttp.web.Response(text="ok")
        if target is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not isinstance(target, ResourcePath):
            if request.method != "GET":
                raise ApiError(405, "MethodNotAllowed", "only GET is allowed on discovery documents")
            return _json(target)
        return await self._resource(request, record, target)

    async def _resource(
        self, request: aiohttp.web.Request, record: RecordedRequest, t: ResourcePath
    ) -> aiohttp.web.StreamResponse:
        store, method, query, body = self.store, request.method, request.query, record.body
        if t.rt.namespaced and t.namespace is None and (t.name or method not in ("GET",)):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET" and t.name:
            return _json(store.must_get(t.rt, t.namespace, t.name))
        if method == "GET":
            selector = Selector(query.get("labelSelector", ""), query.get("fieldSelector", ""))
            if query.get("watch") in ("true", "1"):
                return await self._watch(request, t, selector)
            items, rv = store.select(t.rt, t.namespace, selector or None)
            if t.rt.builtin:
                items = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items]
            return _json({"apiVersion": t.rt.api_version, "kind": f"{t.rt.kind}List",
                          "metadata": {"resourceVersion": str(rv)}, "items": items})  # fmt: skip
        manager = _manager(request)
        if method == "POST" and not t.name:
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be an object")
            return _json(store.create(body, rt=t.rt, namespace=t.namespace, manager=manager), 201)
        if method == "PUT" and t.name:
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be an object")
            sub = "status" if t.subresource == "status" else ""
            return _json(store.replace(t.rt, t.namespace, t.name, body, subresource=sub, manager=manager))
        if method == "PATCH" and t.name:
            patch_type = _PATCH_TYPES.get(record.content_type)
            if patch_type is None:
                raise ApiError(415, "UnsupportedMediaType", f"the media type {record.content_type!r} is not supported")
            if patch_type == "apply" and "fieldManager" not in query:
                raise ApiError(422, "Invalid", "PATCH, application/apply-patch+yaml: fieldManager is required")
            force = query.get("force") in ("true", "1")
            existed = store.get(t.rt, t.namespace, t.name) is not None
            result = store.patch(t.rt, t.namespace, t.name, patch_type, body, subresource=t.subresource,
                                 manager=manager, force=force)  # fmt: skip
            return _json(result, 200 if existed or patch_type != "apply" else 201)
        if method == "DELETE" and t.name:
            options = body if isinstance(body, dict) else {}
            propagation = query.get("propagationPolicy") or options.get("propagationPolicy") or "Background"
            if options.get("orphanDependents") is False:
                propagation = "Background"
            result = store.delete(t.rt, t.namespace, t.name, propagation=propagation,
                                  preconditions=options.get("preconditions"))  # fmt: skip
            return _json(result)
        if method == "DELETE":
            selector = Selector(query.get("labelSelector", ""), query.get("fieldSelector", ""))
            items, _ = store.select(t.rt, t.namespace, selector or None)
            for obj in list(items):
                store.delete(t.rt, obj["metadata"].get("namespace"), obj["metadata"]["name"])
            return _json({"kind": "Status", "apiVersion": "v1", "status": "Success", "metadata": {}})
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    async def _watch(
        self, request: aiohttp.web.Request, t: ResourcePath, selector: Selector
    ) -> aiohttp.web.StreamResponse:
        raw_rv = request.query.get("resourceVersion", "")
        since = int(raw_rv) if raw_rv not in ("", "0") and raw_rv.isdigit() else None
        timeout = float(request.query.get("timeoutSeconds") or 1800)
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        try:
            replay, watch = self.store.subscribe(t.rt, t.namespace, since)
        except ApiError as exc:
            # An expired resourceVersion is an ERROR event in a 200 stream, as the API server sends it.
            await response.prepare(request)
            await response.write(json.dumps({"type": "ERROR", "object": exc.body()}).encode() + b"\n")
            return response
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            for event in replay:
                if not selector or selector.matches(event.obj):
                    await response.write(event.line())
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    live = await asyncio.wait_for(_next(watch), remaining)
                except TimeoutError:
                    break
                if live is None:
                    break
                if not selector or selector.matches(live.obj):
                    await response.write(live.line())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.hub.unsubscribe(watch)
        return response


def build_app(store: Store, faults: Faults, log: list[RecordedRequest] | None) -> aiohttp.web.Application:
    app = aiohttp.web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", Handler(store, faults, log).handle)
    return app

"""A thin async client for the Kubernetes REST API: get, list, server-side apply, delete, status, events.

Credentials and TLS come from the official client's configuration loading (in-cluster service account or
kubeconfig, including tokens it refreshes: in-cluster token rotation, exec plugins); the transport is one shared
aiohttp session with a bounded connection pool. Every call has a timeout, idempotent calls retry transient
failures with jittered exponential backoff, and every failure is a KubeError.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import os
import random
import ssl
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import should_bypass_proxies

from specserve.clock import rfc3339
from specserve.kube.apiwarnings import WarningLog, parse, resource
from specserve.kube.events import COMBINED, Correlator, Posting
from specserve.kube.kinds import Kind, kind_of
from specserve.layout import MANAGER
from specserve.render.yamljson import yaml_safe_json
from specserve.telemetry import API_UNAVAILABLE

FIELD_MANAGER = MANAGER  # the reconcile's (specserve.layout names every manager)
JSON = dict[str, Any]
log = logging.getLogger(__name__)

# Worth retrying: throttled, or the server (or something in front of it) failed without acting on the request.
RETRIABLE_STATUSES = frozenset({0, 429, 500, 502, 503, 504})
EVENT = Kind("v1", "Event", "events")
AUTH_REFRESH_SECONDS = 30.0  # how long credentials read from the configuration are reused
_sleep = asyncio.sleep  # the backoff's sleep, on its own name so tests can record delays without waiting


class KubeError(RuntimeError):
    """An API call failed; `status` is the HTTP status (0 when the server was not reached or did not answer)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


def encode_body(body: Any) -> bytes:
    """A request body as UTF-8 JSON that is also YAML the API server decodes as the same object (see
    render/yamljson.py: an ASCII-escaped emoji made every apply of its object a 400). NaN and Infinity are refused:
    JSON has no such numbers (Python would write bare `NaN`, which YAML reads as a string), as is a lone surrogate
    (not UTF-8): ValueError."""
    return yaml_safe_json(body, allow_nan=False).encode()


class FencedError(KubeError):
    """A write refused before it was sent: this replica no longer holds the leader Lease (see KubeClient.fence)."""

    def __init__(self, method: str, path: str) -> None:
        super().__init__(0, f"{method} {path}: not sent: this replica no longer holds the leader lease")


@dataclass(frozen=True)
class ClientOptions:
    connect_timeout: float = 5.0  # TCP + TLS handshake
    request_timeout: float = 30.0  # the whole request, per attempt
    attempts: int = 4  # for idempotent calls; 1 means no retry
    backoff_base: float = 0.25  # seconds; doubles per attempt, full jitter
    backoff_max: float = 8.0  # also caps a server's Retry-After
    connection_limit: int = 32  # concurrent connections to the API server
    # A whole read (GET or LIST, its retries included): a hung read of one kind costs a reconcile this long at
    # most, not attempts x request_timeout plus backoff.
    read_timeout: float = 10.0


@dataclass(frozen=True)
class _Response:
    status: int
    data: Any
    retry_after: float | None
    warnings: tuple[str, ...] = ()


def _ssl_context(configuration: k8s.Configuration) -> ssl.SSLContext | bool:
    if not configuration.host.startswith("https"):
        return False
    if not configuration.verify_ssl:
        return False  # aiohttp: no verification
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if configuration.assert_hostname is False:
        context.check_hostname = False
    return context


def _retry_after(headers: Any) -> float | None:
    try:
        return max(0.0, float(headers.get("Retry-After", "")))
    except ValueError:
        return None  # absent, or an HTTP date (the API server sends seconds)


def _unavailable(method: str, path: str) -> None:
    """Count an attempt the server did not answer usably (no answer, 429, 5xx): the operator's own view of an API
    server or etcd outage, on its metrics while the outage lasts."""
    API_UNAVAILABLE.labels(method, resource(path)).inc()


class KubeClient:
    def __init__(self, configuration: k8s.Configuration, options: ClientOptions | None = None) -> None:
        self._configuration = configuration
        self._host = configuration.host.rstrip("/")
        self._options = options or ClientOptions()
        self._ssl = _ssl_context(configuration)
        # The same proxy decision as the official client (it reads HTTPS_PROXY / NO_PROXY from the environment).
        proxy = configuration.proxy
        self._proxy = proxy if proxy and not should_bypass_proxies(self._host, configuration.no_proxy or "") else None
        self._session: aiohttp.ClientSession | None = None
        self._may_write: Callable[[], bool] | None = None
        self._auth: tuple[float, dict[str, str]] | None = None  # when the headers were read, the headers
        self.events = Correlator()  # shared with lane(): one memory of the Events posted per process
        self.warnings = WarningLog()  # shared with lane() and sibling(): each warning logged once per process

    def fence(self, may_write: Callable[[], bool]) -> None:
        """Send no write (POST, PUT, PATCH, DELETE; every retry included) unless `may_write()` says so at that
        moment: the leader's writes stop the instant its Lease lapses, whichever loop or handler issues them."""
        self._may_write = may_write

    def lane(self) -> KubeClient:
        """A client with the same credentials, options and write fence (now and as it changes), and connections of
        its own: the calls that must not wait (the failover fast path) never queue in this client's pool, which the
        bulk of the traffic can hold whole (each reconcile slot's pass lists seven kinds at once)."""
        other = KubeClient(self._configuration, self._options)
        other.fence(lambda: self._may_write is None or self._may_write())
        other.events = self.events
        other.warnings = self.warnings
        return other

    def sibling(self) -> KubeClient:
        """A client with the same credentials and options, its own connections, and no fence (the Lease's own
        writes must go out while the fence is closed; client-go's leader election has its own client too)."""
        other = KubeClient(self._configuration, self._options)
        other.warnings = self.warnings
        return other

    @classmethod
    def from_environment(cls, options: ClientOptions | None = None) -> KubeClient:
        """In-cluster service account when inside a pod, else KUBECONFIG / ~/.kube/config."""
        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException:
            # Read KUBECONFIG now: the client library captured it at import time.
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=os.environ.get("KUBECONFIG"), client_configuration=configuration
            )
        return cls(configuration, options)

    @property
    def options(self) -> ClientOptions:
        return self._options

    def _get_session(self) -> aiohttp.ClientSession:
        # Created lazily: a session belongs to the running loop, and the client is built before it starts.
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._options.connection_limit, ssl=self._ssl)
            timeout = aiohttp.ClientTimeout(
                total=self._options.request_timeout, sock_connect=self._options.connect_timeout
            )
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def _auth_headers(self) -> dict[str, str]:
        # auth_settings() runs the configuration's refresh hook (rotated in-cluster tokens, exec plugins): with a
        # kubeconfig it re-reads the whole configuration (a tenth of a steady-state reconcile's CPU when it ran
        # per request), so its headers are reused for a while; rotated tokens stay valid far longer.
        now = time.monotonic()
        if self._auth is not None and now - self._auth[0] < AUTH_REFRESH_SECONDS:
            return self._auth[1]
        headers: dict[str, str] = {}
        settings: dict[str, Any] = dict(self._configuration.auth_settings())
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        self._auth = (now, headers)
        return headers

    async def _once(self, method: str, url: str, data: bytes | None, content_type: str) -> _Response:
        headers = {"Accept": "application/json", **self._auth_headers()}
        if data is not None:
            headers["Content-Type"] = content_type
        extra: dict[str, Any] = {}
        if self._configuration.tls_server_name:
            extra["server_hostname"] = self._configuration.tls_server_name
        if self._proxy:
            extra["proxy"] = self._proxy
        try:
            async with self._get_session().request(method, url, data=data, headers=headers, **extra) as response:
                raw = await response.read()
                status, retry_after = response.status, _retry_after(response.headers)
                warnings = tuple(parse(response.headers.getall("Warning", ())))
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            # Connection refused or reset, TLS, timeouts (connect or total), malformed responses.
            raise KubeError(0, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            # A proxy's HTML error page, a truncated body: keep a snippet for the message.
            if status < 300:
                raise KubeError(status, f"HTTP {status}: non-JSON response: {raw[:200]!r}") from None
            parsed = raw[:200].decode(errors="replace")
        return _Response(status, parsed, retry_after, warnings)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        cap = min(self._options.backoff_max, self._options.backoff_base * 2**attempt)
        delay = random.uniform(0, cap)  # full jitter: many SpecServes failing together do not retry together
        if retry_after is not None:
            delay = max(delay, min(retry_after, self._options.backoff_max))
        return delay

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        idempotent: bool = True,
        attempts: int | None = None,
    ) -> tuple[int, Any]:
        url = self._host + path + (f"?{urlencode(query)}" if query else "")
        tries = max(1, attempts if attempts is not None else self._options.attempts) if idempotent else 1
        try:
            data = None if body is None else encode_body(body)
        except ValueError as exc:  # UnicodeEncodeError is one: a lone surrogate
            raise KubeError(400, f"{method} {path}: not sent: the body is not valid JSON: {exc}") from exc
        for attempt in range(tries):
            if method != "GET" and self._may_write is not None and not self._may_write():
                raise FencedError(method, path)
            try:
                response = await self._once(method, url, data, content_type)
                if response.status == 401 and self._auth is not None:
                    self._auth = None  # the reused credentials expired: read them again, once
                    response = await self._once(method, url, data, content_type)
            except KubeError as exc:
                _unavailable(method, path)
                if attempt + 1 >= tries:
                    raise KubeError(exc.status, f"{method} {path}: {exc}") from exc
                delay = self._delay(attempt, None)
                log.debug("%s %s: %s; retrying in %.2f s", method, path, exc, delay)
            else:
                if response.warnings:
                    name = body.get("metadata", {}).get("name") if method == "POST" and isinstance(body, dict) else None
                    self.warnings.record(method, f"{path}/{name}" if name else path, response.warnings)
                if response.status in RETRIABLE_STATUSES:
                    _unavailable(method, path)
                if response.status not in RETRIABLE_STATUSES or attempt + 1 >= tries:
                    return response.status, response.data
                delay = self._delay(attempt, response.retry_after)
                log.debug("%s %s: HTTP %d; retrying in %.2f s", method, path, response.status, delay)
            await _sleep(delay)
        raise AssertionError("unreachable")  # the loop returns or raises on its last attempt

    @staticmethod
    def _fail(method: str, path: str, status: int, data: Any) -> KubeError:
        message = data.get("message") if isinstance(data, dict) else None
        return KubeError(status, f"{method} {path}: HTTP {status}: {message or data}")

    @staticmethod
    def _object(method: str, path: str, status: int, data: Any) -> JSON:
        if not isinstance(data, dict):
            raise KubeError(status, f"{method} {path}: HTTP {status}: expected an object, got {data!r:.200}")
        return data

    async def _read(self, path: str, query: dict[str, str] | None = None) -> tuple[int, Any]:
        try:
            return await asyncio.wait_for(self._call("GET", path, query=query), timeout=self._options.read_timeout)
        except TimeoutError:
            _unavailable("GET", path)  # the attempt in flight was cut: it counted nothing itself
            raise KubeError(0, f"GET {path}: no answer within {self._options.read_timeout:g} s") from None

    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        path = kind.object_path(namespace, name)
        status, data = await self._read(path)
        if status == 404:
            return None
        if status >= 300:
            raise self._fail("GET", path, status, data)
        return self._object("GET", path, status, data)

    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]:
        path = kind.collection_path(namespace)
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        status, data = await self._read(path, query={"labelSelector": selector})
        if status == 404:
            return []  # the kind is not installed (e.g. no Prometheus Operator)
        if status >= 300:
            raise self._fail("GET", path, status, data)
        items = self._object("GET", path, status, data).get("items") or []
        # Filter again on our side too: a selector is a request, the labels are the truth.
        return [i for i in items if labels.items() <= (i.get("metadata", {}).get("labels") or {}).items()]

    async def list_labelled(self, kind: Kind, namespace: str | None, label: str | None) -> builtins.list[JSON]:
        """Every object of `kind` in `namespace` (None: every namespace) that carries `label` (any value; None:
        every object): one LIST for many SpecServes. As a LIST returns them: without apiVersion and kind."""
        path = kind.collection_path(namespace)
        status, data = await self._read(path, query={"labelSelector": label} if label else None)
        if status == 404:
            return []  # the kind is not installed
        if status >= 300:
            raise self._fail("GET", path, status, data)
        items = self._object("GET", path, status, data).get("items") or []
        return [i for i in items if label is None or label in ((i.get("metadata") or {}).get("labels") or {})]

    async def apply(self, manifest: JSON, field_manager: str = FIELD_MANAGER) -> JSON:
        """Server-side apply as `field_manager` (the `specserve` manager unless a handover needs another), taking
        over conflicting fields (idempotent)."""
        kind = kind_of(manifest)
        meta = manifest["metadata"]
        return await self._apply_patch(kind.object_path(meta["namespace"], meta["name"]), manifest, field_manager)

    async def delete(self, kind: Kind, namespace: str, name: str) -> None:
        path = kind.object_path(namespace, name)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        status, data = await self._call("DELETE", path, body=body)
        if status >= 300 and status != 404:  # 404: already gone (or gone by our own earlier attempt)
            raise self._fail("DELETE", path, status, data)

    async def apply_status(self, kind: Kind, namespace: str, name: str, status_body: JSON, field_manager: str) -> JSON:
        """Server-side apply of /status as `field_manager`: the status fields this writer owns, and only those.

        Each writer (the reconcile, the switching loop) applies the whole set of status fields it owns, under its
        own manager, as cert-manager's controllers do: a field it leaves out is removed only if it owned it, and
        the other writer's fields (and conditions, a list map keyed by type) are never touched. Forced: the only
        other managers of these fields are earlier versions of ourselves."""
        path = kind.object_path(namespace, name) + "/status"
        body = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": name, "namespace": namespace},
                "status": status_body}  # fmt: skip
        return await self._apply_patch(path, body, field_manager)

    async def _apply_patch(self, path: str, body: JSON, field_manager: str) -> JSON:
        query = {"fieldManager": field_manager, "force": "true"}
        status, data = await self._call(
            "PATCH", path, query=query, body=body, content_type="application/apply-patch+yaml"
        )
        if status >= 300:
            raise self._fail("PATCH", path, status, data)
        return self._object("PATCH", path, status, data)

    async def create(self, kind: Kind, namespace: str, body: JSON, *, attempts: int | None = None) -> JSON | None:
        """POST; None when the object already exists (409). Not retried: a lost answer may have created it."""
        path = kind.collection_path(namespace)
        status, data = await self._call("POST", path, body=body, idempotent=False, attempts=attempts)
        if status == 409:
            return None
        if status >= 300:
            raise self._fail("POST", path, status, data)
        return self._object("POST", path, status, data)

    async def replace(self, kind: Kind, namespace: str, name: str, body: JSON) -> JSON | None:
        """PUT guarded by body's metadata.resourceVersion; None when someone else wrote first (409)."""
        path = kind.object_path(namespace, name)
        status, data = await self._call("PUT", path, body=body, idempotent=False)
        if status == 409:
            return None
        if status >= 300:
            raise self._fail("PUT", path, status, data)
        return self._object("PUT", path, status, data)

    async def post_event(
        self, involved: JSON, *, reason: str, message: str, type_: str = "Normal", component: str = FIELD_MANAGER
    ) -> None:
        """A core/v1 Event about `involved` (a full object), correlated as client-go's recorder does
        (kube.events): a repeat within the window bumps the existing Event's count, a run of similar ones is
        combined into one. Failures are logged, never raised: events are best-effort and must not fail a
        reconcile."""
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        name = meta.get("name", "object")
        who = (str(meta.get("uid") or ""), namespace, str(involved.get("kind")), str(name))
        message = message[:1024]

        def fresh_name() -> str:  # like kubectl's <object>.<random>; it needs no generateName support
            return f"{name}.{uuid.uuid4().hex[:16]}"

        posting = self.events.correlate(who, type_, reason, message, time.time(), fresh_name)
        try:
            if not posting.new and await self._bump_event(namespace, posting):
                self.events.posted(who, type_, reason, posting)
                return
            if not posting.new:  # the Event expired on the server (its TTL): post it afresh
                self.events.forget(who, type_, reason, posting)
                posting = self.events.correlate(
                    who, type_, reason, posting.message.removeprefix(COMBINED), posting.last, fresh_name
                )
            await self.create(EVENT, namespace, _event(involved, namespace, reason, type_, component, posting))
            self.events.posted(who, type_, reason, posting)
        except KubeError as exc:
            log.warning("could not post event %s on %s/%s: %s", reason, namespace, name, exc)

    async def _bump_event(self, namespace: str, posting: Posting) -> bool:
        """Count one more on an Event already posted; False when it is gone (404)."""
        path = EVENT.object_path(namespace, posting.name)
        body = {"count": posting.count, "message": posting.message, "lastTimestamp": rfc3339(posting.last)}
        status, data = await self._call("PATCH", path, body=body, content_type="application/merge-patch+json")
        if status == 404:
            return False
        if status >= 300:
            raise self._fail("PATCH", path, status, data)
        return True


def _event(involved: JSON, namespace: str, reason: str, type_: str, component: str, posting: Posting) -> JSON:
    meta = involved.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": posting.name, "namespace": namespace},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": meta.get("name"),
            "namespace": namespace,
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": posting.message,
        "type": type_,
        # The legacy core/v1 fields only: setting eventTime would oblige the events.k8s.io ones too.
        "source": {"component": component},
        "firstTimestamp": rfc3339(posting.first),
        "lastTimestamp": rfc3339(posting.last),
        "count": posting.count,
    }

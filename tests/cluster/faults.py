"""Fault injectors for the cluster tier, each a real network party: a TCP proxy in front of an API server that delays
what it forwards (and can cut every connection), an HTTPS validating admission webhook that denies writes to named
objects, and etcd's compaction through its HTTP gateway."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.cluster.controlplane import _openssl

JSON = dict[str, Any]


class DelayProxy:
    """A TCP proxy on loopback to `port` (TLS passes through it untouched): every chunk read from either side is
    written to the other `delay` seconds later (uniform in the range; order kept), as a slow network does.
    `cut()` aborts every open connection: the client's watches end and it reconnects (re-watching from the
    resourceVersion it last saw)."""

    def __init__(self, port: int, delay: tuple[float, float] = (0.0, 0.0)) -> None:
        self.target = port
        self.delay = delay
        self.port = 0
        self.connections = 0  # accepted in all
        self._open: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="delay-proxy", daemon=True)
        self._server: asyncio.Server | None = None

    def __enter__(self) -> DelayProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._handle, "127.0.0.1", 0)

    def cut(self) -> None:
        """Abort every connection open now (both sides)."""

        def abort() -> None:
            for writer in list(self._open):
                writer.transport.abort()
            self._open.clear()

        self._loop.call_soon_threadsafe(abort)

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            client_w.transport.abort()
            return
        self._open |= {client_w, server_w}
        await asyncio.gather(self._pump(client_r, server_w), self._pump(server_r, client_w), return_exceptions=True)
        for w in (client_w, server_w):
            self._open.discard(w)
            w.transport.abort()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not data:
                    with contextlib.suppress(OSError):
                        dst.write_eof()
                    return
                dst.write(data)
                await dst.drain()

        sender = loop.create_task(send())
        try:
            while True:
                data = await src.read(65536)
                due = loop.time() + random.uniform(*self.delay)
                await queue.put((due, data))
                if not data:
                    break
            await sender
        finally:
            sender.cancel()
            dst.transport.abort()


@dataclass
class Webhook:
    """A validating admission webhook over HTTPS on loopback (its own CA, handed to the API server as the
    caBundle), denying CREATE and UPDATE of the objects whose names are in `deny` with `message`."""

    workdir: Path
    deny: set[str] = field(default_factory=set)
    message: str = "writes to this pool are frozen by the test's change freeze"
    port: int = 0
    seen: list[tuple[str, str, bool]] = field(default_factory=list)  # (operation, name, allowed)
    _server: ThreadingHTTPServer | None = None

    def ca_bundle(self) -> str:
        return base64.b64encode((self.workdir / "ca.crt").read_bytes()).decode()

    def __enter__(self) -> Webhook:
        d = self.workdir
        d.mkdir(parents=True, exist_ok=True)
        _openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=webhook-ca",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
                 "-keyout", "ca.key", "-out", "ca.crt")  # fmt: skip
        _openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=webhook", "-keyout", "tls.key",
                 "-out", "tls.csr")  # fmt: skip
        (d / "tls.ext").write_text("extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n", encoding="utf-8")
        _openssl(d, "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", "tls.ext", "-out", "tls.crt")  # fmt: skip
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = review["request"]
                name = request.get("name") or (request.get("object") or {}).get("metadata", {}).get("name", "")
                allowed = name not in hook.deny
                hook.seen.append((request.get("operation", ""), name, allowed))
                response: JSON = {"uid": request["uid"], "allowed": allowed}
                if not allowed:
                    response["status"] = {"code": 403, "reason": "Forbidden", "message": hook.message}
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": response}).encode()  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(d / "tls.crt", d / "tls.key")
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self.port = int(server.server_address[1])
        self._server = server
        threading.Thread(target=server.serve_forever, name="webhook", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def configuration(self, name: str, namespace: str) -> JSON:
        """The ValidatingWebhookConfiguration: Deployments (not their status) in `namespace`, failing closed."""
        return {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{
                "name": "freeze.specserve.test",
                "clientConfig": {"url": f"https://127.0.0.1:{self.port}/validate", "caBundle": self.ca_bundle()},
                "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                           "resources": ["deployments"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }],
        }  # fmt: skip


def etcd_call(endpoint: str, path: str, body: JSON) -> JSON:
    """One call to etcd's v3 HTTP gateway (JSON; keys are base64)."""
    req = urllib.request.Request(f"{endpoint}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def etcd_compact(endpoint: str) -> int:
    """Compact etcd's history up to its current revision (as the API server's compactor does every 5 minutes,
    here at once): a watch from any older resourceVersion that etcd must serve ends in 410 Gone."""
    revision = int(etcd_call(endpoint, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    etcd_call(endpoint, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


@contextlib.contextmanager
def applied(plane: Any, doc: JSON) -> Iterator[None]:
    """`doc` applied (cluster-scoped) for the block, deleted after it."""
    plane.apply(doc)
    try:
        yield
    finally:
        plane.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found", check=False)

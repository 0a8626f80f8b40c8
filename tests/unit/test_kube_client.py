"""KubeClient against a scripted aiohttp server on loopback: timeouts, retries, errors, auth, concurrency."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from kubernetes import client as k8s

from specserve.kube import client as client_module
from specserve.kube.client import ClientOptions, FencedError, KubeClient, KubeError
from specserve.kube.kinds import DEPLOYMENT, SPECSERVE
from specserve.telemetry import REGISTRY

Reply = Callable[[web.Request], Any]
FAST = ClientOptions(connect_timeout=1.0, request_timeout=2.0, attempts=3, backoff_base=0.001, backoff_max=0.01)


@dataclass
class Scripted:
    """Answers each path from a queue of replies (the last one repeats); records what it was sent."""

    replies: dict[str, list[Reply]] = field(default_factory=dict)
    seen: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def script(self, path: str, *replies: Reply) -> None:
        self.replies[path] = list(replies)

    def count(self, path: str) -> int:
        return sum(1 for _, p, _, _ in self.seen if p == path)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append((request.method, request.path, dict(request.headers), await request.read()))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            queue = self.replies.get(request.path) or [lambda _: web.json_response({"kind": "Status"}, status=404)]
            reply = queue.pop(0) if len(queue) > 1 else queue[0]
            result = reply(request)
            if asyncio.iscoroutine(result):
                result = await result
            assert isinstance(result, web.StreamResponse)
            return result
        finally:
            self.in_flight -= 1


def ok(body: dict[str, Any] | None = None) -> Reply:
    return lambda _: web.json_response(body if body is not None else {"metadata": {"name": "x"}})


def status(code: int, headers: dict[str, str] | None = None) -> Reply:
    return lambda _: web.json_response({"kind": "Status", "message": f"code {code}"}, status=code, headers=headers)


def text(code: int, body: str) -> Reply:
    return lambda _: web.Response(status=code, text=body, content_type="text/html")


def slow(seconds: float, then: Reply) -> Reply:
    async def reply(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(seconds)
        result = then(request)
        assert isinstance(result, web.StreamResponse)
        return result

    return reply


@dataclass
class Server:
    scripted: Scripted
    url: str

    def client(self, options: ClientOptions = FAST, token: str = "t0k3n") -> KubeClient:
        configuration = k8s.Configuration()
        configuration.host = self.url
        configuration.api_key = {"authorization": f"Bearer {token}"}
        return KubeClient(configuration, options)


@pytest.fixture()
async def server() -> AsyncIterator[Server]:
    scripted = Scripted()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", scripted.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)  # do not wait for the hung handler
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield Server(scripted, f"http://127.0.0.1:{port}")
    await runner.cleanup()


@pytest.fixture()
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff delays the client asked for (it still sleeps, briefly)."""
    asked: list[float] = []

    async def record(delay: float) -> None:
        asked.append(delay)
        await asyncio.sleep(0)

    monkeypatch.setattr(client_module, "_sleep", record)
    return asked


DEPLOY_PATH = DEPLOYMENT.object_path("llm", "web")


async def test_get_sends_the_bearer_token_and_returns_the_object(server: Server) -> None:
    server.scripted.script(DEPLOY_PATH, ok({"metadata": {"name": "web"}}))
    kube = server.client()
    try:
        assert await kube.get(DEPLOYMENT, "llm", "web") == {"metadata": {"name": "web"}}
    finally:
        await kube.close()
    _, _, headers, _ = server.scripted.seen[0]
    assert headers["Authorization"] == "Bearer t0k3n"


async def test_a_refreshed_token_is_used_from_the_next_call(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specserve.kube.client.AUTH_REFRESH_SECONDS", 0.0)  # no reuse window
    server.scripted.script(DEPLOY_PATH, ok())
    kube = server.client()
    tokens = iter(["first", "second"])

    def refresh(configuration: k8s.Configuration) -> None:  # what in-cluster rotation and exec plugins do
        configuration.api_key["authorization"] = f"Bearer {next(tokens)}"

    setattr(kube._configuration, "refresh_api_key_hook", refresh)  # noqa: B010 (typed None in the client)
    try:
        await kube.get(DEPLOYMENT, "llm", "web")
        await kube.get(DEPLOYMENT, "llm", "web")
    finally:
        await kube.close()
    assert [h["Authorization"] for _, _, h, _ in server.scripted.seen] == ["Bearer first", "Bearer second"]


async def test_credentials_are_reused_for_a_while_and_read_again_after_a_401(server: Server) -> None:
    server.scripted.script(DEPLOY_PATH, ok(), ok(), status(401), ok())
    kube = server.client()
    tokens = iter(["first", "second", "third"])

    def refresh(configuration: k8s.Configuration) -> None:
        configuration.api_key["authorization"] = f"Bearer {next(tokens)}"

    setattr(kube._configuration, "refresh_api_key_hook", refresh)  # noqa: B010 (typed None in the client)
    try:
        await kube.get(DEPLOYMENT, "llm", "web")
        await kube.get(DEPLOYMENT, "llm", "web")  # within the reuse window: the same token, no refresh
        await kube.get(DEPLOYMENT, "llm", "web")  # refused: read again and retried once
    finally:
        await kube.close()
    seen = [h["Authorization"] for _, _, h, _ in server.scripted.seen]
    assert seen == ["Bearer first", "Bearer first", "Bearer first", "Bearer second"]


async def test_from_environment_reads_the_kubeconfig_token(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server.url}}],
                "users": [{"name": "u", "user": {"token": "from-kubeconfig"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    server.scripted.script(DEPLOY_PATH, ok())
    kube = KubeClient.from_environment(FAST)
    try:
        await kube.get(DEPLOYMENT, "llm", "web")
    finally:
        await kube.close()
    assert server.scripted.seen[0][2]["Authorization"] == "Bearer from-kubeconfig"


async def test_not_found_is_none_and_a_missing_kind_lists_empty(server: Server) -> None:
    kube = server.client()
    try:
        assert await kube.get(DEPLOYMENT, "llm", "web") is None
        assert await kube.list(DEPLOYMENT, "llm", {"a": "b"}) == []
        await kube.delete(DEPLOYMENT, "llm", "web")  # already gone is done
    finally:
        await kube.close()


@pytest.mark.parametrize("code", [429, 500, 502, 503, 504])
async def test_transient_statuses_are_retried_until_success(server: Server, sleeps: list[float], code: int) -> None:
    server.scripted.script(DEPLOY_PATH, status(code), status(code), ok({"metadata": {"name": "web"}}))
    kube = server.client()
    try:
        assert await kube.get(DEPLOYMENT, "llm", "web") == {"metadata": {"name": "web"}}
    finally:
        await kube.close()
    assert server.scripted.count(DEPLOY_PATH) == 3
    assert len(sleeps) == 2


async def test_retries_are_bounded_and_end_in_a_kube_error(server: Server, sleeps: list[float]) -> None:
    server.scripted.script(DEPLOY_PATH, status(503))
    kube = server.client()
    try:
        with pytest.raises(KubeError) as caught:
            await kube.get(DEPLOYMENT, "llm", "web")
    finally:
        await kube.close()
    assert caught.value.status == 503
    assert server.scripted.count(DEPLOY_PATH) == FAST.attempts
    assert "code 503" in str(caught.value)


async def test_backoff_grows_and_is_jittered_below_its_cap(server: Server, sleeps: list[float]) -> None:
    options = ClientOptions(attempts=6, backoff_base=0.5, backoff_max=2.0, request_timeout=2.0)
    server.scripted.script(DEPLOY_PATH, status(500))
    kube = server.client(options)
    try:
        with pytest.raises(KubeError):
            await kube.get(DEPLOYMENT, "llm", "web")
    finally:
        await kube.close()
    caps = [min(2.0, 0.5 * 2**n) for n in range(5)]
    assert len(sleeps) == 5
    assert all(0 <= s <= cap for s, cap in zip(sleeps, caps, strict=True))


async def test_retry_after_is_honoured_up_to_the_backoff_cap(server: Server, sleeps: list[float]) -> None:
    options = ClientOptions(attempts=3, backoff_base=0.001, backoff_max=5.0, request_timeout=2.0)
    server.scripted.script(DEPLOY_PATH, status(429, {"Retry-After": "3"}), status(429, {"Retry-After": "60"}), ok())
    kube = server.client(options)
    try:
        await kube.get(DEPLOYMENT, "llm", "web")
    finally:
        await kube.close()
    assert sleeps == [3.0, 5.0]


async def test_client_errors_are_not_retried(server: Server, sleeps: list[float]) -> None:
    server.scripted.script(DEPLOY_PATH, status(422))
    kube = server.client()
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "llm"}}
    try:
        with pytest.raises(KubeError) as caught:
            await kube.apply(manifest)
    finally:
        await kube.close()
    assert caught.value.status == 422 and server.scripted.count(DEPLOY_PATH) == 1 and sleeps == []


async def test_apply_is_retried_as_server_side_apply_is_idempotent(server: Server, sleeps: list[float]) -> None:
    server.scripted.script(DEPLOY_PATH, status(500), ok())
    kube = server.client()
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "llm"}}
    try:
        await kube.apply(manifest)
    finally:
        await kube.close()
    methods = [(m, h["Content-Type"]) for m, p, h, _ in server.scripted.seen if p == DEPLOY_PATH]
    assert methods == [("PATCH", "application/apply-patch+yaml")] * 2


async def test_create_is_not_retried_and_a_conflict_is_none(server: Server, sleeps: list[float]) -> None:
    collection = DEPLOYMENT.collection_path("llm")
    server.scripted.script(collection, status(500))
    kube = server.client()
    try:
        with pytest.raises(KubeError) as caught:
            await kube.create(DEPLOYMENT, "llm", {"metadata": {"name": "web"}})
        assert caught.value.status == 500 and server.scripted.count(collection) == 1
        server.scripted.script(collection, status(409))
        assert await kube.create(DEPLOYMENT, "llm", {"metadata": {"name": "web"}}) is None
    finally:
        await kube.close()


async def test_an_unreachable_server_is_a_kube_error_with_status_zero(sleeps: list[float]) -> None:
    configuration = k8s.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing listens
    kube = KubeClient(configuration, FAST)
    try:
        with pytest.raises(KubeError) as caught:
            await kube.get(DEPLOYMENT, "llm", "web")
    finally:
        await kube.close()
    assert caught.value.status == 0
    assert len(sleeps) == FAST.attempts - 1  # transport errors are retried too


async def test_non_json_bodies_are_kube_errors(server: Server, sleeps: list[float]) -> None:
    server.scripted.script(DEPLOY_PATH, text(200, "<html>proxy says hi</html>"))
    other = SPECSERVE.object_path("llm", "web")
    server.scripted.script(other, text(502, "<html>Bad Gateway</html>"))
    kube = server.client()
    try:
        with pytest.raises(KubeError) as ok_but_html:
            await kube.get(DEPLOYMENT, "llm", "web")
        with pytest.raises(KubeError) as bad_gateway:
            await kube.get(SPECSERVE, "llm", "web")
    finally:
        await kube.close()
    assert ok_but_html.value.status == 200 and "non-JSON" in str(ok_but_html.value)
    assert bad_gateway.value.status == 502 and "Bad Gateway" in str(bad_gateway.value)


async def test_a_json_answer_that_is_not_an_object_is_a_kube_error(server: Server) -> None:
    server.scripted.script(DEPLOY_PATH, lambda _: web.json_response([1, 2]))
    kube = server.client()
    try:
        with pytest.raises(KubeError):
            await kube.get(DEPLOYMENT, "llm", "web")
    finally:
        await kube.close()


async def test_a_hung_call_times_out_without_blocking_other_calls(server: Server, sleeps: list[float]) -> None:
    hung = SPECSERVE.object_path("llm", "stuck")
    server.scripted.script(hung, slow(3600, ok()))
    server.scripted.script(DEPLOY_PATH, ok({"metadata": {"name": "web"}}))
    options = ClientOptions(request_timeout=0.5, attempts=2, backoff_base=0.001, connection_limit=4)
    kube = server.client(options)
    finished: list[str] = []

    async def stuck() -> None:
        with pytest.raises(KubeError) as caught:
            await kube.get(SPECSERVE, "llm", "stuck")
        assert caught.value.status == 0
        finished.append("stuck")

    async def others() -> None:
        for _ in range(10):
            assert await kube.get(DEPLOYMENT, "llm", "web") is not None
        finished.append("others")

    try:
        await asyncio.gather(stuck(), others())
    finally:
        await kube.close()
    assert finished == ["others", "stuck"]
    assert server.scripted.count(hung) == 2  # timed out, retried once, timed out again


async def test_concurrent_calls_are_bounded_by_the_connection_limit(server: Server) -> None:
    server.scripted.script(DEPLOY_PATH, slow(0.05, ok()))
    kube = server.client(ClientOptions(connection_limit=3, request_timeout=10.0))
    try:
        await asyncio.gather(*(kube.get(DEPLOYMENT, "llm", "web") for _ in range(12)))
    finally:
        await kube.close()
    assert server.scripted.count(DEPLOY_PATH) == 12
    assert server.scripted.max_in_flight == 3


async def test_post_event_sends_a_core_event_and_never_raises(server: Server) -> None:
    events = "/api/v1/namespaces/llm/events"
    server.scripted.script(events, ok(), status(403))
    kube = server.client()
    involved = {
        "apiVersion": "specserve.io/v1alpha1",
        "kind": "SpecServe",
        "metadata": {"name": "kimi", "namespace": "llm", "uid": "u1"},
    }
    try:
        await kube.post_event(involved, reason="Switched", message="to Baseline", type_="Normal")
        await kube.post_event(involved, reason="Refused", message="forbidden", type_="Warning")  # logged only
    finally:
        await kube.close()
    sent = [json.loads(body) for method, path, _, body in server.scripted.seen if path == events]
    assert len(sent) == 2
    assert sent[0]["involvedObject"]["uid"] == "u1" and sent[0]["reason"] == "Switched"
    assert sent[0]["metadata"]["name"].startswith("kimi.") and sent[0]["type"] == "Normal"
    assert sent[0]["metadata"]["name"] != sent[1]["metadata"]["name"]


# TLS as kubeconfigs and the in-cluster service account configure it: a private CA, optionally client certs.


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)  # fmt: skip
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n", encoding="utf-8")
    for name, cn in (("server", "127.0.0.1"), ("client", "specserve")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", "san.ext", "-out", f"{name}.crt", cwd=d)  # fmt: skip
    return d


@pytest.fixture()
async def tls_server(pki: Path) -> AsyncIterator[str]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "server.crt"), str(pki / "server.key"))
    context.verify_mode = ssl.CERT_REQUIRED  # mTLS, as an API server with client-certificate users

    async def handle(request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        return web.json_response({"metadata": {"name": "web"}, "peer": bool(peer)})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    yield f"https://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


def tls_client(url: str, pki: Path, *, ca: bool = True, cert: bool = True) -> KubeClient:
    configuration = k8s.Configuration()
    configuration.host = url
    configuration.ssl_ca_cert = str(pki / "ca.crt") if ca else None
    if cert:
        configuration.cert_file, configuration.key_file = str(pki / "client.crt"), str(pki / "client.key")
    return KubeClient(configuration, ClientOptions(attempts=1, request_timeout=5))


async def test_tls_with_the_cluster_ca_and_a_client_certificate(tls_server: str, pki: Path) -> None:
    kube = tls_client(tls_server, pki)
    try:
        got = await kube.get(DEPLOYMENT, "llm", "web")
    finally:
        await kube.close()
    assert got is not None and got["peer"] is True


async def test_tls_refuses_a_server_the_ca_did_not_sign(tls_server: str, pki: Path) -> None:
    kube = tls_client(tls_server, pki, ca=False)  # the system CAs do not know the test CA
    try:
        with pytest.raises(KubeError) as caught:
            await kube.get(DEPLOYMENT, "llm", "web")
    finally:
        await kube.close()
    assert caught.value.status == 0 and "certificate" in str(caught.value).lower()


async def test_a_lane_has_its_own_connections_and_the_same_write_fence(server: Server) -> None:
    """The failover's lane never queues behind calls that hold every connection of the shared client, and
    writes nothing the shared client's fence would refuse, as the fence changes."""
    busy = SPECSERVE.object_path("llm", "busy")
    server.scripted.script(busy, slow(3600, ok()))
    server.scripted.script(DEPLOY_PATH, ok({"metadata": {"name": "web"}}))
    kube = server.client(ClientOptions(connection_limit=2, request_timeout=3600.0, attempts=1))
    leading = True
    kube.fence(lambda: leading)
    lane = kube.lane()
    holding = [asyncio.create_task(kube.get(SPECSERVE, "llm", "busy")) for _ in range(2)]
    try:
        await asyncio.sleep(0.2)  # both connections of the shared pool are held
        queued = asyncio.create_task(kube.get(DEPLOYMENT, "llm", "web"))
        assert await asyncio.wait_for(lane.get(DEPLOYMENT, "llm", "web"), timeout=5) is not None
        assert not queued.done(), "the shared client had a free connection: the test proves nothing"
        leading = False
        with pytest.raises(FencedError):
            await lane.delete(DEPLOYMENT, "llm", "web")
        queued.cancel()
    finally:
        for task in holding:
            task.cancel()
        await asyncio.gather(*holding, return_exceptions=True)
        await kube.close()
        await lane.close()


async def test_warning_headers_are_logged_once_and_shared_with_the_lane(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    def warned(_: web.Request) -> web.StreamResponse:
        response = web.json_response({"metadata": {"name": "web"}})
        response.headers.add("Warning", '299 - "would violate PodSecurity \\"restricted:latest\\": runAsNonRoot"')
        response.headers.add("Warning", '299 - "second"')
        return response

    server.scripted.script(DEPLOY_PATH, warned)
    kube = server.client()
    lane = kube.lane()
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "llm"}}
    try:
        with caplog.at_level(logging.WARNING, logger="specserve.kube.client"):
            await kube.apply(manifest)
            await lane.apply(manifest)
            assert await kube.get(DEPLOYMENT, "llm", "web") == {"metadata": {"name": "web"}}
    finally:
        await kube.close()
        await lane.close()
    assert [r.getMessage() for r in caplog.records] == [
        f'the API server warns on PATCH {DEPLOY_PATH}: would violate PodSecurity "restricted:latest": runAsNonRoot',
        f"the API server warns on PATCH {DEPLOY_PATH}: second",
    ]  # once per (object, text): not again for the lane's apply, nor for a GET of the same object


def unavailable(verb: str, resource: str) -> float:
    return REGISTRY.get_sample_value("specserve_api_unavailable_total", {"verb": verb, "resource": resource}) or 0.0


async def test_each_attempt_without_a_usable_answer_is_counted_on_the_metrics(
    server: Server, sleeps: list[float]
) -> None:
    """An API server or etcd outage, on the operator's metrics while it lasts: 5xx, 429, no answer (refused, hung
    past the read timeout) counted per attempt by verb and resource; a 404 or a 409 is an answer, not counted."""
    before = unavailable("GET", "deployments"), unavailable("GET", "specserves")
    server.scripted.script(DEPLOY_PATH, status(503), status(429), ok({"metadata": {"name": "web"}}))
    hung = SPECSERVE.object_path("llm", "stuck")
    server.scripted.script(hung, slow(3600, ok()))
    kube = server.client(ClientOptions(request_timeout=30, read_timeout=0.3, attempts=3, backoff_base=0.001))
    try:
        assert await kube.get(DEPLOYMENT, "llm", "web") is not None
        assert await kube.get(DEPLOYMENT, "llm", "absent-in-404") is None
        with pytest.raises(KubeError):
            await kube.get(SPECSERVE, "llm", "stuck")
    finally:
        await kube.close()
    assert unavailable("GET", "deployments") - before[0] == 2
    assert unavailable("GET", "specserves") - before[1] == 1  # the read timeout cut its only attempt

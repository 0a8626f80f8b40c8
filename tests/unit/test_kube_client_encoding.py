"""R2: apply bodies the API server decodes as YAML, and manifests the templates write as YAML. A character outside
the BMP must apply; NaN/Infinity are never sent. The server here decodes an apply-patch+yaml body as the real one
does (go-yaml: surrogate escapes and raw control characters refused with a 400); tests/cluster/test_cluster.py
applies the same on a real API server."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from kubernetes import client as k8s

from specserve.api.validation import parse_object
from specserve.kube.client import ClientOptions, KubeClient, KubeError, encode_body
from specserve.kube.kinds import DEPLOYMENT
from specserve.render.manifests import render

FAST = ClientOptions(connect_timeout=1.0, request_timeout=2.0, attempts=1)
PATH = DEPLOYMENT.object_path("llm", "web")
# What go-yaml accepts raw (YAML 1.1's printable set) and its refusal of a \u escape naming a surrogate.
_UNPRINTABLE = re.compile("[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_SURROGATE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def go_yaml_decode(raw: bytes) -> Any:
    text = raw.decode("utf-8")
    if _UNPRINTABLE.search(text):
        raise ValueError("control characters are not allowed")
    if _SURROGATE_ESCAPE.search(text):
        raise ValueError("found invalid Unicode character escape code")
    return yaml.safe_load(text)


def manifest(env_value: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "llm"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "env": [{"name": "X", "value": env_value}]}]}}},
    }  # fmt: skip


@pytest.fixture()
async def server() -> AsyncIterator[tuple[str, list[Any]]]:
    applied: list[Any] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            applied.append(go_yaml_decode(await request.read()))
        except ValueError as exc:
            return web.json_response({"kind": "Status", "code": 400, "message": str(exc)}, status=400)
        return web.json_response(applied[-1])

    app = web.Application()
    app.router.add_route("PATCH", PATH, handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", applied
    await runner.cleanup()


def client(url: str) -> KubeClient:
    configuration = k8s.Configuration()
    configuration.host = url
    return KubeClient(configuration, FAST)


@pytest.mark.parametrize(
    "value",
    [
        "model 🚀 ready",
        "\U0001d11e clef, \u4e2d\u6587, é",
        "del\x7f nel\x85 c1\x9f ls\u2028 bom\ufeff",
        'quote " back \\ud83d',
    ],
)
async def test_any_string_applies_and_reads_back_the_same(server: tuple[str, list[Any]], value: str) -> None:
    url, applied = server
    kube = client(url)
    try:
        await kube.apply(manifest(value))
    finally:
        await kube.close()
    assert applied == [manifest(value)]


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
async def test_nan_and_infinity_are_never_sent(server: tuple[str, list[Any]], number: float) -> None:
    url, applied = server
    kube = client(url)
    try:
        with pytest.raises(KubeError, match="not sent") as refused:
            await kube.apply(manifest(number))
    finally:
        await kube.close()
    assert refused.value.status == 400
    assert applied == []


def test_a_lone_surrogate_is_refused_not_sent_mangled() -> None:
    with pytest.raises(ValueError, match="surrogates"):
        encode_body({"value": "\ud83d"})


@pytest.mark.parametrize("value", ["serving 🚀 \U0001d11e", "nel\x85 ls\u2028 c1\x9f", "<&'>"])
def test_the_render_carries_any_env_value_into_the_deployment(value: str) -> None:
    """The templates write every value with `tojson`: ASCII escapes made an emoji unloadable (found on the real
    control plane: tests/cluster)."""
    doc = yaml.safe_load((Path(__file__).parents[2] / "examples/llama31-8b-h100.yaml").read_text(encoding="utf-8"))
    doc["metadata"]["uid"] = "u1"
    doc["spec"]["engine"]["env"] = [{"name": "BANNER", "value": value}]
    deployments = [m for m in render(parse_object(doc)) if m["kind"] == "Deployment"]
    assert deployments
    for d in deployments:
        env = {e["name"]: e.get("value") for e in d["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["BANNER"] == value
        assert go_yaml_decode(encode_body(d)) == d  # and it applies as rendered

"""The emulator's HTTP surface: SGLang 0.5.23 endpoint shapes, errors and /metrics (parsed with
prometheus_client's parser)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from specserve_tools.emulator.engine import EngineConfig, Mode
from specserve_tools.emulator.metrics import (
    METRIC_SIGNATURES,
    SCHEDULER_LABELS,
    STREAM_LABELS,
    build_metrics,
    signatures,
)
from specserve_tools.emulator.profile import load_profile
from specserve_tools.emulator.server import build_app

Factory = Callable[..., Any]


@pytest.fixture()
async def make_client() -> AsyncIterator[Factory]:
    clients: list[TestClient[Any, Any]] = []

    async def factory(mode: Mode = Mode.SPECULATIVE, startup: float = 0.0, **kw: Any) -> TestClient[Any, Any]:
        profile = load_profile(kw.pop("profile", "seed-kimi-k25-rtxpro6000"))
        config = EngineConfig(profile=profile, mode=mode, time_scale=kw.pop("time_scale", 200.0), **kw)
        client: TestClient[Any, Any] = TestClient(TestServer(build_app(config, startup_seconds=startup)))
        await client.start_server()
        clients.append(client)
        return client

    yield factory
    for c in clients:
        await c.close()


CHAT = {"model": "m", "messages": [{"role": "user", "content": "Write a sort function"}], "max_tokens": 12}


async def test_ready_and_health_are_503_until_startup_passes(make_client: Factory) -> None:
    client = await make_client(startup=60.0, time_scale=200.0)  # 0.3 s of wall time
    assert (await client.get("/ready")).status == 503
    assert (await client.get("/health")).status == 503
    assert (await client.get("/health_generate")).status == 503
    assert (await client.post("/v1/chat/completions", json=CHAT)).status == 503
    await asyncio.sleep(0.4)
    assert (await client.get("/ready")).status == 200
    assert (await client.get("/health")).status == 200
    assert (await client.get("/health_generate")).status == 200


async def test_chat_non_streaming_shape(make_client: Factory) -> None:
    client = await make_client()
    resp = await client.post("/v1/chat/completions", json=CHAT)
    assert resp.status == 200
    body = await resp.json()
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] == "length"
    assert len(choice["message"]["content"]) == 12 * 4
    assert body["usage"]["completion_tokens"] == 12
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 12


async def _sse(resp: Any) -> list[Any]:
    events = []
    async for raw in resp.content:
        line = raw.decode().strip()
        if line.startswith("data: "):
            data = line[6:]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


async def test_chat_streaming_shape_with_usage(make_client: Factory) -> None:
    client = await make_client()
    body = {**CHAT, "max_tokens": 40, "stream": True, "stream_options": {"include_usage": True}}
    resp = await client.post("/v1/chat/completions", json=body)
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/event-stream")
    events = await _sse(resp)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert len(text) == 40 * 4
    finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [f["choices"][0]["finish_reason"] for f in finals] == ["length"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 40


async def test_completions_and_generate(make_client: Factory) -> None:
    client = await make_client()
    resp = await client.post("/v1/completions", json={"model": "m", "prompt": "def f(", "max_tokens": 5})
    body = await resp.json()
    assert body["object"] == "text_completion" and body["choices"][0]["text"] == " def int for let var"
    resp = await client.post(
        "/v1/completions",
        json={"prompt": "x", "max_tokens": 6, "stream": True, "stream_options": {"include_usage": True}},
    )
    events = await _sse(resp)
    assert "".join(e["choices"][0]["text"] for e in events[:-1] if e["choices"]) == " def int for let var map"
    resp = await client.post("/generate", json={"text": "hello", "sampling_params": {"max_new_tokens": 3}})
    body = await resp.json()
    assert body["text"] == " def int for"
    assert body["meta_info"]["completion_tokens"] == 3
    assert body["meta_info"]["finish_reason"] == {"type": "length", "length": 3}


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/chat/completions", {"messages": []}, "messages"),
        ("/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]}, "messages"),
        ("/v1/chat/completions", {**CHAT, "max_tokens": -3}, "max_tokens"),
        ("/v1/chat/completions", {**CHAT, "stream": "yes"}, "stream"),
        ("/v1/completions", {"max_tokens": 3}, "prompt"),
        ("/v1/completions", {"prompt": "x", "temperature": -1}, "temperature"),
        ("/generate", {"sampling_params": {"max_new_tokens": 1}}, "text"),
        ("/v1/chat/completions", [1, 2], None),
    ],
)
async def test_malformed_requests_get_openai_style_400(
    make_client: Factory, path: str, body: Any, param: str | None
) -> None:
    client = await make_client()
    resp = await client.post(path, json=body)
    assert resp.status == 400
    err = await resp.json()
    assert err["object"] == "error" and err["type"] == "BadRequestError" and err["code"] == 400
    assert err["param"] == param and err["message"]


async def test_invalid_json_is_400(make_client: Factory) -> None:
    client = await make_client()
    resp = await client.post("/v1/chat/completions", data=b"{not json", headers={"Content-Type": "application/json"})
    assert resp.status == 400
    assert (await resp.json())["type"] == "BadRequestError"


async def test_models_and_server_info(make_client: Factory) -> None:
    client = await make_client()
    models = await (await client.get("/v1/models")).json()
    assert models["object"] == "list" and models["data"][0]["id"] == "moonshotai/Kimi-K2.5"
    await client.post("/v1/chat/completions", json=CHAT)
    info = await (await client.get("/server_info")).json()
    state = info["internal_states"][0]
    assert state["avg_spec_accept_length"] == pytest.approx(2.1)
    assert "last_gen_throughput" in state
    assert info["specserve_emulator"] == {
        "profile": "seed-kimi-k25-rtxpro6000",
        "mode": "speculative",
        "time_scale": 200.0,
    }


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


async def test_metrics_names_types_and_labels(make_client: Factory) -> None:
    client = await make_client()
    await client.post("/v1/chat/completions", json=CHAT)
    await (await client.post("/v1/chat/completions", json={**CHAT, "stream": True})).read()
    text = await (await client.get("/metrics")).text()
    fams = _families(text)
    gauges = ["num_running_reqs", "num_queue_reqs", "gen_throughput", "token_usage", "spec_accept_length",
              "spec_num_steps"]  # fmt: skip
    for name in gauges:
        fam = fams[f"sglang:{name}"]
        assert fam.type == "gauge"
        assert set(fam.samples[0].labels) == set(SCHEDULER_LABELS)
        assert fam.samples[0].labels["engine_type"] == "unified"
    # prometheus_client's parser strips _total from counter family names
    for name in ("prompt_tokens", "generation_tokens", "num_requests"):
        fam = fams[f"sglang:{name}"]
        assert fam.type == "counter"
        totals = {s.labels["is_streaming"]: s.value for s in fam.samples if s.name.endswith("_total")}
        assert set(totals) == {"true", "false"}
        assert all(set(s.labels) == set(STREAM_LABELS) for s in fam.samples)
    assert {s.labels["is_streaming"]: s.value for s in fams["sglang:generation_tokens"].samples
            if s.name.endswith("_total")} == {"true": 12, "false": 12}  # fmt: skip
    for name in ("time_to_first_token_seconds", "request_time_per_output_token_seconds", "e2e_request_latency_seconds"):
        fam = fams[f"sglang:{name}"]
        assert fam.type == "histogram"
        count = [s.value for s in fam.samples if s.name.endswith("_count") and s.labels["is_streaming"] == "true"]
        assert count == [1]
    steps = fams["sglang:spec_num_steps"].samples[0].value
    assert steps == 2  # the seed profile's num_steps
    # SGLang's decode tokens, counted every step: the two finished requests' 24 tokens, under mode="decode"
    decoded = [s for s in fams["sglang:realtime_tokens"].samples if s.name.endswith("_total")]
    assert [(s.labels["mode"], round(s.value)) for s in decoded] == [("decode", 24)]
    assert set(decoded[0].labels) == {*SCHEDULER_LABELS, "mode"}


async def test_baseline_reports_no_speculation(make_client: Factory) -> None:
    client = await make_client(mode=Mode.BASELINE)
    fams = _families(await (await client.get("/metrics")).text())
    assert fams["sglang:spec_num_steps"].samples[0].value == 0
    assert fams["sglang:spec_accept_length"].samples[0].value == 0


async def _gauge(client: TestClient[Any, Any], name: str) -> float:
    fams = _families(await (await client.get("/metrics")).text())
    return float(fams[name].samples[0].value)


async def test_adaptive_turns_drafting_off_above_the_configured_batch(make_client: Factory) -> None:
    client = await make_client(mode=Mode.ADAPTIVE, adaptive_config={1: [2], 4: [0]}, time_scale=1.0)
    assert await _gauge(client, "sglang:spec_num_steps") == 2  # idle: batch 1
    long = {**CHAT, "max_tokens": 5000}
    tasks = [asyncio.create_task(client.post("/v1/chat/completions", json=long)) for _ in range(5)]
    await asyncio.sleep(0.3)
    assert await _gauge(client, "sglang:num_running_reqs") == 5
    assert await _gauge(client, "sglang:spec_num_steps") == 0
    # drafting off: throughput follows the baseline curve (times the draft-extend overhead)
    seed = load_profile("seed-kimi-k25-rtxpro6000")
    assert await _gauge(client, "sglang:gen_throughput") == pytest.approx(seed.baseline.at(5) * 0.95)
    for t in tasks:
        t.cancel()


async def test_requests_beyond_the_cap_queue(make_client: Factory) -> None:
    client = await make_client(max_running=2, time_scale=1.0)
    long = {**CHAT, "max_tokens": 5000}
    tasks = [asyncio.create_task(client.post("/v1/chat/completions", json=long)) for _ in range(5)]
    await asyncio.sleep(0.3)
    assert await _gauge(client, "sglang:num_running_reqs") == 2
    assert await _gauge(client, "sglang:num_queue_reqs") == 3
    for t in tasks:
        t.cancel()


def test_metric_signatures_match_the_built_registry() -> None:
    built = signatures(build_metrics())
    assert built == METRIC_SIGNATURES
    for name in ("sglang:num_running_reqs", "sglang:spec_num_steps", "sglang:generation_tokens_total",
                 "sglang:request_time_per_output_token_seconds"):  # fmt: skip
        assert name in built


async def test_every_signature_is_exported_with_its_type(make_client: Factory) -> None:
    client = await make_client()
    await client.post("/v1/chat/completions", json=CHAT)
    fams = _families(await (await client.get("/metrics")).text())
    for name, (kind, labels) in METRIC_SIGNATURES.items():
        fam = fams[name.removesuffix("_total")]
        assert fam.type == kind
        if fam.samples:
            assert set(fam.samples[0].labels) - {"le"} == set(labels)

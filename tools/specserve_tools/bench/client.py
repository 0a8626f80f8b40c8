"""One streamed request to an OpenAI-compatible server (SGLang, vLLM, the emulator), with timings.

Uses aiohttp's client (connection pooling, timeouts, streaming reads); we only split the SSE `data:` lines."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from specserve_tools.bench.stats import FALLBACK_CHARS_PER_TOKEN, RequestRecord


class BenchError(Exception):
    """A problem that stops the sweep; the message is one line naming the problem and the fix."""


@dataclass(frozen=True)
class Endpoint:
    """The OpenAI-compatible endpoint a bench or the demo's load sends requests to, and how."""

    base_url: str
    model: str
    api: str = "chat"  # "chat" (/v1/chat/completions) or "completions" (/v1/completions)
    max_tokens: int = 256
    ignore_eos: bool = False


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _error_message(body: str) -> str:
    try:
        doc = json.loads(body)
    except json.JSONDecodeError:
        return _short(body)
    if isinstance(doc, dict):
        err = doc.get("error", doc)
        if isinstance(err, dict) and err.get("message"):
            return _short(str(err["message"]))
    return _short(body)


def request_body(endpoint: Endpoint, prompt: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": endpoint.model,
        "max_tokens": endpoint.max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if endpoint.ignore_eos:
        body["ignore_eos"] = True  # SGLang/vLLM extension: fixed-length outputs
    if endpoint.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def _chunk_text(obj: dict[str, Any]) -> str:
    parts: list[str] = []
    for choice in obj.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict):
            parts.extend(str(delta.get(k) or "") for k in ("content", "reasoning_content"))
        parts.append(str(choice.get("text") or ""))
    return "".join(parts)


async def sse_objects(content: aiohttp.StreamReader) -> AsyncIterator[Any]:
    """The JSON payloads of an OpenAI-style server-sent event stream, up to `data: [DONE]`."""
    async for raw in content:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            return
        yield json.loads(data)


async def stream_one(session: aiohttp.ClientSession, endpoint: Endpoint, prompt: str, rec: RequestRecord) -> None:
    """Fill `rec` in place (so a cancelled request keeps the chunks it got); errors go to rec.error."""
    path = "/v1/chat/completions" if endpoint.api == "chat" else "/v1/completions"
    clock = time.monotonic
    try:
        async with session.post(endpoint.base_url + path, json=request_body(endpoint, prompt)) as resp:
            if resp.status != 200:
                rec.error = f"HTTP {resp.status}: {_error_message(await resp.text())}"
                return
            async for obj in sse_objects(resp.content):
                if not isinstance(obj, dict):
                    continue
                if obj.get("object") == "error" or "error" in obj:
                    rec.error = f"server error mid-stream: {_error_message(json.dumps(obj))}"
                    return
                usage = obj.get("usage")
                if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                    rec.completion_tokens = usage["completion_tokens"]
                text = _chunk_text(obj)
                if text:
                    now = clock()
                    if rec.first_token is None:
                        rec.first_token = now
                    rec.chunks.append((now, len(text)))
        rec.end = clock()
        if rec.completion_tokens is None:  # server sent no usage: estimate from characters
            rec.completion_tokens = max(1, round(rec.chars / FALLBACK_CHARS_PER_TOKEN)) if rec.chars else 0
    except aiohttp.ClientConnectorError as exc:
        rec.error = f"cannot connect to {endpoint.base_url} ({exc.os_error.strerror or exc.os_error})"
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as exc:
        rec.error = f"server closed the stream early ({type(exc).__name__})"
    except aiohttp.ClientError as exc:
        rec.error = f"HTTP client error: {_short(str(exc)) or type(exc).__name__}"
    except TimeoutError:
        rec.error = "request timed out (raise --request-timeout if the server is just slow)"
    except (json.JSONDecodeError, UnicodeDecodeError):
        rec.error = "server sent a malformed SSE data line"


async def get_json(session: aiohttp.ClientSession, url: str) -> Any:
    """GET a JSON document; None on any failure (optional endpoints such as /server_info)."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            if resp.status != 200:
                return None
            return await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError, asyncio.CancelledError):
        return None


async def get_text(session: aiohttp.ClientSession, url: str) -> str | None:
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            return await resp.text() if resp.status == 200 else None
    except (aiohttp.ClientError, TimeoutError):
        return None


async def probe(session: aiohttp.ClientSession, base_url: str) -> list[str]:
    """The served model names; BenchError with a one-line fix when the server cannot be used."""
    url = base_url + "/v1/models"
    try:
        # SGLang answers /health with 503 while it loads the model; servers without /health (404) are fine
        async with session.get(base_url + "/health", timeout=aiohttp.ClientTimeout(total=15)) as resp:
            if resp.status == 503:
                raise BenchError(f"{base_url} is not ready yet (HTTP 503); wait for /health, or use --wait-ready")
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=15)) as resp:
            if resp.status == 503:
                raise BenchError(f"{base_url} is not ready yet (HTTP 503); wait for /health, or use --wait-ready")
            if resp.status != 200:
                raise BenchError(f"GET {url} returned HTTP {resp.status}; is --url an OpenAI-compatible server?")
            doc = await resp.json(content_type=None)
    except aiohttp.ClientConnectorError as exc:
        reason = exc.os_error.strerror or str(exc.os_error)
        raise BenchError(f"cannot reach {base_url} ({reason}); is the server running? check --url") from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise BenchError(f"cannot reach {base_url} ({type(exc).__name__}); check --url") from None
    except json.JSONDecodeError:
        raise BenchError(f"GET {url} did not return JSON; is --url an OpenAI-compatible server?") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    names = [str(m.get("id")) for m in data or [] if isinstance(m, dict) and m.get("id")]
    return names

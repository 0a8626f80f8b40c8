"""The emulator's HTTP server (aiohttp): SGLang 0.5.23's endpoints on top of the emulated engine."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from specserve_tools.emulator import protocol as proto
from specserve_tools.emulator.engine import Engine, EngineConfig, Mode, Request
from specserve_tools.emulator.metrics import EmulatorMetrics, build_metrics

SGLANG_VERSION = "0.5.23"
ENGINE_KEY = web.AppKey("engine", Engine)
STATE_KEY: web.AppKey[EmulatorState] = web.AppKey("state")


@dataclass
class EmulatorState:
    config: EngineConfig
    served_model_name: str
    startup_wall_s: float  # wall seconds until /ready answers 200
    metrics: EmulatorMetrics
    started_wall: float = 0.0
    decoded_exported: float = 0.0  # the engine's decoded tokens already added to realtime_tokens_total

    def ready(self) -> bool:
        return time.monotonic() - self.started_wall >= self.startup_wall_s


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(data), status=status, content_type="application/json")


def _bad(message: str, param: str | None = None) -> web.Response:
    return _json(proto.error_body(message, param), status=400)


def _sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


class Handlers:
    def __init__(self, app: web.Application) -> None:
        self.app = app

    @property
    def engine(self) -> Engine:
        return self.app[ENGINE_KEY]

    @property
    def state(self) -> EmulatorState:
        return self.app[STATE_KEY]

    def _labels(self) -> dict[str, str]:
        return {"model_name": self.state.served_model_name, "engine_type": "unified"}

    # ------------------------------------------------------------------ health and info
    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200 if self.state.ready() else 503)

    async def ready(self, _: web.Request) -> web.Response:
        if not self.state.ready():
            return _json({"status": "starting"}, status=503)
        return _json({"status": "ready"})

    async def health_generate(self, _: web.Request) -> web.Response:
        if not self.state.ready():
            return web.Response(status=503)
        req = self.engine.submit(1, 1, streaming=False)
        while not req.done:
            await req.changed.wait()
            req.changed.clear()
        return web.Response(status=200)

    async def models(self, _: web.Request) -> web.Response:
        name = self.state.served_model_name
        return _json(
            {
                "object": "list",
                "data": [{"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
                          "root": name, "max_model_len": 131072}],
            }
        )  # fmt: skip

    async def model_info(self, _: web.Request) -> web.Response:
        return _json({"model_path": self.state.config.profile.model_name, "is_generation": True})

    async def server_info(self, _: web.Request) -> web.Response:
        cfg, engine = self.state.config, self.engine
        spec = cfg.mode is not Mode.BASELINE
        return _json(
            {
                "version": SGLANG_VERSION,
                "model_path": cfg.profile.model_name,
                "served_model_name": self.state.served_model_name,
                "speculative_algorithm": "EAGLE3" if spec else None,
                "speculative_num_steps": cfg.profile.num_steps if spec else None,
                "speculative_adaptive": cfg.mode is Mode.ADAPTIVE,
                "max_running_requests": engine.cap,
                "internal_states": [
                    {
                        "avg_spec_accept_length": engine.accept_length() if spec else None,
                        "last_gen_throughput": engine.last_throughput,
                    }
                ],
                "specserve_emulator": {
                    "profile": cfg.profile.name,
                    "mode": cfg.mode.value,
                    "time_scale": cfg.time_scale,
                },
            }
        )

    async def flush_cache(self, _: web.Request) -> web.Response:
        return web.Response(text="Cache flushed.\n")

    async def metrics(self, _: web.Request) -> web.Response:
        m, engine = self.state.metrics, self.engine
        labels = {**self._labels(), "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
        n = len(engine.running)
        steps = engine.active_steps(n)
        m.num_running_reqs.labels(**labels).set(n)
        m.num_queue_reqs.labels(**labels).set(len(engine.waiting))
        m.gen_throughput.labels(**labels).set(engine.last_throughput)
        m.token_usage.labels(**labels).set(engine.token_usage())
        m.spec_accept_length.labels(**labels).set(engine.accept_length())
        accept = engine.accept_length()
        m.spec_accept_rate.labels(**labels).set((accept - 1) / steps if steps > 0 else 0.0)
        m.spec_num_steps.labels(**labels).set(steps)
        # SGLang counts decode tokens every decode step: a rate that does not wait for requests to finish
        decoded = max(0.0, engine.decoded - self.state.decoded_exported)
        m.realtime_tokens.labels(**labels, mode="decode").inc(decoded)
        self.state.decoded_exported += decoded
        body = generate_latest(m.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    def record_finish(self, req: Request) -> None:
        """Tokenizer-side metrics of a finished request, in emulated seconds."""
        m = self.state.metrics
        labels = {**self._labels(), "is_streaming": "true" if req.streaming else "false"}
        m.prompt_tokens.labels(**labels).inc(req.prompt_tokens)
        m.generation_tokens.labels(**labels).inc(req.max_tokens)
        m.num_requests.labels(**labels).inc()
        if req.first_at is not None and req.finished_at is not None:
            m.time_to_first_token.labels(**labels).observe(req.first_at - req.arrival)
            m.e2e_request_latency.labels(**labels).observe(req.finished_at - req.arrival)
            if req.max_tokens > 1:
                tpot = (req.finished_at - req.first_at) / (req.max_tokens - 1)
                m.time_per_output_token.labels(**labels).observe(tpot)

    # ------------------------------------------------------------------ generation
    async def _body(self, request: web.Request) -> Any:
        try:
            return await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise proto.BadRequestError("The request body is not valid JSON.") from None

    async def _tokens(self, req: Request) -> AsyncIterator[tuple[int, int]]:
        """Yield (start, stop) ranges of newly visible tokens until the request finishes."""
        sent = 0
        while True:
            await req.changed.wait()
            req.changed.clear()
            if req.aborted:
                return
            if req.visible > sent:
                yield sent, req.visible
                sent = req.visible
            if req.finished_at is not None and sent >= req.max_tokens:
                return

    async def _generate(
        self,
        request: web.Request,
        parse: Callable[[Any], proto.GenParams],
        kind: str,
    ) -> web.StreamResponse:
        if not self.state.ready():
            return _json(proto.error_body("The server is not ready yet.", None, 503), status=503)
        try:
            params = parse(await self._body(request))
        except proto.BadRequestError as exc:
            return _bad(exc.message, exc.param)
        req = self.engine.submit(params.max_tokens, params.prompt_tokens, params.stream, params.temperature)
        rid = {"chat": "chatcmpl-", "completion": "cmpl-", "generate": ""}[kind] + req.rid
        model = self.state.served_model_name
        try:
            if params.stream:
                return await self._stream(request, req, rid, model, kind, params)
            async for _ in self._tokens(req):
                pass
            text = proto.token_text(0, req.max_tokens)
            if kind == "chat":
                return _json(proto.chat_response(rid, model, text, req.prompt_tokens, req.max_tokens))
            if kind == "completion":
                return _json(proto.completion_response(rid, model, text, req.prompt_tokens, req.max_tokens))
            e2e = self._e2e(req)
            return _json(proto.generate_response(rid, text, req.prompt_tokens, req.max_tokens, e2e, True))
        finally:
            if not req.done:  # client went away: free the slot like SGLang's abort
                self.engine.abort(req)
                self.state.metrics.num_aborted_requests.labels(**self._labels()).inc()

    def _e2e(self, req: Request) -> float:
        return (req.finished_at or self.engine.now()) - req.arrival

    async def _stream(
        self, request: web.Request, req: Request, rid: str, model: str, kind: str, params: proto.GenParams
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        with contextlib.suppress(ConnectionError):  # the client went away: _generate aborts the request
            await resp.prepare(request)
            if kind == "chat":
                await resp.write(_sse(proto.chat_chunk(rid, model, {"role": "assistant", "content": ""})))
            async for start, stop in self._tokens(req):
                text = proto.token_text(start, stop)
                if kind == "chat":
                    chunk = proto.chat_chunk(rid, model, {"content": text})
                elif kind == "completion":
                    chunk = proto.completion_chunk(rid, model, text)
                else:  # /generate streams the cumulative text
                    chunk = proto.generate_response(
                        rid, proto.token_text(0, stop), req.prompt_tokens, stop, self._e2e(req), False
                    )
                await resp.write(_sse(chunk))
            if req.aborted:
                return resp
            n = req.max_tokens
            if kind == "chat":
                await resp.write(_sse(proto.chat_chunk(rid, model, {}, "length")))
            elif kind == "completion":
                await resp.write(_sse(proto.completion_chunk(rid, model, "", "length")))
            else:
                text = proto.token_text(0, n)
                await resp.write(_sse(proto.generate_response(rid, text, req.prompt_tokens, n, self._e2e(req), True)))
            if params.include_usage and kind != "generate":
                obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
                await resp.write(_sse(proto.usage_chunk(rid, model, obj, req.prompt_tokens, n)))
            await resp.write(_sse("[DONE]"))
            await resp.write_eof()
        return resp

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, proto.parse_chat, "chat")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, proto.parse_completion, "completion")

    async def generate(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, proto.parse_generate, "generate")


def build_app(
    config: EngineConfig, served_model_name: str | None = None, startup_seconds: float | None = None
) -> web.Application:
    """The emulator as an aiohttp application; the engine starts with the app (on_startup)."""
    app = web.Application(client_max_size=16 * 1024 * 1024)
    startup = config.profile.startup_seconds if startup_seconds is None else startup_seconds
    app[STATE_KEY] = EmulatorState(
        config=config,
        served_model_name=served_model_name or config.profile.model_name,
        startup_wall_s=startup / config.time_scale,
        metrics=build_metrics(),
    )
    h = Handlers(app)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        engine = Engine(config, on_finish=h.record_finish)
        app[ENGINE_KEY] = engine
        app[STATE_KEY].started_wall = time.monotonic()
        task = asyncio.create_task(engine.run())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app.cleanup_ctx.append(lifecycle)
    r = app.router
    r.add_get("/health", h.health)
    r.add_get("/health_generate", h.health_generate)
    r.add_get("/ready", h.ready)
    r.add_get("/v1/models", h.models)
    r.add_get("/model_info", h.model_info)
    r.add_get("/get_model_info", h.model_info)
    r.add_get("/server_info", h.server_info)
    r.add_get("/get_server_info", h.server_info)
    r.add_get("/metrics", h.metrics)
    r.add_post("/flush_cache", h.flush_cache)
    r.add_post("/v1/chat/completions", h.chat)
    r.add_post("/v1/completions", h.completions)
    r.add_post("/generate", h.generate)
    return app

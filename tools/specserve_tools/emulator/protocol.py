"""Request validation and response bodies in the shapes SGLang 0.5.23 uses (OpenAI-compatible and native).

Pure functions: the server feeds them parsed JSON and serialises what they return."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_TOKENS = 256  # SGLang would generate until EOS or the context limit; the emulator never sees EOS
ROLES = frozenset({"system", "user", "assistant", "tool", "developer", "function"})
VOCAB = (" def", " int", " for", " let", " var", " map", " key", " sum",
         " len", " arg", " row", " col", " new", " add", " get", " set")  # fmt: skip
CYCLE = "".join(VOCAB)
CHARS_PER_TOKEN = 4  # every emulated token is 4 characters, so clients can count tokens in a chunk


class BadRequestError(ValueError):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


def error_body(message: str, param: str | None = None, code: int = 400) -> dict[str, Any]:
    """SGLang's OpenAI-style error (ErrorResponse in sglang/srt/entrypoints/openai/protocol.py)."""
    kind = "BadRequestError" if code == 400 else "InternalServerError" if code >= 500 else "Error"
    return {"object": "error", "message": message, "type": kind, "param": param, "code": code}


def token_text(start: int, stop: int) -> str:
    """Text of emulated tokens [start, stop): a fixed 16-token cycle of 4-character pieces."""
    offset = (start % len(VOCAB)) * CHARS_PER_TOKEN
    length = (stop - start) * CHARS_PER_TOKEN
    reps = (offset + length) // len(CYCLE) + 1
    return (CYCLE * reps)[offset : offset + length]


def count_prompt_tokens(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class GenParams:
    max_tokens: int
    prompt_tokens: int
    stream: bool
    include_usage: bool
    temperature: float = 0.0  # absent counts as greedy: the profiles' accept lengths were measured greedy


def _temperature(body: dict[str, Any]) -> float:
    value = body.get("temperature")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequestError("The request body must be a JSON object.")
    return body


def _max_tokens(body: dict[str, Any], *keys: str) -> int:
    for key in keys:
        if key in body and body[key] is not None:
            value = body[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BadRequestError(f"{key} must be a positive integer, got {value!r}.", key)
            return value
    return DEFAULT_MAX_TOKENS


def _stream_flags(body: dict[str, Any]) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequestError("stream must be a boolean.", "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise BadRequestError("stream_options must be an object.", "stream_options")
    include_usage = bool(options.get("include_usage", False)) if options else False
    return stream, include_usage


def _check_sampling(body: dict[str, Any]) -> None:
    for key in ("temperature", "top_p"):
        value = body.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise BadRequestError(f"{key} must be a non-negative number, got {value!r}.", key)


def parse_chat(raw: Any) -> GenParams:
    body = _object(raw)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequestError("messages must be a non-empty list.", "messages")
    text = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ROLES:
            raise BadRequestError(f"messages[{i}] needs a role among {sorted(ROLES)}.", "messages")
        content = msg.get("content")
        if isinstance(content, str):
            text.append(content)
        elif isinstance(content, list):
            text.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
        elif content is not None:
            raise BadRequestError(f"messages[{i}].content must be a string or a list of parts.", "messages")
    _check_sampling(body)
    stream, include_usage = _stream_flags(body)
    return GenParams(
        max_tokens=_max_tokens(body, "max_completion_tokens", "max_tokens"),
        prompt_tokens=count_prompt_tokens(" ".join(text)),
        stream=stream,
        include_usage=include_usage,
        temperature=_temperature(body),
    )


def parse_completion(raw: Any) -> GenParams:
    body = _object(raw)
    prompt = body.get("prompt")
    if isinstance(prompt, str) and prompt:
        tokens = count_prompt_tokens(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        tokens = len(prompt)
    elif isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        tokens = count_prompt_tokens(prompt[0])
    else:
        raise BadRequestError(
            "prompt must be a non-empty string or list of token ids (batches are not emulated).", "prompt"
        )
    _check_sampling(body)
    stream, include_usage = _stream_flags(body)
    return GenParams(_max_tokens(body, "max_tokens"), tokens, stream, include_usage, _temperature(body))


def parse_generate(raw: Any) -> GenParams:
    body = _object(raw)
    text, ids = body.get("text"), body.get("input_ids")
    if isinstance(text, str) and text:
        tokens = count_prompt_tokens(text)
    elif isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids):
        tokens = len(ids)
    else:
        raise BadRequestError("Either text (a non-empty string) or input_ids must be provided.", "text")
    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise BadRequestError("sampling_params must be an object.", "sampling_params")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequestError("stream must be a boolean.", "stream")
    return GenParams(_max_tokens(params, "max_new_tokens"), tokens, stream, False, _temperature(params))


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def _envelope(rid: str, model: str, obj: str, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The OpenAI response and chunk frame every endpoint shares."""
    return {"id": rid, "object": obj, "created": int(time.time()), "model": model, "choices": choices, **extra}


def _choice(finish: str | None, **content: Any) -> dict[str, Any]:
    return {"index": 0, **content, "logprobs": None, "finish_reason": finish, "matched_stop": None}


def chat_response(rid: str, model: str, text: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    message = {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": None}
    return _envelope(
        rid, model, "chat.completion", [_choice("length", message=message)],
        usage=usage(prompt_tokens, completion_tokens),
    )  # fmt: skip


def chat_chunk(rid: str, model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return _envelope(rid, model, "chat.completion.chunk", [_choice(finish, delta=delta)])


def completion_response(rid: str, model: str, text: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return _envelope(
        rid, model, "text_completion", [_choice("length", text=text)], usage=usage(prompt_tokens, completion_tokens)
    )


def completion_chunk(rid: str, model: str, text: str, finish: str | None = None) -> dict[str, Any]:
    return _envelope(rid, model, "text_completion", [_choice(finish, text=text)])


def usage_chunk(rid: str, model: str, obj: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return _envelope(rid, model, obj, [], usage=usage(prompt_tokens, completion_tokens))


def generate_response(
    rid: str, text: str, prompt_tokens: int, completion_tokens: int, e2e: float, finished: bool
) -> dict[str, Any]:
    """SGLang's native /generate body (text is cumulative when streaming)."""
    return {
        "text": text,
        "meta_info": {
            "id": rid,
            "finish_reason": {"type": "length", "length": completion_tokens} if finished else None,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cached_tokens": 0,
            "e2e_latency": e2e,
        },
    }

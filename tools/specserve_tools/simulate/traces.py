"""Trace loaders: the public LLM-serving trace formats, and a closed-loop concurrency format.

Open-loop traces are requests (arrival time, prompt and output tokens): Azure LLM inference CSV, BurstGPT CSV,
Mooncake JSONL. A closed-loop trace is a step function of concurrency (`time,concurrency`): that many clients
each send a new request as soon as their last one finishes. Every loader turns a bad row into a TraceError
naming the file, the line and the field, so the command prints one line instead of a traceback."""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

DEFAULT_TOKENS_PER_REQUEST = 512.0  # closed loop: mean output tokens per request when the trace does not say


class TraceError(ValueError):
    """A trace that cannot be read; the message names the file, line and field."""


class TraceFormat(StrEnum):
    AZURE = "azure"
    BURSTGPT = "burstgpt"
    MOONCAKE = "mooncake"
    CLOSED_LOOP = "closed-loop"


@dataclass(frozen=True)
class Trace:
    """Open loop: `arrivals` (seconds from the start, sorted) with `outputs` (output tokens per request).
    Closed loop: `steps` of (time, concurrency), each holding until the next; `tokens_per_request` is the mean
    output of the requests the clients send."""

    name: str
    duration: float
    arrivals: tuple[float, ...] = ()
    outputs: tuple[int, ...] = ()
    steps: tuple[tuple[float, float], ...] = ()
    tokens_per_request: float = DEFAULT_TOKENS_PER_REQUEST

    @property
    def closed_loop(self) -> bool:
        return bool(self.steps)

    @property
    def requests(self) -> int:
        return len(self.arrivals)


def _fail(path: str, line: int, field: str, problem: str) -> TraceError:
    return TraceError(f"{path}: line {line}: field '{field}': {problem}")


def _number(raw: Any, path: str, line: int, field: str, minimum: float = 0.0) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise _fail(path, line, field, f"expected a number, got {raw!r}") from None
    if not math.isfinite(value) or value < minimum:
        raise _fail(path, line, field, f"expected a number >= {minimum:g}, got {raw!r}")
    return value


def _tokens(raw: Any, path: str, line: int, field: str) -> int:
    value = _number(raw, path, line, field)
    if value != int(value):
        raise _fail(path, line, field, f"expected a whole number of tokens, got {raw!r}")
    return int(value)


def _timestamp(raw: str, path: str, line: int, field: str) -> float:
    """Seconds: a plain number, or an ISO date-time (Azure writes 7 fractional digits; Python reads 6)."""
    try:
        return float(raw)
    except ValueError:
        pass
    text = raw.strip()
    if "." in text:
        head, frac = text.split(".", 1)
        digits = "".join(c for c in frac if c.isdigit())
        text = f"{head}.{digits[:6]}{frac[len(digits) :]}"
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise _fail(path, line, field, f"expected seconds or an ISO date-time, got {raw!r}") from None


def _csv_rows(path: str, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        handle = open(path, encoding="utf-8", newline="")  # noqa: SIM115 (closed in the finally below)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    try:
        reader = csv.DictReader(handle)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [f for f in required if f not in header]
        if missing:
            raise _fail(path, 1, missing[0], f"missing from the header (expected columns: {', '.join(required)})")
        reader.fieldnames = header
        for row in reader:
            if not any((v or "").strip() for v in row.values() if isinstance(v, str)):
                continue  # blank line
            for field in required:
                if row.get(field) is None:
                    raise _fail(path, reader.line_num, field, "missing (short row)")
            yield reader.line_num, row
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except csv.Error as exc:
        raise TraceError(f"{path}: not CSV ({exc})") from exc
    finally:
        handle.close()


def _open_loop(name: str, rows: list[tuple[float, int]], path: str) -> Trace:
    if not rows:
        raise TraceError(f"{path}: no requests in the trace")
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0]
    arrivals = tuple(t - t0 for t, _ in rows)
    outputs = tuple(o for _, o in rows)
    return Trace(name=name, duration=arrivals[-1] + 1.0, arrivals=arrivals, outputs=outputs,
                 tokens_per_request=sum(outputs) / len(outputs))  # fmt: skip


def load_azure(path: str) -> Trace:
    rows: list[tuple[float, int]] = []
    for n, r in _csv_rows(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
        _tokens(r["ContextTokens"], path, n, "ContextTokens")
        rows.append((_timestamp(r["TIMESTAMP"], path, n, "TIMESTAMP"),
                     _tokens(r["GeneratedTokens"], path, n, "GeneratedTokens")))  # fmt: skip
    return _open_loop(Path(path).stem, rows, path)


def load_burstgpt(path: str) -> Trace:
    fields = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
    rows: list[tuple[float, int]] = []
    for n, r in _csv_rows(path, fields):
        _tokens(r["Request tokens"], path, n, "Request tokens")
        out = _tokens(r["Response tokens"], path, n, "Response tokens")
        if out > 0:  # BurstGPT logs failed requests with 0 response tokens: nothing to serve
            rows.append((_number(r["Timestamp"], path, n, "Timestamp"), out))
    return _open_loop(Path(path).stem, rows, path)


def load_mooncake(path: str) -> Trace:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from exc
    rows: list[tuple[float, int]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{path}: line {n}: not valid JSON ({exc.msg})") from None
        if not isinstance(doc, dict):
            raise TraceError(f"{path}: line {n}: expected a JSON object per line")
        for field in ("timestamp", "output_length"):
            if field not in doc:
                raise _fail(path, n, field, "missing")
        if "input_length" in doc:
            _tokens(doc["input_length"], path, n, "input_length")
        rows.append((_number(doc["timestamp"], path, n, "timestamp") / 1000.0,
                     _tokens(doc["output_length"], path, n, "output_length")))  # fmt: skip
    return _open_loop(Path(path).stem, rows, path)


def load_closed_loop(path: str, tokens_per_request: float = DEFAULT_TOKENS_PER_REQUEST) -> Trace:
    steps: list[tuple[float, float]] = []
    for n, r in _csv_rows(path, ("time", "concurrency")):
        t = _number(r["time"], path, n, "time")
        if steps and t <= steps[-1][0]:
            raise _fail(path, n, "time", f"must increase, got {t:g} after {steps[-1][0]:g}")
        steps.append((t, _number(r["concurrency"], path, n, "concurrency")))
    if not steps:
        raise TraceError(f"{path}: no rows in the trace")
    t0 = steps[0][0]
    shifted = tuple((t - t0, c) for t, c in steps)
    # The last row holds for one more step (its own length: the gap before it), so a 24 h file ends at 24 h.
    tail = shifted[-1][0] - shifted[-2][0] if len(shifted) > 1 else 60.0
    return Trace(name=Path(path).stem, duration=shifted[-1][0] + tail, steps=shifted,
                 tokens_per_request=tokens_per_request)  # fmt: skip


LOADERS: dict[TraceFormat, Callable[[str], Trace]] = {
    TraceFormat.AZURE: load_azure,
    TraceFormat.BURSTGPT: load_burstgpt,
    TraceFormat.MOONCAKE: load_mooncake,
    TraceFormat.CLOSED_LOOP: load_closed_loop,
}


def detect_format(path: str) -> TraceFormat:
    """From the first line: a JSON object is Mooncake; otherwise the CSV header names the format."""
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from exc
    if first.startswith("{"):
        return TraceFormat.MOONCAKE
    header = {h.strip() for h in first.split(",")}
    if "GeneratedTokens" in header:
        return TraceFormat.AZURE
    if "Response tokens" in header:
        return TraceFormat.BURSTGPT
    if "concurrency" in header:
        return TraceFormat.CLOSED_LOOP
    raise TraceError(
        f"{path}: line 1: cannot tell the format from the header {first[:80]!r}; pass --format "
        f"({', '.join(f.value for f in TraceFormat)})"
    )


def load_trace(path: str, fmt: TraceFormat | None = None) -> Trace:
    if not Path(path).is_file():
        raise TraceError(f"{path}: no such file")
    return LOADERS[fmt or detect_format(path)](path)


def scale(trace: Trace, time_scale: float = 1.0, rate_scale: float = 1.0, seed: int = 0) -> Trace:
    """Stretch time by `time_scale` (0.5 plays a day in 12 h) and multiply the load by `rate_scale`
    (concurrency for closed loops; for open loops requests are thinned or repeated, deterministically)."""
    if time_scale <= 0 or rate_scale <= 0:
        raise TraceError("--time-scale and --rate-scale must be > 0")
    if trace.closed_loop:
        steps = tuple((t * time_scale, c * rate_scale) for t, c in trace.steps)
        return replace(trace, steps=steps, duration=trace.duration * time_scale)
    rng = random.Random(seed)
    arrivals: list[float] = []
    outputs: list[int] = []
    whole, frac = int(rate_scale), rate_scale - int(rate_scale)
    for t, out in zip(trace.arrivals, trace.outputs, strict=True):
        copies = whole + (1 if rng.random() < frac else 0)
        for i in range(copies):
            arrivals.append(t * time_scale + i * 1e-3)  # copies a millisecond apart: same second, same bin
            outputs.append(out)
    if not arrivals:
        raise TraceError(f"{trace.name}: --rate-scale {rate_scale:g} leaves no requests")
    order = sorted(range(len(arrivals)), key=arrivals.__getitem__)
    return replace(
        trace,
        arrivals=tuple(arrivals[i] for i in order),
        outputs=tuple(outputs[i] for i in order),
        duration=trace.duration * time_scale,
    )

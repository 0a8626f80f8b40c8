"""The demo's load generator: closed-loop clients through the gateway, their number following a demand schedule.

Each client streams one chat completion at a time (the bench's request body) and records when it started, its
first and last token, its tokens, which pod answered (the gateway's response header) and any error."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from specserve_tools.bench.client import Endpoint, request_body, sse_objects
from specserve_tools.demo.gateway import SERVED_BY

PROMPT = "Explain speculative decoding to a new engineer."


@dataclass
class Record:
    start: float
    first_token: float | None = None
    last_token: float | None = None
    end: float | None = None
    tokens: int = 0
    server: str = ""
    error: str | None = None
    chars: int = 0

    @property
    def tpot(self) -> float | None:
        if self.first_token is None or self.last_token is None or self.tokens < 2:
            return None
        return (self.last_token - self.first_token) / (self.tokens - 1)


# Fractions of the run: low, rising, at the peak, falling, low again. The last low stretch is the longest: the
# operator waits out its down-stabilization window and dwell before it moves traffic back.
RAMP_PHASES = (0.1, 0.2, 0.2, 0.2, 0.3)


def ramp(duration: float, low: float, high: float, phases: tuple[float, ...] = RAMP_PHASES) -> Callable[[float], float]:
    """Demand against time: low, up to high, hold, back down to low, hold low (a trapezoid)."""
    lead, rise, hold, fall, _ = (p / sum(phases) for p in phases)

    def demand(t: float) -> float:
        x = min(max(t / duration, 0.0), 1.0)
        if x < lead:
            return low
        if x < lead + rise:
            return low + (high - low) * (x - lead) / rise
        if x < lead + rise + hold:
            return high
        if x < lead + rise + hold + fall:
            return high - (high - low) * (x - lead - rise - hold) / fall
        return low

    return demand


@dataclass
class LoadGenerator:
    url: str
    model: str
    demand: Callable[[float], float]
    max_tokens: int = 256
    records: list[Record] = field(default_factory=list)
    chars: dict[int, int] = field(default_factory=dict)  # characters streamed per whole second since t0
    t0: float = field(default_factory=time.monotonic)
    _active: int = 0

    @property
    def in_flight(self) -> int:
        return self._active

    def _count(self, now: float, chars: int) -> None:
        second = int(now - self.t0)
        self.chars[second] = self.chars.get(second, 0) + chars

    def tokens_per_second(self, now: float, window: int = 3) -> float:
        """Output tokens/s over the last whole `window` seconds, as they streamed (characters converted with
        the tokens-per-character of the requests completed so far)."""
        done = [r for r in self.records[-500:] if r.error is None and r.tokens and r.chars]
        per_char = sum(r.tokens for r in done) / sum(r.chars for r in done) if done else 0.25
        last = int(now - self.t0)
        return sum(self.chars.get(s, 0) for s in range(last - window, last)) * per_char / window

    def target(self) -> int:
        return max(0, round(self.demand(time.monotonic() - self.t0)))

    async def run(self, stop: asyncio.Event, clients: int) -> None:
        self.t0 = time.monotonic()
        connector = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=300, sock_read=60)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            tasks = [asyncio.create_task(self._client(i, session, stop)) for i in range(clients)]
            try:
                await stop.wait()
            finally:
                # Let requests in flight finish (they count), then stop: a cancelled request is no failure.
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _client(self, index: int, session: aiohttp.ClientSession, stop: asyncio.Event) -> None:
        endpoint = Endpoint(self.url, self.model, max_tokens=self.max_tokens)
        body = request_body(endpoint, PROMPT)
        while not stop.is_set():
            if index >= self.target():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=0.2)
                continue
            rec = Record(start=time.monotonic())
            self._active += 1
            try:
                await stream(session, self.url + "/v1/chat/completions", body, rec, self._count)
            finally:
                self._active -= 1
            self.records.append(rec)
            if rec.error:
                await asyncio.sleep(0.2)  # do not spin on a gateway with nowhere to send requests


async def stream(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, object],
    rec: Record,
    on_chars: Callable[[float, int], None] | None = None,
) -> None:
    """One streamed request through the gateway; `on_chars` hears of every chunk (for tok/s as it streams)."""
    try:
        async with session.post(url, json=body) as resp:
            rec.server = resp.headers.get(SERVED_BY, "")
            if resp.status != 200:
                rec.error = f"HTTP {resp.status}: {(await resp.text())[:120]}"
                return
            async for obj in sse_objects(resp.content):
                usage = obj.get("usage") if isinstance(obj, dict) else None
                if isinstance(usage, dict):
                    rec.tokens = int(usage.get("completion_tokens") or rec.tokens)
                chars = sum(len((c.get("delta") or {}).get("content") or "") for c in obj.get("choices") or [])
                if chars:
                    now = time.monotonic()
                    rec.chars += chars
                    if on_chars is not None:
                        on_chars(now, chars)
                    rec.first_token = rec.first_token or now
                    rec.last_token = now
        rec.end = time.monotonic()
        if rec.first_token is None:
            rec.error = "stream ended without a token"
    except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
        rec.error = f"{type(exc).__name__}: {exc}"[:160]

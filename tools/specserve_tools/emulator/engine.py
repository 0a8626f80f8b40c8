"""The emulated scheduler: a fluid model of continuous batching, driven by a profile.

With n requests running, the engine produces T(n) output tokens/s in total (the profile curve for the mode,
piecewise linear), shared equally: each request's progress grows at T(n)/n. At most `max_running` requests run;
the rest wait in a FIFO queue. The profile curves are *measured closed-loop throughput*, which already includes
prefill, so TTFT is part of a request's service time, not added to it: the first token appears `ttft` after
admission and the remaining tokens are spread over the rest of the request's budget (it ends when its progress
reaches max_tokens, exactly as without TTFT). Hence a closed loop of C clients sees T(C).

Time runs `time_scale` times faster than the wall clock: all model quantities (tokens/s, TTFT, start-up) are in
emulated seconds. The loop wakes at the next first-token or completion instant, or after a tick that grows with
the batch (so 250 streams cost a few thousand SSE chunks per wall second, several tokens each)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from specserve.render.adaptive import SPEC_CAPTURE_SIZES, first_capture_size_at_least
from specserve_tools.emulator.profile import Profile

# Default --speculative-adaptive-config of SGLang 0.5.23 (adaptive_spec_params.DEFAULT_ADAPTIVE_CONFIG).
DEFAULT_ADAPTIVE_CONFIG: dict[int, list[int]] = {1: [1, 3, 5, 7], 8: [0, 1, 3], 32: [0, 1], 64: [0]}
KV_TOKENS_PER_SLOT = 4096  # token_usage denominator: an arbitrary but fixed KV capacity per running slot


class Mode(StrEnum):
    SPECULATIVE = "speculative"
    BASELINE = "baseline"
    ADAPTIVE = "adaptive"


@dataclass(eq=False)
class Request:
    rid: str
    max_tokens: int
    prompt_tokens: int
    streaming: bool
    arrival: float
    admitted: float | None = None
    first_at: float | None = None  # emulated instant of the first token
    progress: float = 0.0
    progress_at_first: float | None = None
    visible: int = 0  # tokens released to the client so far
    finished_at: float | None = None
    aborted: bool = False
    sampled: bool = False  # temperature > 0: with a profile's sampled_accept_length, drafts are rarely accepted
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def done(self) -> bool:
        return self.finished_at is not None or self.aborted


@dataclass(frozen=True)
class EngineConfig:
    profile: Profile
    mode: Mode
    time_scale: float = 1.0
    max_running: int | None = None  # None: the profile's cap
    adaptive_config: dict[int, list[int]] | None = None  # None: SGLang's default
    tick_base_s: float = 0.01  # wall seconds
    tick_per_request_s: float = 0.0004  # wall seconds added per running request


FinishHook = Callable[[Request], None]


# The serving model as pure functions of (profile, mode, adaptive config, batch): shared with `specserve simulate`.
def active_steps(profile: Profile, mode: Mode, adaptive_config: dict[int, list[int]] | None, batch: float) -> int:
    """Speculative steps in use at this batch size; 0 means no drafting."""
    if mode is Mode.BASELINE:
        return 0
    if mode is Mode.SPECULATIVE:
        return profile.num_steps
    table = adaptive_config or DEFAULT_ADAPTIVE_CONFIG
    padded = first_capture_size_at_least(max(batch, 1), SPEC_CAPTURE_SIZES)
    keys = [k for k in sorted(table) if k <= padded] or [min(table)]
    candidates = table[keys[-1]]
    nonzero = [s for s in candidates if s > 0]
    if not nonzero:
        return 0
    return min(profile.num_steps, max(nonzero))


def throughput(profile: Profile, mode: Mode, adaptive_config: dict[int, list[int]] | None, batch: float) -> float:
    """Total output tokens/s (emulated) with `batch` requests running."""
    if batch <= 0:
        return 0.0
    if mode is Mode.BASELINE:
        return profile.baseline.at(batch)
    if active_steps(profile, mode, adaptive_config, batch) > 0:
        return profile.speculative.at(batch)
    return profile.baseline.at(batch) * profile.adaptive_off_efficiency


class Engine:
    def __init__(self, config: EngineConfig, on_finish: FinishHook | None = None) -> None:
        self.config = config
        self.profile = config.profile
        self.cap = config.max_running or config.profile.max_running_requests
        self.running: list[Request] = []
        self.waiting: deque[Request] = deque()
        self.on_finish = on_finish
        self._ids = itertools.count(1)
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._t0 = self._loop.time()
        self._last = 0.0
        self.last_throughput = 0.0
        self.decoded = 0.0  # tokens generated so far, counted as they are (SGLang's realtime decode tokens)

    # ---------------------------------------------------------------- clock and model
    def now(self) -> float:
        """Emulated seconds since the engine started."""
        return (self._loop.time() - self._t0) * self.config.time_scale

    def active_steps(self, batch: int) -> int:
        """Speculative steps in use at this batch size; 0 means no drafting."""
        return active_steps(self.profile, self.config.mode, self.config.adaptive_config, batch)

    def throughput(self, batch: int) -> float:
        """Total output tokens/s (emulated) with `batch` requests running."""
        return throughput(self.profile, self.config.mode, self.config.adaptive_config, batch)

    def accept_length(self) -> float:
        if self.active_steps(len(self.running)) == 0:
            return 0.0 if self.config.mode is Mode.BASELINE else 1.0
        if not self.running:
            return self.profile.accept_length
        return sum(self._accept(r) for r in self.running) / len(self.running)

    def _accept(self, req: Request) -> float:
        sampled = self.profile.sampled_accept_length
        return sampled if req.sampled and sampled is not None else self.profile.accept_length

    def _rates(self) -> list[float]:
        """Tokens/s of each running request: the batch's step rate times the request's accept length (the curve
        was measured at the profile's accept length, each verify step costing the same whatever is accepted)."""
        n = len(self.running)
        if n == 0:
            return []
        per_request = self.throughput(n) / n
        if self.active_steps(n) == 0:
            return [per_request] * n
        return [per_request * self._accept(r) / self.profile.accept_length for r in self.running]

    def token_usage(self) -> float:
        used = sum(r.prompt_tokens + r.progress for r in self.running)
        return min(1.0, used / (self.cap * KV_TOKENS_PER_SLOT))

    # ---------------------------------------------------------------- requests
    def submit(self, max_tokens: int, prompt_tokens: int, streaming: bool, temperature: float = 0.0) -> Request:
        self._advance(self.now())
        req = Request(
            rid=f"{next(self._ids):x}", max_tokens=max_tokens, prompt_tokens=prompt_tokens,
            streaming=streaming, arrival=self.now(), sampled=temperature > 0,
        )  # fmt: skip
        self.waiting.append(req)
        self._admit(self.now())
        self._wake.set()
        return req

    def abort(self, req: Request) -> None:
        if req.done:
            return
        self._advance(self.now())
        req.aborted = True
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        req.changed.set()
        self._admit(self.now())
        self._wake.set()

    # ---------------------------------------------------------------- the loop
    async def run(self) -> None:
        while True:
            now = self.now()
            self._advance(now)
            self._admit(now)
            wait_wall = self._next_wait(now)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=wait_wall)

    def _next_wait(self, now: float) -> float:
        n = len(self.running)
        tick_wall = self.config.tick_base_s + self.config.tick_per_request_s * n
        if n == 0:
            return 1.0
        nxt = now + tick_wall * self.config.time_scale
        for r, rate in zip(self.running, self._rates(), strict=True):
            if r.first_at is not None and r.first_at > now:
                nxt = min(nxt, r.first_at)
            elif rate > 0:
                nxt = min(nxt, now + (r.max_tokens - r.progress) / rate)
        return max(0.0, (nxt - now) / self.config.time_scale)

    def _admit(self, now: float) -> None:
        while self.waiting and len(self.running) < self.cap:
            req = self.waiting.popleft()
            req.admitted = now
            req.first_at = now + self.profile.ttft_seconds
            self.running.append(req)

    def _advance(self, now: float) -> None:
        """Move every running request forward from the last instant to `now` at the current batch's rate."""
        last, self._last = self._last, now
        dt = now - last
        n = len(self.running)
        rates = self._rates()
        self.last_throughput = sum(rates)
        if dt <= 0 or n == 0:
            return
        finished: list[Request] = []
        for r, rate in zip(self.running, rates, strict=True):
            before = r.progress
            r.progress += rate * dt
            self.decoded += max(0.0, min(r.progress, r.max_tokens) - min(before, r.max_tokens))
            first_at = r.first_at if r.first_at is not None else now
            if now < first_at:
                continue
            if r.progress_at_first is None:
                # progress at the exact first-token instant (it may lie inside this step)
                r.progress_at_first = before + rate * max(0.0, first_at - last)
            p0, total = r.progress_at_first, r.max_tokens
            if p0 >= total or r.progress >= total - 1e-9:
                visible = total
                r.finished_at = max(first_at, now - (r.progress - total) / rate) if p0 < total else first_at
                finished.append(r)
            else:
                visible = min(total, 1 + math.floor((r.progress - p0) * (total - 1) / (total - p0)))
            if visible != r.visible:
                r.visible = visible
                r.changed.set()
        for r in finished:
            self.running.remove(r)
            r.changed.set()
            if self.on_finish is not None:
                self.on_finish(r)

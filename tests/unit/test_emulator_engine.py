"""The emulated scheduler on its own (no HTTP): throughput from the profile curve, TTFT inside the service
time, the running cap and queue, aborts, and adaptive step selection."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator

import pytest

from specserve.api.curves import Curve
from specserve_tools.emulator.engine import Engine, EngineConfig, Mode, Request
from specserve_tools.emulator.profile import Profile

PROFILE = Profile(
    name="t",
    model_name="t",
    speculative=Curve.from_points([(1, 100.0), (8, 400.0), (64, 800.0)]),
    baseline=Curve.from_points([(1, 80.0), (8, 560.0), (64, 2000.0)]),
    ttft_seconds=0.2,
    num_steps=3,
)


@contextlib.asynccontextmanager
async def running(config: EngineConfig) -> AsyncIterator[Engine]:
    engine = Engine(config)
    task = asyncio.create_task(engine.run())
    try:
        yield engine
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _finish(req: Request) -> None:
    while not req.done:
        await req.changed.wait()
        req.changed.clear()


async def test_closed_loop_throughput_follows_the_curve() -> None:
    config = EngineConfig(profile=PROFILE, mode=Mode.BASELINE, time_scale=50.0)
    async with running(config) as engine:
        produced = 0
        stop = asyncio.Event()

        async def client() -> None:
            nonlocal produced
            while not stop.is_set():
                req = engine.submit(200, 10, streaming=True)
                await _finish(req)
                produced += req.visible

        start = engine.now()
        tasks = [asyncio.create_task(client()) for _ in range(8)]
        await asyncio.sleep(1.2)
        stop.set()
        elapsed = engine.now() - start
        await asyncio.gather(*tasks)
    # completed requests only, so allow for the 8 requests in flight at the end (8 x 200 tokens)
    expected = PROFILE.baseline.at(8) * elapsed
    assert expected - 8 * 200 <= produced <= expected * 1.05


async def test_ttft_is_part_of_the_service_time() -> None:
    config = EngineConfig(profile=PROFILE, mode=Mode.SPECULATIVE, time_scale=20.0)
    async with running(config) as engine:
        req = engine.submit(50, 10, streaming=True)
        await _finish(req)
    assert req.first_at is not None and req.finished_at is not None and req.admitted is not None
    assert req.first_at - req.admitted == pytest.approx(0.2)
    # one request alone runs at 100 tok/s: 50 tokens take 0.5 s including the 0.2 s TTFT
    assert req.finished_at - req.admitted == pytest.approx(0.5, rel=0.05)
    assert req.visible == 50


async def test_sampled_requests_advance_at_their_accept_length_where_the_profile_measured_one() -> None:
    # NGRAM on the H200: greedy requests accept ~4 tokens a step, sampled ones ~1 (each step costs the same)
    profile = dataclasses.replace(PROFILE, accept_length=4.0, sampled_accept_length=1.0)
    config = EngineConfig(profile=profile, mode=Mode.SPECULATIVE, time_scale=20.0)
    async with running(config) as engine:
        greedy = engine.submit(40, 10, streaming=True)
        sampled = engine.submit(40, 10, streaming=True, temperature=0.7)
        assert engine.accept_length() == pytest.approx(2.5)  # the running requests' mean, as the gauge shows
        await _finish(greedy)
        # two in flight: each at the curve's per-request rate for greedy steps (the TTFT inside the service time);
        # the sampled one at a quarter of it, so it has served about a quarter of its tokens meanwhile
        assert greedy.finished_at is not None and greedy.admitted is not None
        assert greedy.finished_at - greedy.admitted == pytest.approx(40 / (PROFILE.speculative.at(2) / 2), rel=0.1)
        assert 5 <= sampled.visible <= 15
    # the baseline has no drafts: the temperature changes nothing; nor where the profile measured no sampled length
    for prof, mode in ((profile, Mode.BASELINE), (PROFILE, Mode.SPECULATIVE)):
        async with running(EngineConfig(profile=prof, mode=mode, time_scale=20.0)) as engine:
            a = engine.submit(40, 10, streaming=True)
            b = engine.submit(40, 10, streaming=True, temperature=1.0)
            await _finish(a)
            await _finish(b)
        assert a.finished_at == pytest.approx(b.finished_at, rel=0.05)


async def test_cap_queues_and_abort_frees_the_slot() -> None:
    config = EngineConfig(profile=PROFILE, mode=Mode.BASELINE, time_scale=1.0, max_running=2)
    async with running(config) as engine:
        reqs = [engine.submit(10_000, 1, streaming=True) for _ in range(3)]
        assert len(engine.running) == 2 and list(engine.waiting) == [reqs[2]]
        engine.abort(reqs[0])
        assert reqs[0].aborted and reqs[2] in engine.running and not engine.waiting
        assert reqs[2].arrival <= reqs[2].admitted  # type: ignore[operator]


def test_adaptive_step_selection() -> None:
    async def check() -> None:
        table = {1: [1, 3, 5], 8: [0, 1], 32: [0]}
        engine = Engine(EngineConfig(profile=PROFILE, mode=Mode.ADAPTIVE, adaptive_config=table))
        assert engine.active_steps(1) == 3  # min(profile num_steps 3, largest candidate 5)
        assert engine.active_steps(7) == 3
        assert engine.active_steps(8) == 1
        assert engine.active_steps(31) == 0  # padded to capture size 32 -> key 32: drafting off
        assert engine.throughput(31) == pytest.approx(PROFILE.baseline.at(31) * 0.95)
        assert engine.throughput(4) == pytest.approx(PROFILE.speculative.at(4))
        default = Engine(EngineConfig(profile=PROFILE, mode=Mode.ADAPTIVE))
        assert default.active_steps(64) == 0 and default.active_steps(2) == 3

    asyncio.run(check())

"""A real Prometheus server (Debian's package, on loopback) scraping the SGLang emulator: the exposition is
accepted by Prometheus, and the load query that load-based switching is built on returns the requests in
flight, read through prometheus-api-client as the operator will. Every query of the operator's round is valid
PromQL on the real server, and the Little's-law in-flight count matches the clients holding requests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_api_client import PrometheusConnect

from specserve.metrics.promql import GROUP_LABELS, PoolKey, Signal, Windows, grouped_queries
from specserve_tools.emulator.engine import EngineConfig, Mode
from specserve_tools.emulator.profile import load_profile
from specserve_tools.emulator.testing import emulator_thread, free_port

IN_FLIGHT = 12
POOL = PoolKey("llm", "a", "speculative")
POOL_LABELS = ", ".join(f"{k}: {v}" for k, v in zip(GROUP_LABELS, (POOL.namespace, POOL.name, POOL.pool), strict=True))
LOAD_QUERY = "sum(sglang:num_running_reqs) + sum(sglang:num_queue_reqs)"


@pytest.fixture()
def emulator() -> Iterator[str]:
    config = EngineConfig(profile=load_profile("seed-kimi-k25-rtxpro6000"), mode=Mode.SPECULATIVE, time_scale=1.0)
    with emulator_thread(config) as url:
        yield url


@pytest.fixture()
def prometheus(tmp_path: Path, emulator: str) -> Iterator[PrometheusConnect]:
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("the prometheus binary is missing under CI (scripts/test.sh installs it)", pytrace=False)
        pytest.skip("no prometheus binary: apt-get install prometheus (scripts/test.sh does)")
    target = emulator.removeprefix("http://")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs:\n- job_name: sglang\n  static_configs:\n  - targets: ['{target}']\n"
        # what the operator's PodMonitor relabels every engine series with
        f"    labels: {{{POOL_LABELS}}}\n",
        encoding="utf-8",
    )
    port = free_port()
    process = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        client = PrometheusConnect(url=f"http://127.0.0.1:{port}", disable_ssl=True)
        deadline = time.monotonic() + 30
        while not _ready(client):
            assert process.poll() is None, "prometheus exited at start-up"
            assert time.monotonic() < deadline, "prometheus did not become ready in 30 s"
            time.sleep(0.2)
        yield client
    finally:
        process.terminate()
        process.wait(timeout=30)


def _ready(client: PrometheusConnect) -> bool:
    try:
        return bool(client.check_prometheus_connection())
    except Exception:
        return False


def _value(client: PrometheusConnect, query: str) -> float | None:
    result = client.custom_query(query)
    return float(result[0]["value"][1]) if result else None


async def _hold_requests(url: str, stop: asyncio.Event) -> None:
    """Keep IN_FLIGHT long streaming completions open until `stop` is set."""

    async def one(session: aiohttp.ClientSession) -> None:
        body = {"model": "default", "prompt": "Write a long function.", "max_tokens": 4000, "stream": True}
        async with session.post(f"{url}/v1/completions", json=body) as response:
            assert response.status == 200
            async for _ in response.content:
                if stop.is_set():
                    return

    async with aiohttp.ClientSession() as session:
        tasks = [asyncio.create_task(one(session)) for _ in range(IN_FLIGHT)]
        await stop.wait()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_prometheus_scrapes_the_engine_load(emulator: str, prometheus: PrometheusConnect) -> None:
    stop = asyncio.Event()
    load = asyncio.create_task(_hold_requests(emulator, stop))
    try:
        deadline = time.monotonic() + 30
        seen: float | None = None
        while time.monotonic() < deadline:
            seen = await asyncio.to_thread(_value, prometheus, LOAD_QUERY)
            if seen == IN_FLIGHT:
                break
            await asyncio.sleep(0.5)
        assert seen == IN_FLIGHT, f"Prometheus reports load {seen}, expected {IN_FLIGHT}"
        accept = await asyncio.to_thread(_value, prometheus, "max(sglang:spec_accept_length)")
        assert accept is not None and accept > 1  # the speculative engine's acceptance length is scraped too
    finally:
        stop.set()
        await load


async def _closed_loop(url: str, clients: int, stop: asyncio.Event) -> None:
    """`clients` clients, each sending its next short completion as soon as the last one ends."""

    async def one(session: aiohttp.ClientSession) -> None:
        body = {"model": "default", "prompt": "Say hi.", "max_tokens": 8}
        while not stop.is_set():
            async with session.post(f"{url}/v1/completions", json=body) as response:
                assert response.status == 200
                await response.read()

    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(one(session) for _ in range(clients)))


async def test_every_query_of_a_round_is_valid_promql_and_latency_counts_the_requests_in_flight(
    emulator: str, prometheus: PrometheusConnect
) -> None:
    windows = Windows.of(evaluation_seconds=2, scrape_seconds=1)
    stop = asyncio.Event()
    load = asyncio.create_task(_closed_loop(emulator, IN_FLIGHT, stop))
    try:
        deadline = time.monotonic() + 40
        answers: dict[Signal, float | None] = {}
        while time.monotonic() < deadline:
            await asyncio.sleep(1)
            for query in grouped_queries(windows):  # an invalid query raises here: Prometheus answers 400
                result = await asyncio.to_thread(prometheus.custom_query, query.promql)
                labels = result[0]["metric"] if result else {}
                assert not result or tuple(labels.get(k) for k in GROUP_LABELS) == (
                    POOL.namespace, POOL.name, POOL.pool,
                ), f"{query.signal} is not grouped by pool: {labels}"  # fmt: skip
                answers[query.signal] = float(result[0]["value"][1]) if result else None
            seen = answers.get(Signal.LATENCY_IN_FLIGHT)
            if seen is not None and abs(seen - IN_FLIGHT) <= 0.25 * IN_FLIGHT:
                break
        seen = answers.get(Signal.LATENCY_IN_FLIGHT)
        assert seen is not None and abs(seen - IN_FLIGHT) <= 0.25 * IN_FLIGHT, (
            f"Little's law read {seen} in flight with {IN_FLIGHT} clients (answers: {answers})"
        )
    finally:
        stop.set()
        await load

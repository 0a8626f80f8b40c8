"""What the switching integration tests and benchmarks run: Debian's Prometheus on loopback scraping SGLang
emulators labelled as SpecServe's PodMonitor labels pods, and a load generator holding N requests in flight."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import requests

from specserve_tools.emulator.engine import EngineConfig, Mode
from specserve_tools.emulator.profile import load_profile
from specserve_tools.emulator.testing import emulator_thread, free_port

PROFILE = "seed-kimi-k25-rtxpro6000"


@dataclass(frozen=True)
class ScrapeTarget:
    url: str  # the emulator's base URL
    namespace: str
    instance: str
    pool: str


def prometheus_binary() -> str:
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("the prometheus binary is missing under CI (scripts/test.sh installs it)", pytrace=False)
        pytest.skip("no prometheus binary: apt-get install prometheus (scripts/test.sh does)")
    return binary


def scrape_config(targets: list[ScrapeTarget], interval: float) -> str:
    """Static targets carrying the labels the PodMonitor relabels onto every series (and `namespace`)."""
    lines = [f"global: {{scrape_interval: {interval:g}s, evaluation_interval: {interval:g}s}}", "scrape_configs:"]
    lines += ["- job_name: sglang", "  static_configs:"]
    for t in targets:
        lines += [
            f"  - targets: ['{t.url.removeprefix('http://')}']",
            f"    labels: {{namespace: {t.namespace}, specserve_instance: {t.instance}, specserve_pool: {t.pool}}}",
        ]
    return "\n".join(lines) + "\n"


class Prometheus:
    """A Prometheus process that can be stopped and started again on the same port and data."""

    def __init__(self, workdir: Path, targets: list[ScrapeTarget], interval: float = 1.0, more_jobs: str = "") -> None:
        self.config = workdir / "prometheus.yml"
        self.config.write_text(scrape_config(targets, interval) + more_jobs, encoding="utf-8")
        self.data = workdir / "prometheus-data"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [prometheus_binary(), f"--config.file={self.config}", f"--storage.tsdb.path={self.data}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not self.ready():
            assert self.process.poll() is None, "prometheus exited at start-up"
            assert time.monotonic() < deadline, "prometheus did not become ready in 30 s"
            time.sleep(0.2)

    def ready(self) -> bool:
        try:
            return requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


def pool_targets(urls: list[str], namespace: str, instance: str) -> list[ScrapeTarget]:
    """The first engine as the SpecServe's speculative pool, the second as its baseline pool."""
    return [
        ScrapeTarget(urls[0], namespace, instance, "speculative"),
        ScrapeTarget(urls[1], namespace, instance, "baseline"),
    ]


@contextlib.contextmanager
def running_prometheus(workdir: Path, targets: list[ScrapeTarget], more_jobs: str = "") -> Iterator[Prometheus]:
    """A started Prometheus scraping `targets` every second (and any `more_jobs`, scrape_configs entries), stopped
    when the block ends."""
    server = Prometheus(workdir, targets, interval=1.0, more_jobs=more_jobs)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def emulators(count: int) -> Iterator[list[str]]:
    """`count` emulators (alternately speculative and baseline) on loopback; their base URLs."""
    profile = load_profile(PROFILE)
    with contextlib.ExitStack() as stack:
        urls = []
        for i in range(count):
            mode = Mode.SPECULATIVE if i % 2 == 0 else Mode.BASELINE
            urls.append(stack.enter_context(emulator_thread(EngineConfig(profile=profile, mode=mode, time_scale=1.0))))
        yield urls


class Load:
    """Holds `n` streaming completions open against one engine; `set(n)` changes n at once."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._tasks: list[asyncio.Task[None]] = []
        self._session: aiohttp.ClientSession | None = None

    async def _one(self) -> None:
        assert self._session is not None
        body = {"model": "default", "prompt": "Write a long function.", "max_tokens": 8000, "stream": True}
        while True:  # a request that finishes is replaced: the level stays
            async with self._session.post(f"{self.url}/v1/completions", json=body) as response:
                assert response.status == 200, await response.text()
                async for _ in response.content:
                    pass

    async def set(self, n: int) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        while len(self._tasks) < n:
            self._tasks.append(asyncio.create_task(self._one()))
        while len(self._tasks) > n:
            task = self._tasks.pop()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        await self.set(0)
        if self._session is not None:
            await self._session.close()


@contextlib.contextmanager
def emulator_processes(hosts: list[str], port: int) -> Iterator[list[str]]:
    """`specserve emulate` processes on distinct loopback addresses and one port, as pods have distinct IPs and
    the same container port (what the Direct source scrapes). Alternately speculative and baseline."""
    processes = []
    try:
        for i, host in enumerate(hosts):
            mode = ["--speculative-algorithm", "EAGLE3"] if i % 2 == 0 else []
            command = [sys.executable, "-m", "specserve.cli", "emulate", "--profile", PROFILE, "--host", host,
                       "--port", str(port), "--startup-seconds", "0", *mode]  # fmt: skip
            processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        urls = [f"http://{host}:{port}" for host in hosts]
        deadline = time.monotonic() + 30
        for url in urls:
            while True:
                try:
                    if requests.get(f"{url}/ready", timeout=1).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                assert time.monotonic() < deadline, f"emulator at {url} did not start"
                time.sleep(0.2)
        yield urls
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)

"""Fixtures of the switching integration tests (test_switching, test_faults_switching, test_learning,
test_dashboard_queries): a module that needs another kind overrides one by defining its own of the same name."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from specserve_kubefake import FakeApiServer
from tests.integration.kube_emulator import operator_cluster
from tests.integration.switching_env import Load, Prometheus, ScrapeTarget, emulators, pool_targets, running_prometheus
from tests.integration.switching_world import NAME, NS


@pytest.fixture()
async def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeApiServer]:
    async with operator_cluster(NS, tmp_path, monkeypatch, auto_ready=True) as api:
        yield api


@pytest.fixture()
async def manual_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeApiServer]:
    """The fake API server without its auto-ready Deployment controller: the test says when pods are Ready."""
    async with operator_cluster(NS, tmp_path, monkeypatch, auto_ready=False) as api:
        yield api


@pytest.fixture()
def engines() -> Iterator[list[str]]:
    """Two emulators on loopback: speculative, then baseline."""
    with emulators(2) as urls:
        yield urls


@pytest.fixture()
def prometheus(tmp_path: Path, engines: list[str]) -> Iterator[Prometheus]:
    """Scrapes the first engine as the speculative pool's one pod, the second as the baseline pool's."""
    with running_prometheus(tmp_path, pool_targets(engines, NS, NAME)) as server:
        yield server


@pytest.fixture()
def engine_prometheus(tmp_path: Path, engines: list[str]) -> Iterator[Prometheus]:
    """Scrapes the first engine as the single pool (`engine`) of a Restart or Adaptive SpecServe."""
    with running_prometheus(tmp_path, [ScrapeTarget(engines[0], NS, NAME, "engine")]) as server:
        yield server


@pytest.fixture()
async def load(engines: list[str]) -> AsyncIterator[Load]:
    # All requests go to one engine: demand is the sum over the SpecServe's pods, whatever the split.
    generator = Load(engines[0])
    yield generator
    await generator.close()

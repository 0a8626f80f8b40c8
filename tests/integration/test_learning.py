"""Live curves end to end: the real operator learns the speculative pool's throughput curve from Prometheus
scraping an SGLang emulator, and after the emulator's profile changes mid-run (a slower engine release: the same
accept length, 30 % fewer tokens/s) the drift test fires once and the learned curve converges to the new truth.
Compressed: evaluation and scrapes every second. Asserts convergence, not timing (the waits are generous)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specserve.api.conditions import CURVE_DRIFT
from specserve.api.curves import Curve
from specserve_kubefake import FakeApiServer
from specserve_tools.emulator.engine import EngineConfig, Mode
from specserve_tools.emulator.profile import Profile, load_profile
from specserve_tools.emulator.server import ENGINE_KEY, build_app
from specserve_tools.emulator.testing import app_thread
from tests.integration.switching_env import Load, Prometheus, pool_targets, running_prometheus
from tests.integration.switching_world import (
    NAME,
    NS,
    condition,
    events,
    eventually,
    monitored_doc,
    operator,
    route_accepted,
    status,
)

PROFILE = "illustrative-crossover-8b"
LEVEL = 8  # requests held in flight on the speculative engine: a grid point of the profile's curves
SLOWER = 0.7


@dataclasses.dataclass
class Engines:
    urls: list[str]
    apps: list[Any]

    def set_profile(self, i: int, profile: Profile) -> None:
        self.apps[i][ENGINE_KEY].profile = profile  # the engine reads its profile at every step


@pytest.fixture()
def engines() -> Iterator[Engines]:
    profile = load_profile(PROFILE)
    modes = (Mode.SPECULATIVE, Mode.BASELINE)
    apps = [build_app(EngineConfig(profile=profile, mode=m), startup_seconds=0) for m in modes]
    with app_thread(apps[0]) as spec_url, app_thread(apps[1]) as base_url:
        yield Engines([spec_url, base_url], apps)


@pytest.fixture()
def prometheus(tmp_path: Path, engines: Engines) -> Iterator[Prometheus]:
    with running_prometheus(tmp_path, pool_targets(engines.urls, NS, NAME)) as server:
        yield server


def points(curve: Curve) -> list[dict[str, float]]:
    return [{"concurrency": x, "tokensPerSecond": y} for x, y in curve.points()]


def learning_doc(doc: dict[str, Any], profile: Profile) -> dict[str, Any]:
    body = monitored_doc(doc)
    body["spec"]["switching"] = {
        "initialMode": "Speculative",
        "evaluationIntervalSeconds": 1,
        # Calibrated = the emulator's true curves before the change.
        "curves": {"speculative": points(profile.speculative), "baseline": points(profile.baseline)},
    }
    return body


def point(api: FakeApiServer, concurrency: float) -> dict[str, Any]:
    """The speculative curve's grid point at `concurrency`, as status shows it ({} before the first write)."""
    learning = status(api).get("learning") or {}
    return next(
        (p for p in (learning.get("speculative") or {}).get("points", []) if p["concurrency"] == concurrency), {}
    )


def learned_at(api: FakeApiServer, concurrency: float) -> tuple[float, float] | None:
    """(learned tokens/s, confidence) of the speculative curve at a grid concurrency."""
    p = point(api, concurrency)
    return (p["learned"], p["confidence"]) if p else None


def near(api: FakeApiServer, truth: float, tolerance: float = 0.08) -> bool:
    got = learned_at(api, LEVEL)
    return got is not None and got[1] >= 0.75 and abs(got[0] / truth - 1) <= tolerance


async def test_the_learned_curve_converges_to_the_emulator_after_its_profile_changes(
    fake: FakeApiServer, prometheus: Prometheus, engines: Engines, kimi_doc: dict[str, Any]
) -> None:
    profile = load_profile(PROFILE)
    before = profile.speculative.at(LEVEL)
    load = Load(engines.urls[0])
    try:
        await load.set(LEVEL)
        async with operator(prometheus.url) as running:
            fake.create(learning_doc(kimi_doc, profile))
            await route_accepted(fake)
            await eventually(lambda: near(fake, before), timeout=120, what="the curve learned as calibrated")
            assert condition(fake, CURVE_DRIFT)["reason"] == "NoDrift"

            slower = Curve.from_points([(x, y * SLOWER) for x, y in profile.speculative.points()])
            engines.set_profile(0, dataclasses.replace(profile, speculative=slower))
            after = slower.at(LEVEL)
            await eventually(lambda: ("Warning", "CurveDrift") in events(fake), timeout=120, what="a drift event")
            await eventually(lambda: near(fake, after), timeout=180, what="the curve re-learned")
            learning = status(fake)["learning"]
            assert learning["lastDrift"]["mode"] == "Speculative" and learning["lastDrift"]["shift"] < -0.1
            assert condition(fake, CURVE_DRIFT)["reason"] in ("Relearning", "Relearned")
            assert events(fake).count(("Warning", "CurveDrift")) == 1
            # Never observed at this load: held at the calibrated value (the accept length did not move).
            far = learned_at(fake, 250.0)
            assert far is not None and far[1] < 0.75
            assert far[0] == pytest.approx(profile.speculative.at(250.0), rel=0.01)
            await eventually(lambda: point(fake, LEVEL)["weight"] >= 40, timeout=120, what="more evidence")
            assert not running.done(), "the operator stopped"
        # A restarted operator resumes the evidence from status rather than learning afresh.
        saved = status(fake)["learning"]
        weight = point(fake, LEVEL)["weight"]
        async with operator(prometheus.url) as running:
            await eventually(lambda: status(fake)["learning"]["lastUpdate"] != saved["lastUpdate"], timeout=120,
                             what="a write by the restarted operator")  # fmt: skip
            assert point(fake, LEVEL)["weight"] > weight
            assert near(fake, after)
            assert events(fake).count(("Warning", "CurveDrift")) == 1
            assert not running.done(), "the operator stopped"
    finally:
        await load.close()

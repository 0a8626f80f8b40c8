"""The real operator decides with the learned curves (docs/learning.md, `status.learning.crossover.effective`): a
Restart SpecServe whose calibrated curves favour speculation at the observed load, but whose learned ones (in
status, as an earlier run of the operator left them) make baseline serve twice as much, restarts into Baseline.
Deciding with the calibrated curves it would hold forever."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from specserve.api.models import Mode
from specserve.policy.curves import ModeCurves, crossover
from specserve.policy.learning import Point, start
from specserve.switching.learning import to_status
from specserve_kubefake import DEPLOYMENTS, SPECSERVES, FakeApiServer
from tests.integration.switching_env import Load, Prometheus
from tests.integration.switching_world import NAME, NS, eventually, operator, status, switching_doc
from tests.unit.policy_helpers import ILLUSTRATIVE, profile_curves

CURVES = profile_curves(ILLUSTRATIVE)  # calibrated: speculation serves 1.6x baseline at 8 per replica
LEVEL = 8
APPLIED = 0.2  # the speculative curve the learned state decides with: 0.2 x calibrated, baseline ~3x better


def points(curves: ModeCurves, mode: Mode) -> list[dict[str, float]]:
    return [{"concurrency": x, "tokensPerSecond": y} for x, y in curves.curve(mode).points()]


def restart_doc(doc: dict[str, Any]) -> dict[str, Any]:
    body = switching_doc(doc)
    body["spec"]["strategy"] = "Restart"
    body["spec"]["engine"]["startupTimeoutSeconds"] = 60  # the restart cost: 60 s of serving
    body["spec"]["switching"]["initialMode"] = "Speculative"
    body["spec"]["switching"].pop("crossoverConcurrency")
    body["spec"]["switching"]["curves"] = {
        "speculative": points(CURVES, Mode.SPECULATIVE),
        "baseline": points(CURVES, Mode.BASELINE),
    }
    return body


def learned_status(now: float) -> dict[str, Any]:
    """status.learning as the loop writes it: the speculative curve moved to APPLIED x calibrated, its evidence
    since reset (a drift), so nothing pulls it back within the test's minutes (slew: 25 % per hour)."""
    fresh = start(CURVES)
    moved = tuple(Point(weight=0.0, ratio=1.0, applied=APPLIED) for _ in fresh.grid)
    learning = replace(fresh.with_mode(Mode.SPECULATIVE, replace(fresh.speculative, points=moved)), updated=now)
    return to_status(CURVES, learning, now).model_dump(mode="json", by_alias=True, exclude_none=True)


async def test_a_restart_specserve_restarts_into_the_mode_its_learned_curves_favour(
    manual_fake: FakeApiServer, engine_prometheus: Prometheus, load: Load, kimi_doc: dict[str, Any]
) -> None:
    api = manual_fake
    assert CURVES.speculative.at(LEVEL) > CURVES.baseline.at(LEVEL)  # calibrated: hold Speculative
    assert CURVES.speculative.at(LEVEL) * APPLIED < CURVES.baseline.at(LEVEL) / 2  # learned: Baseline
    await load.set(LEVEL)
    api.create(restart_doc(kimi_doc))
    api.patch_status(SPECSERVES, NS, NAME, {"learning": learned_status(time.time())})
    async with operator(engine_prometheus.url) as running:
        await eventually(lambda: api.get(DEPLOYMENTS, NS, f"{NAME}-engine"), what="the engine Deployment")
        api.set_deployment_ready(NS, f"{NAME}-engine")
        decided = await eventually(
            lambda: (d := status(api).get("lastDecision")) and d.get("action") == "Restart" and d,
            timeout=150,
            what="the Restart decision on the learned curves",
        )
        assert decided["fromMode"] == "Speculative" and decided["toMode"] == "Baseline"
        learning = status(api)["learning"]
        # The curves it decided with: baseline serves more everywhere (no crossover), unlike the calibrated ones.
        calibrated = crossover(CURVES)
        assert calibrated is not None and learning["crossover"]["calibrated"] == calibrated > LEVEL
        assert "effective" not in learning["crossover"]
        assert not running.done(), "the operator stopped"

"""Restart's forecast quality and trust in status.switching: typed, bounded, round-tripped, written when they
move (not every round), and declared in the CRD."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from specserve.api.models import Mode
from specserve.policy.forecast import LAMBDA_MIN
from specserve.policy.switching import decide
from specserve.policy.types import PolicyState
from specserve.switching.state import from_status, to_status, worth_writing
from tests.unit.test_metrics_history import with_history
from tests.unit.test_switching_loop import deployment, make_world

CRD = Path(__file__).parents[2] / "crds" / "specserve.io_specserves.yaml"

STATE = PolicyState(mode=Mode.BASELINE, mode_since=100.0)


def test_the_error_and_the_trust_it_earns_are_in_status_and_the_error_round_trips() -> None:
    saved = to_status(replace(STATE, forecast_error=0.1))
    body = saved.model_dump(by_alias=True, exclude_none=True)
    assert body["forecastError"] == 0.1
    assert LAMBDA_MIN < body["forecastTrust"] < 1.0
    assert from_status(saved).forecast_error == 0.1
    none = to_status(STATE).model_dump(by_alias=True, exclude_none=True)
    assert "forecastError" not in none and "forecastTrust" not in none  # no forecast scored: nothing claimed


def test_the_error_is_written_when_first_scored_or_moved_not_on_every_round() -> None:
    scored = replace(STATE, forecast_error=0.30)
    assert worth_writing(STATE, scored)
    assert not worth_writing(scored, replace(scored, forecast_error=0.27))
    assert worth_writing(scored, replace(scored, forecast_error=0.20))


def test_the_crd_bounds_the_fields() -> None:
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    props = schema["properties"]["status"]["properties"]["switching"]["properties"]
    assert (props["forecastError"]["minimum"], props["forecastError"]["maximum"]) == (0, 1)
    assert (props["forecastTrust"]["minimum"], props["forecastTrust"]["maximum"]) == (0.5, 1)


async def test_the_live_loop_writes_the_forecast_quality_of_a_restart_specserve(kimi_doc: dict[str, Any]) -> None:
    doc = copy.deepcopy(kimi_doc)
    doc["spec"]["strategy"] = "Restart"
    doc["spec"]["switching"]["crossoverConcurrency"] = 20  # curves to decide with (without, the policy holds)
    w = make_world(doc)
    with_history(w)  # 6 requests a day and a week back; 7 read now
    w.loop.decide = decide  # the real policy
    w.kube.deployments = [deployment("kimi-k25-engine")]
    await w.round_at(100)
    await w.round_at(3700)  # an hour on: the gap counts as two intervals, not an hour of right forecasts
    switching = w.status()["switching"]
    assert 0.99 < switching["forecastError"] < 1.0 and switching["forecastTrust"] == 1.0

"""The plugin's views (pure): what `kubectl specserve status|history|explain|what-if` show for a SpecServe."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from specserve.api.models import Condition
from specserve.plugin import view
from specserve.plugin.plot import terminal

NOW = 1_780_000_000.0


def body(kimi_doc: dict[str, Any], *, paused: bool = False, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = copy.deepcopy(kimi_doc)
    obj["metadata"] = {"name": "m", "namespace": "llm"}
    if paused:
        obj["metadata"]["annotations"] = {"specserve.io/paused": "true"}
    obj["spec"]["switching"] = {"crossoverConcurrency": 6, "minDwellSeconds": 0, "downStabilizationSeconds": 0}
    obj["status"] = status if status is not None else STATUS
    return obj


def cond(type_: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": "t"}


STATUS: dict[str, Any] = {
    "activeMode": "Speculative",
    "weights": {"speculative": 100, "baseline": 0},
    "pools": [
        {"role": "speculative", "name": "m-spec", "desired": 1, "ready": 1, "updated": 1},
        {
            "role": "baseline",
            "name": "m-base",
            "desired": 2,
            "ready": 1,
            "updated": 0,
            "failure": {"reason": "ImagePullBackOff", "message": "no such image"},
        },
    ],
    "load": {"concurrency": 4.0},
    "conditions": [
        cond("Ready", "False", "PoolsNotReady", "waiting for m-base"),
        cond("Degraded", "False", "AsExpected"),
        cond("MetricsAvailable", "True", "Reading"),
        cond("Switching", "False", "Stable"),
        cond("Progressing", "False", "Settled"),
    ],
    "history": [
        {
            "time": "2026-12-01T10:00:00Z",
            "fromMode": "Baseline",
            "toMode": "Speculative",
            "action": "SetWeights",
            "weights": {"speculative": 100, "baseline": 0},
            "concurrency": 2.0,
            "reason": "demand 2.0 < crossover",
        },
        {
            "time": "2026-12-01T10:05:00Z",
            "fromMode": "Speculative",
            "toMode": "Speculative",
            "action": "SetWeights",
            "weights": {"speculative": 75, "baseline": 25},
            "concurrency": 9.0,
            "reason": "demand 9.0 > crossover",
            "applied": False,
        },
    ],
}
STATUS["lastDecision"] = STATUS["history"][-1]


def test_status_shows_pools_weights_demand_against_crossover_bad_conditions_and_decisions(
    kimi_doc: dict[str, Any],
) -> None:
    data = view.status_data(view.load(body(kimi_doc)))
    text = view.status_text(data)
    assert "SpecServe llm/m  (TrafficSplit)" in text
    assert "weights speculative 100 / baseline 0" in text
    assert "m-base" in text and "ready 1/2  updated 0/2  FAILING ImagePullBackOff: no such image" in text
    # 2 Ready replicas: the crossover of 6 per replica is 12 in total; demand 4 is below it
    assert "demand:     4 in flight   crossover 6/replica = 12 for the Ready replicas" in text
    assert "(below: speculation wins)" in text
    assert "Ready=False PoolsNotReady: waiting for m-base" in text
    assert "Degraded" not in text and "MetricsAvailable" not in text  # fine conditions are not listed
    assert text.index("10:05:00") < text.index("10:00:00")  # newest decision first
    assert "(advisory, not applied)" in text
    assert data["paused"] is False


def test_status_says_paused(kimi_doc: dict[str, Any]) -> None:
    status = {**STATUS, "conditions": [cond("Switching", "False", "Paused", "switching is paused")]}
    text = view.status_text(view.status_data(view.load(body(kimi_doc, paused=True, status=status))))
    assert "PAUSED" in text and "Switching=False Paused" in text


def test_a_fresh_specserve_shows_without_status(kimi_doc: dict[str, Any]) -> None:
    text = view.status_text(view.status_data(view.load(body(kimi_doc, status={}))))
    assert "serving:    not yet" in text and "demand:     unknown" in text and "last decisions: none yet" in text


def test_history_is_a_table_oldest_first(kimi_doc: dict[str, Any]) -> None:
    text = view.history_text(view.history_data(view.load(body(kimi_doc))))
    lines = text.splitlines()
    assert lines[0].split() == ["TIME", "ACTION", "FROM", "TO", "WEIGHTS", "DEMAND", "APPLIED", "REASON"]
    assert lines[1].split()[:7] == ["2026-12-01T10:00:00Z", "SetWeights", "Baseline", "Speculative", "100/0", "2",
                                    "yes"]  # fmt: skip
    assert lines[2].split()[6] == "no"
    assert view.history_text([]) == "No decisions recorded yet."


def test_explain_gives_the_reason_and_the_operating_point_on_the_curves(kimi_doc: dict[str, Any]) -> None:
    data = view.explain_data(view.load(body(kimi_doc)))
    point = data["operatingPoint"]
    assert (point["demand"], point["readyReplicas"], point["perReplica"]) == (4.0, 2, 2.0)
    assert point["speculativeTokensPerSecond"] > point["baselineTokensPerSecond"]  # below the crossover
    text = view.explain_text(data)
    assert "why: demand 9.0 > crossover" in text
    assert "2 per replica; crossover 6 per replica" in text and "speculation serves more" in text
    assert "modelled from crossoverConcurrency" in text


def test_explain_plots_the_curves_in_the_terminal(kimi_doc: dict[str, Any]) -> None:
    plot = terminal(view.explain_data(view.load(body(kimi_doc))))
    assert "speculative" in plot and "baseline" in plot and "\x1b[" not in plot


@pytest.mark.parametrize(("demand", "action"), [(40.0, "SetWeights"), (1.0, "Hold")])
def test_what_if_asks_the_policy_on_the_live_state(kimi_doc: dict[str, Any], demand: float, action: str) -> None:
    data = view.what_if(view.load(body(kimi_doc)), demand, now=NOW)
    assert data["action"] == action
    assert data["current"] == {"mode": "Speculative", "weights": {"speculative": 100, "baseline": 0}}
    if action == "SetWeights":
        assert data["weights"]["speculative"] < 100
    assert "nothing was written" in view.what_if_text(data)


def test_what_if_fails_over_off_a_dead_pool_even_when_paused(kimi_doc: dict[str, Any]) -> None:
    status = copy.deepcopy(STATUS)
    status["pools"][0]["ready"] = 0  # the speculative pool lost its replica
    data = view.what_if(view.load(body(kimi_doc, paused=True, status=status)), 1.0, now=NOW)
    assert data["action"] == "SetWeights" and data["weights"] == {"speculative": 0, "baseline": 100}
    held = view.what_if(view.load(body(kimi_doc, paused=True)), 40.0, now=NOW)
    assert held["action"] == "Hold" and held["reason"].startswith("paused")


def test_an_invalid_spec_is_a_clear_error(kimi_doc: dict[str, Any]) -> None:
    bad = body(kimi_doc)
    bad["spec"]["strategy"] = "Sometimes"
    with pytest.raises(view.ViewError, match="specserve llm/m: this plugin cannot read its spec"):
        view.load(bad)


def test_explain_shows_the_policy_memory_behind_a_hold(kimi_doc: dict[str, Any]) -> None:
    status = {
        **STATUS,
        "switching": {"mode": "Speculative", "modeSince": "2026-12-01T09:00:00Z",
                      "pending": {"kind": "Waiting", "since": "2026-12-01T10:06:00Z", "speculativeWeight": 40},
                      "regret": 1234.56,
                      "restarts": ["2026-12-01T08:00:00Z", "2026-12-01T09:00:00Z"]},
    }  # fmt: skip
    obj = body(kimi_doc, status=status)
    obj["spec"]["strategy"] = "Restart"
    text = view.explain_text(view.explain_data(view.load(obj)))
    assert "waiting: w=40 since 2026-12-01T10:06:00Z" in text
    assert "regret 1234.6 tokens" in text and "restarts in 24 h: 2 of 6" in text


def test_explain_shows_the_learned_curves_and_the_forecast_trust(kimi_doc: dict[str, Any]) -> None:
    status = {
        **STATUS,
        "switching": {"mode": "Baseline", "modeSince": "2026-12-01T09:00:00Z",
                      "forecastError": 0.12, "forecastTrust": 0.8},
        "learning": {
            "lastUpdate": "2026-12-01T10:05:00Z",
            "speculative": {"coverage": [2.0, 8.0]},
            "acceptLength": 2.1, "acceptLengthReference": 3.2,
            "lastDrift": {"mode": "Speculative", "time": "2026-12-01T09:30:00Z", "shift": -0.3},
            "crossover": {"calibrated": 6.0, "effective": 3.5},
        },
    }  # fmt: skip
    obj = body(kimi_doc, status=status)
    obj["spec"]["strategy"] = "Restart"
    data = view.explain_data(view.load(obj))
    assert data["learning"]["crossover"] == {"calibrated": 6.0, "effective": 3.5}
    text = view.explain_text(data)
    assert "crossover per replica 3.5 decided with, 6 calibrated" in text
    assert "speculative: confident from 2 to 8 per replica" in text
    assert "baseline: no confident range yet" in text
    assert "last drift: Speculative at 2026-12-01T09:30:00Z, -30% off the curve" in text
    assert "recent error 12%, trust 0.80" in text
    # Adaptive reports its learned curves but re-renders from the calibrated ones: explain says so.
    obj["spec"]["strategy"] = "Adaptive"
    text = view.explain_text(view.explain_data(view.load(obj)))
    assert "crossover per replica 3.5 learned (not used: Adaptive renders from the calibrated curves)" in text
    assert "decided with" not in text
    assert "units:" not in text  # measured curves: no model scale
    # Nothing learned yet: no section at all.
    assert view.explain_data(view.load(body(kimi_doc)))["learning"] is None


def test_explain_shows_the_units_a_modelled_curve_was_given(kimi_doc: dict[str, Any]) -> None:
    """Curves modelled on crossoverConcurrency learn a scale from the pools (policy.units): explain names it and
    what would replace it."""
    learning = {"lastUpdate": "2026-12-01T10:05:00Z", "modelScale": 43.9, "crossover": {"calibrated": 107.0}}
    obj = body(kimi_doc, status={**STATUS, "learning": learning})
    text = view.explain_text(view.explain_data(view.load(obj)))
    assert "units: 43.9 tok/s per model unit, from the pools' readings" in text


def test_a_curve_drift_is_not_fine_only_while_true() -> None:
    quiet = [Condition.model_validate(cond("CurveDrift", "False", "NoDrift", "The pools serve the curves."))]
    drifted = [Condition.model_validate(cond("CurveDrift", "True", "Drifted", "Speculative 30% below."))]
    assert view.not_fine(quiet) == []
    assert [c.reason for c in view.not_fine(drifted)] == ["Drifted"]


def test_a_field_the_plugin_does_not_know_is_named_not_fatal(kimi_doc: dict[str, Any]) -> None:
    """A newer operator's CRD admits fields this plugin does not know: the object still shows, the fields are
    named with the fix (upgrade the plugin), and no one is told to fix a spelling the API server accepted."""
    newer = body(kimi_doc)
    newer["spec"]["switching"]["futureKnob"] = 3
    newer["spec"]["pools"]["speculative"]["newPoolField"] = {"a": 1}
    item = view.load(newer)
    assert item.obj.spec.switching.crossover_concurrency == 6
    assert set(item.unknown) == {"spec.switching.futureKnob", "spec.pools.speculative.newPoolField"}
    note = view.unknown_note(item) or ""
    assert "llm/m" in note and "upgrade the plugin" in note and "spelling" not in note
    assert "SpecServe llm/m" in view.status_text(view.status_data(item))
    assert view.unknown_note(view.load(body(kimi_doc))) is None


def test_explain_says_what_blocks_switching(kimi_doc: dict[str, Any]) -> None:
    status = {
        **STATUS,
        "load": None,
        "conditions": [
            cond("MetricsAvailable", "False", "NoData", "no engine series in Prometheus"),
            cond("Degraded", "True", "AutoscalerConflict", "an HPA scales m-spec"),
            cond("Switching", "False", "Paused", "switching is paused"),
        ],
    }
    data = view.explain_data(view.load(body(kimi_doc, paused=True, status=status)))
    text = view.explain_text(data)
    assert "no load recorded yet" not in text
    assert "Switching is blocked:" in text
    assert "MetricsAvailable=False NoData: no engine series in Prometheus" in text
    assert "Degraded (AutoscalerConflict: an HPA scales m-spec)" in text
    assert "paused (kubectl specserve resume" in text
    assert view.explain_data(view.load(body(kimi_doc)))["blocked"] == []

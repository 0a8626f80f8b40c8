"""The demo's pure parts: the embedded SpecServes, the emulator command lines, the ramp, the summary."""

from __future__ import annotations

import pytest

from specserve.api.validation import parse_object
from specserve.render import render
from specserve_tools.demo.load import Record, ramp
from specserve_tools.demo.podargs import emulator_argv
from specserve_tools.demo.report import lines, summarize
from specserve_tools.demo.scenario import STRATEGIES, Scenario, crossover
from specserve_tools.demo.timeline import Sample, Timeline
from specserve_tools.demo.view import decision_line
from specserve_tools.emulator.profile import load_profile


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("profile", ["illustrative-crossover-8b", "seed-kimi-k25-rtxpro6000"])
def test_every_embedded_specserve_is_valid_and_renders_a_route_and_a_pod_monitor(strategy: str, profile: str) -> None:
    scenario = Scenario(strategy, load_profile(profile), 150, 20, "http://127.0.0.1:9090")
    kinds = [m["kind"] for m in render(parse_object(scenario.specserve()))]
    assert "HTTPRoute" in kinds and "PodMonitor" in kinds
    assert kinds.count("Deployment") == (2 if strategy == "TrafficSplit" else 1)


def test_knobs_are_scaled_by_the_compression_but_never_below_the_api_floor() -> None:
    doc = Scenario("TrafficSplit", load_profile("illustrative-crossover-8b"), 60, 60, "http://x:1").specserve()
    switching = doc["spec"]["switching"]
    assert switching["evaluationIntervalSeconds"] == 5  # 15 / 60 -> the API's minimum
    assert switching["downStabilizationSeconds"] == switching["minDwellSeconds"] == 5  # 300 / 60
    assert switching["metrics"]["prometheusUrl"] == "http://x:1"
    assert switching["crossoverConcurrency"] == 64.0


def test_the_crossover_and_the_demand_range_come_from_the_profile() -> None:
    assert crossover(load_profile("illustrative-crossover-8b")) == 64.0
    assert crossover(load_profile("seed-kimi-k25-rtxpro6000")) == 1.0  # speculation never wins there
    seed = Scenario("TrafficSplit", load_profile("seed-kimi-k25-rtxpro6000"), 60, 20, "http://x:1")
    assert seed.specserve()["spec"]["switching"]["initialMode"] == "Baseline"
    low, high = Scenario("TrafficSplit", load_profile("illustrative-crossover-8b"), 60, 20, "u").demand_range()
    assert low < 64 * 0.9 and high > 64 * 2 * 1.1  # below the band, above it for both pools together
    # Requests stream for seconds, not a minute, on the slow seed hardware too.
    assert Scenario("TrafficSplit", load_profile("illustrative-crossover-8b"), 60, 20, "u").max_tokens == 256
    assert seed.max_tokens == 32


def test_emulator_argv_keeps_the_flags_the_emulator_models_and_maps_the_port() -> None:
    rendered = [
        "--model-path", "m", "--served-model-name", "demo", "--host", "0.0.0.0", "--port", "30000",
        "--tp-size", "1", "--enable-metrics", "--max-running-requests", "64",
        "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
        "--speculative-adaptive", "--speculative-adaptive-config", "/etc/specserve/adaptive/config.json",
    ]  # fmt: skip
    argv = emulator_argv(rendered, 4321, "p", 3.0, {"/etc/specserve/adaptive": "/tmp/pod/cfg"})
    tail = argv[argv.index("emulate") + 1 :]
    assert tail[:9] == [
        "--served-model-name", "demo", "--max-running-requests", "64", "--speculative-algorithm", "EAGLE3",
        "--speculative-adaptive", "--speculative-adaptive-config", "/tmp/pod/cfg/config.json",
    ]  # fmt: skip
    assert tail[9:] == ["--host", "127.0.0.1", "--port", "4321", "--profile", "p", "--startup-seconds", "3",
                        "--time-scale", "1"]  # fmt: skip


def test_ramp_goes_up_holds_and_comes_back_down() -> None:
    demand = ramp(100, 8, 160)
    assert demand(0) == demand(5) == 8
    assert demand(20) == pytest.approx(84)
    assert demand(40) == demand(45) == 160
    assert demand(60) == pytest.approx(84)
    assert demand(75) == demand(100) == demand(200) == 8


def _sample(t: float, spec: int, mode: str = "Speculative", failed: int = 0) -> Sample:
    return Sample(t, 10, 10, {"speculative": spec, "baseline": 100 - spec}, mode, {}, 0.0, failed)


def test_summary_counts_pools_switches_and_tpot_around_each_switch() -> None:
    timeline = Timeline(pod_pool={"s-1": "speculative", "b-1": "baseline"})
    timeline.samples = [_sample(0, 100), _sample(1, 100), _sample(2, 50, "Baseline"), _sample(3, 80)]
    fast = [Record(start=0.0, first_token=0.1, last_token=1.1, end=1.5, tokens=101, server="s-1")]
    slow = [Record(start=2.0, first_token=2.1, last_token=4.1, end=4.2, tokens=101, server="b-1")]
    failed = [Record(start=2.5, error="HTTP 503: no server")]
    summary = summarize(fast + slow + failed, 0.0, timeline, [{"time": "t", "reason": "r"}], window=1.9)
    assert [(p.pool, p.requests, p.tokens, p.failed) for p in summary.pools] == [
        ("(no server)", 0, 0, 1),
        ("baseline", 1, 101, 0),
        ("speculative", 1, 101, 0),
    ]
    assert summary.failed == 1 and summary.weight_changes == 2 and summary.weights_moved_both_ways
    first = summary.switches[0]
    assert (first.t, first.before, first.after) == (2, "Speculative 100/0", "Baseline 50/50")
    assert first.tpot_before == (10.0, 10.0)  # 1 s over 100 intervals, in ms
    assert first.tpot_after == (20.0, 20.0)
    text = "\n".join(lines(summary))
    assert "failed 1" in text and "HTTP 503" in text and "(moved both ways)" in text


def test_weights_that_only_fall_did_not_move_both_ways() -> None:
    timeline = Timeline()
    timeline.samples = [_sample(0, 100), _sample(1, 75), _sample(2, 50)]
    assert not summarize([], 0.0, timeline, [], window=1).weights_moved_both_ways


def test_decision_line_shows_weights_and_reason() -> None:
    line = decision_line(
        {"time": "T", "fromMode": "Speculative", "toMode": "Baseline", "action": "SetWeights",
         "weights": {"speculative": 40, "baseline": 60}, "reason": "demand 90 > 70"}
    )  # fmt: skip
    assert line == "decision T: Speculative -> Baseline SetWeights weights 40/60: demand 90 > 70"

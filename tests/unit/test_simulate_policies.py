"""Each compared policy on the shipped step trace (30 min at 16 clients, 60 at 160, 30 at 16) with
illustrative-crossover-8b (speculation wins below 64 per replica), one replica per pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from specserve.api.models import Strategy
from specserve.api.validation import parse_object
from specserve.cli import main
from specserve_tools.emulator.profile import load_profile
from specserve_tools.simulate.cluster import Slo
from specserve_tools.simulate.compare import Comparison, compare
from specserve_tools.simulate.scenario import DEFAULT_SPEC, scenario, with_strategy
from specserve_tools.simulate.setup import bin_trace
from specserve_tools.simulate.summary import Summary
from specserve_tools.simulate.synthetic import step
from tests.conftest import ROOT

STEP_UP, STEP_DOWN = 1800.0, 5400.0


def run(strategy: Strategy) -> Comparison:
    obj = with_strategy(parse_object(DEFAULT_SPEC), strategy)
    scen = scenario(obj, load_profile("illustrative-crossover-8b"), Slo(5.0, 0.1))
    return compare(scen.setup, bin_trace(step(), 1.0), scen.knobs, scen.curves, jobs=1)


@pytest.fixture(scope="module")
def restart() -> Comparison:
    return run(Strategy.RESTART)


@pytest.fixture(scope="module")
def split() -> Comparison:
    return run(Strategy.TRAFFIC_SPLIT)


def by_role(c: Comparison, role: str) -> Summary:
    return next(s for s in c.rows() if s.role == role)


def share(c: Comparison, role: str, t: float) -> float:
    index = [s.role for s in c.summaries].index(role)
    timeline = c.runs[index].timeline
    return timeline.speculative_share[min(range(len(timeline.time)), key=lambda i: abs(timeline.time[i] - t))]


def test_static_policies_never_switch(restart: Comparison, split: Comparison) -> None:
    for c in (restart, split):
        for role in ("speculative", "baseline"):
            s = by_role(c, role)
            assert s.switches == 0 and s.weight_changes == 0 and s.restart_downtime_seconds == 0


def test_naive_switch_follows_each_crossing(restart: Comparison, split: Comparison) -> None:
    naive = by_role(restart, "naive")
    assert naive.restarts_into_baseline == 1 and naive.restarts_into_speculative == 1
    assert share(restart, "naive", STEP_UP + 600) == 0.0 and share(restart, "naive", STEP_DOWN + 600) == 100.0
    assert by_role(split, "naive").weight_changes == 2
    assert share(split, "naive", STEP_UP + 300) == 0.0


def test_specserve_restart_goes_baseline_for_the_high_phase_and_back(restart: Comparison) -> None:
    s = by_role(restart, "specserve")
    assert s.restarts_into_baseline == 1 and s.restarts_into_speculative <= 1
    assert share(restart, "specserve", STEP_UP - 60) == 100.0
    assert share(restart, "specserve", STEP_DOWN - 60) == 0.0
    assert s.restart_downtime_seconds == pytest.approx(60.0 * (s.restarts_into_baseline + s.restarts_into_speculative))


def test_specserve_split_keeps_weight_on_speculation_at_high_load(split: Comparison) -> None:
    # 16 clients on two GPUs: both pools serve (8 each beat 16 on one), most weight on speculation; at 160 the
    # weight moves towards baseline but not to 0: the speculative pool's GPU still adds capacity
    low, high = share(split, "specserve", STEP_UP - 60), share(split, "specserve", STEP_DOWN - 60)
    assert 50.0 < low < 100.0 and 0.0 < high < low
    assert by_role(split, "specserve").goodput_tokens > by_role(split, "fixed").goodput_tokens * 0.97


def test_optimum_is_best_and_gain_is_relative_to_it(restart: Comparison, split: Comparison) -> None:
    for c in (restart, split):
        optimum = by_role(c, "optimum")
        assert optimum.gain_captured == pytest.approx(1.0)
        assert optimum.goodput_tokens >= max(s.goodput_tokens for s in c.summaries)  # a bound: never beaten
        best = max((s for s in c.summaries if s.role in ("speculative", "baseline", "fixed")),
                   key=lambda s: s.goodput_tokens)  # fmt: skip
        assert best.gain_captured == pytest.approx(0.0)


def test_every_request_is_accounted_for(restart: Comparison) -> None:
    for summary, run_ in zip(restart.summaries, restart.runs, strict=True):
        assert summary.requests_completed + run_.in_flight_at_end == pytest.approx(summary.requests_arrived)
        assert summary.goodput_tokens <= summary.output_tokens + 1e-6


def test_cli_writes_every_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim"
    code = main(["simulate", "--trace", "step", "--strategy", "Restart", "--jobs", "1", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0 and "SpecServe Restart" in text
    assert "optimum (upper bound)" in text and "offline plan (replayed)" in text
    doc = json.loads((out / "result.json").read_text())
    roles = {p["role"] for p in doc["policies"]}
    assert doc["strategy"] == "Restart" and roles >= {"specserve", "optimum", "plan", "naive"}
    assert (out / "result.csv").read_text().startswith("name,role,output_tokens")
    assert (out / "timeline.png").stat().st_size > 0 and (out / "gain.png").stat().st_size > 0


def test_seed_profile_restart_never_restarts_into_speculation() -> None:
    # Kimi-K2.5 on RTX PRO 6000: speculation loses at every concurrency. Starting speculative (the default
    # initialMode), the policy restarts into baseline once and never back.
    obj = with_strategy(parse_object(DEFAULT_SPEC), Strategy.RESTART)
    scen = scenario(obj, load_profile("seed-kimi-k25-rtxpro6000"), Slo(5.0, 1.0))
    c = compare(scen.setup, bin_trace(step(), 1.0), scen.knobs, scen.curves, jobs=1)
    s = by_role(c, "specserve")
    assert s.restarts_into_speculative == 0 and s.restarts_into_baseline == 1
    assert s.goodput_tokens > by_role(c, "speculative").goodput_tokens


def test_seed_example_serves_exactly_like_always_baseline() -> None:
    doc = yaml.safe_load((ROOT / "examples" / "kimi-k25-rtxpro6000.yaml").read_text())  # initialMode Baseline
    for strategy in (Strategy.RESTART, Strategy.TRAFFIC_SPLIT):
        scen = scenario(with_strategy(parse_object(doc), strategy), load_profile("seed-kimi-k25-rtxpro6000"),
                        Slo(5.0, 1.0))  # fmt: skip
        c = compare(scen.setup, bin_trace(step(), 1.0), scen.knobs, scen.curves, jobs=1)
        s = by_role(c, "specserve")
        assert s.restarts_into_speculative == 0
        best = max((x for x in c.summaries if x.role in ("speculative", "baseline", "fixed")),
                   key=lambda x: x.goodput_tokens)  # fmt: skip
        assert s.goodput_tokens >= 0.99 * best.goodput_tokens


def test_the_policy_gets_the_tpot_slo_unless_told_not_to() -> None:
    obj, profile, slo = parse_object(DEFAULT_SPEC), load_profile("illustrative-crossover-8b"), Slo(5.0, 0.05)
    given = scenario(obj, profile, slo)
    assert given.knobs.tpot_slo == 0.05 and any("spec.switching.tpotSloSeconds" in n for n in given.notes)
    plain = scenario(obj, profile, slo, policy_slo=False)
    assert plain.knobs.tpot_slo is None


def test_the_spec_s_own_tpot_slo_is_what_the_policy_gets() -> None:
    """The same knob the operator reads: spec.switching.tpotSloSeconds wins over the scoring SLO."""
    raw = {**DEFAULT_SPEC, "spec": {**DEFAULT_SPEC["spec"], "switching": {"tpotSloSeconds": 0.08}}}
    obj, profile, slo = parse_object(raw), load_profile("illustrative-crossover-8b"), Slo(5.0, 0.05)
    assert scenario(obj, profile, slo).knobs.tpot_slo == 0.08
    assert scenario(obj, profile, slo, policy_slo=False).knobs.tpot_slo == 0.08

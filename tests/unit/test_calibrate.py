"""Calibration: crossover, hysteresis and adaptive config on synthetic curves with known answers, on the seed
data (no crossover), and the `specserve calibrate` command including --write."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from specserve.api.curves import Curve, CurveError, crossings, interpolate
from specserve.api.validation import parse_object
from specserve.cli import main
from specserve.render.adaptive import SPEC_CAPTURE_SIZES, first_capture_size_at_least
from specserve.render.adaptive import sglang_config as sglang_adaptive_json
from specserve_tools.bench.calibrate import (
    DEFAULT_NOISE,
    Measured,
    Verdict,
    Winner,
    adaptive_config_for,
    calibrate,
    hysteresis_band,
)
from specserve_tools.bench.fit import has_shape, saturating_fit
from specserve_tools.bench.results import load_result, measured_runs
from specserve_tools.bench.specyaml import spec_doc_from_text

SEED = [
    (1, 77.5, 92.6), (2, 125.1, 159.7), (5, 183.2, 292.5), (10, 239.6, 457.2),
    (30, 299.5, 711.0), (70, 337.7, 784.2), (100, 338.8, 761.6), (250, 340.9, 772.1),
]  # fmt: skip


def curve(points: Sequence[tuple[float, float]]) -> Curve:
    return Curve.from_points(points)


def test_interpolation_is_piecewise_linear_and_flat_outside() -> None:
    xs, ys = (1.0, 10.0, 100.0), (100.0, 1000.0, 1900.0)
    assert interpolate(xs, ys, 5.5) == pytest.approx(550.0)
    assert interpolate(xs, ys, 55.0) == pytest.approx(1450.0)
    assert interpolate(xs, ys, 10.0) == 1000.0
    assert interpolate(xs, ys, 0.5) == 100.0
    assert interpolate(xs, ys, 500.0) == 1900.0


def test_curve_rejects_bad_points() -> None:
    with pytest.raises(CurveError, match="no points"):
        Curve.from_points([])
    with pytest.raises(CurveError, match="> 0"):
        Curve.from_points([(-1, 5)])
    with pytest.raises(CurveError, match="non-finite"):
        Curve.from_points([(1, float("nan"))])


def test_known_crossover_is_solved_on_the_segment() -> None:
    # difference +100 at 10 and -200 at 100, linear between: zero at 10 + 90 * 100/300 = 40
    spec = curve([(1, 100), (10, 500), (100, 800)])
    base = curve([(1, 50), (10, 400), (100, 1000)])
    cal = calibrate(spec, base, num_steps=3)
    assert cal.verdict is Verdict.CROSSOVER
    assert cal.crossover == pytest.approx(40.0)
    assert cal.initial_mode == "Speculative"
    assert cal.adaptive_config == {"1": [3], "40": [0]}


def test_crossover_between_points_of_different_grids() -> None:
    # measured at different concurrencies: spec at 1, 20; base at 1, 10, 20
    spec = curve([(1, 200), (20, 1200)])  # 200 + (x - 1) * 1000/19
    base = curve([(1, 100), (10, 600), (20, 1600)])
    found = crossings(spec, base)
    assert len(found) == 1 and found[0][1] == -1
    x = found[0][0]
    assert spec.at(x) == pytest.approx(base.at(x))
    assert 10 < x < 20


def test_adaptive_key_is_the_first_capture_size_at_or_above_the_crossover() -> None:
    assert first_capture_size_at_least(40.0) == 40
    assert first_capture_size_at_least(33.2) == 40  # spec capture sizes: ..., 30, 32, 40, 44, ...
    assert first_capture_size_at_least(9.0) == 10
    assert adaptive_config_for(33.2, Verdict.CROSSOVER, 2) == {"1": [2], "40": [0]}
    assert 256 in SPEC_CAPTURE_SIZES and 5 in SPEC_CAPTURE_SIZES
    assert sglang_adaptive_json({"1": [3], "40": [0]}) == {
        "1": {"candidate_steps": [3]},
        "40": {"candidate_steps": [0]},
    }


def test_hysteresis_band_widens_when_curves_stay_close() -> None:
    spec = curve([(1, 100), (10, 500), (100, 800)])
    sharp = curve([(1, 10), (10, 100), (40, 650), (100, 5000)])
    close = curve([(1, 99), (10, 499), (100, 801)])
    x_sharp = crossings(spec, sharp)[0][0]
    x_close = crossings(spec, close)[0][0]
    assert hysteresis_band(spec, sharp, x_sharp) < hysteresis_band(spec, close, x_close)
    assert hysteresis_band(spec, close, x_close) == 0.5  # capped
    assert hysteresis_band(spec, sharp, x_sharp) >= 0.05  # floor


def test_seed_data_has_no_crossover_and_recommends_baseline() -> None:
    spec = curve([(c, s) for c, s, _ in SEED])
    base = curve([(c, b) for c, _, b in SEED])
    cal = calibrate(spec, base)
    assert cal.verdict is Verdict.BASELINE_ONLY
    assert cal.crossover is None
    assert cal.initial_mode == "Baseline"
    assert cal.adaptive_config == {"1": [0]}
    assert "never wins" in cal.notes[0] and "baseline only" in cal.notes[0]


def test_speculation_winning_everywhere_has_no_crossover() -> None:
    cal = calibrate(curve([(1, 300), (64, 4000)]), curve([(1, 150), (64, 3000)]), num_steps=5)
    assert cal.verdict is Verdict.SPECULATIVE_ONLY and cal.crossover is None
    assert cal.adaptive_config == {"1": [5]}


def _bench(path: Path, points: Sequence[tuple[float, float]], label: str, accept: Sequence[float | None] = ()) -> str:
    levels: list[dict[str, object]] = [{"concurrency": c, "output_tokens_per_s": t, "requests": 10} for c, t in points]
    for level, value in zip(levels, accept, strict=False):
        level["accept_length"] = value
    path.write_text(json.dumps({"format": "specserve-bench/v1", "label": label, "levels": levels}))
    return str(path)


SPEC_YAML = """\
# my deployment: keep this comment
apiVersion: specserve.io/v1alpha1
kind: SpecServe
metadata:
  name: llama
spec:
  model:
    path: meta-llama/Llama-3.1-8B-Instruct  # the target
  speculative:
    draftModelPath: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B
    numSteps: 4
  strategy: Adaptive
  switching:
    evaluationIntervalSeconds: 30
"""


def test_calibrate_command_writes_the_spec_and_keeps_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _bench(tmp_path / "s.json", [(1, 100), (10, 500), (100, 800)], "speculative")
    base = _bench(tmp_path / "b.json", [(1, 50), (10, 400), (100, 1000)], "baseline")
    yaml_path = tmp_path / "specserve.yaml"
    yaml_path.write_text(SPEC_YAML)
    assert main(["calibrate", spec, base, "--write", str(yaml_path)]) == 0
    out = capsys.readouterr().out
    assert "crossover concurrency: 40" in out
    assert '"40": {"candidate_steps": [0]}' in out
    text = yaml_path.read_text()
    assert "# my deployment: keep this comment" in text and "# the target" in text
    obj = parse_object(spec_doc_from_text(text, "x"))
    sw = obj.spec.switching
    assert sw.crossover_concurrency == 40 and sw.evaluation_interval_seconds == 30
    assert sw.curves is not None and [p.tokens_per_second for p in sw.curves.baseline] == [50, 400, 1000]
    assert obj.spec.speculative.adaptive_config == {"1": [4], "40": [0]}  # numSteps taken from the file


def test_calibrate_writes_the_accept_length_the_speculative_curve_was_measured_at(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without it the operator took a live reading as its reference, whatever traffic it came from, and reset
    it to the reading of the moment on a drift: on the H200 a sampled half left it at 1.53 against the bench's
    3.98 (docs/real-engine.md, sixth session)."""
    spec = _bench(tmp_path / "s.json", [(1, 100), (10, 500), (100, 800)], "speculative", accept=[4.0, 3.98, 3.81])
    base = _bench(tmp_path / "b.json", [(1, 50), (10, 400), (100, 1000)], "baseline")
    yaml_path = tmp_path / "specserve.yaml"
    yaml_path.write_text(SPEC_YAML)
    assert main(["calibrate", spec, base, "--write", str(yaml_path)]) == 0
    assert "accept length the speculative curve was measured at: 3.98" in capsys.readouterr().out
    obj = parse_object(spec_doc_from_text(yaml_path.read_text(), "x"))
    assert obj.spec.switching.calibrated_accept_length == 3.98  # the median over the levels
    # A sweep that read no accept length (a release without the gauge, a plain pool) leaves a hand-set one alone.
    yaml_path.write_text(SPEC_YAML.replace("evaluationIntervalSeconds: 30", "calibratedAcceptLength: 2.5"))
    bare = _bench(tmp_path / "s2.json", [(1, 100), (10, 500), (100, 800)], "speculative", accept=[None, 0.0])
    assert main(["calibrate", bare, base, "--json"]) == 0
    assert "calibratedAcceptLength" not in json.loads(capsys.readouterr().out)["spec"]["switching"]
    assert main(["calibrate", bare, base, "--write", str(yaml_path)]) == 0
    obj = parse_object(spec_doc_from_text(yaml_path.read_text(), "x"))
    assert obj.spec.switching.calibrated_accept_length == 2.5


def test_calibrate_command_on_seed_data_says_baseline_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _bench(tmp_path / "s.json", [(c, s) for c, s, _ in SEED], "speculative")
    base = _bench(tmp_path / "b.json", [(c, b) for c, _, b in SEED], "baseline")
    assert main(["calibrate", spec, base, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "baseline-only" and report["recommendation"] == "baseline only"
    assert "crossoverConcurrency" not in report["spec"]["switching"]
    assert report["spec"]["switching"]["initialMode"] == "Baseline"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ('{"levels": "x"}', "no 'levels' list"),
        ('{"levels": [{"concurrency": 1}]}', "needs numeric concurrency and output_tokens_per_s"),
        ('{"levels": [{"concurrency": -1, "output_tokens_per_s": 3}]}', "concurrency must be > 0"),
    ],
)
def test_calibrate_rejects_malformed_bench_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, fragment: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = _bench(tmp_path / "g.json", [(1, 10)], "b")
    assert main(["calibrate", str(bad), good]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err
    assert main(["calibrate", str(tmp_path / "missing.json"), good]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_illustrative_profile_crosses_at_64_with_a_narrow_symmetric_band() -> None:
    from specserve_tools.emulator.profile import load_profile  # noqa: PLC0415 (only this test needs the emulator)

    p = load_profile("illustrative-crossover-8b")
    cal = calibrate(p.speculative, p.baseline, num_steps=3)
    assert cal.verdict is Verdict.CROSSOVER and cal.crossover == pytest.approx(64.0)
    assert cal.adaptive_config == {"1": [3], "64": [0]}
    # within 5% from about 60 (speed-up 1.04) to about 88 (0.95): the band takes the narrower side
    assert cal.hysteresis == pytest.approx(0.08, abs=0.01)


# --- noise: the shape fit, calls beyond the noise, the replay of the first real-engine run ---------------------

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real-engine"


def _measured(points: Sequence[tuple[float, float]], noise: float) -> Measured:
    return Measured.from_levels([(x, y, None) for x, y in points], default_noise=noise)


def test_fit_keeps_curves_with_the_shape_and_pulls_a_spike_down() -> None:
    xs, ys = [1.0, 2.0, 4.0, 8.0], [100.0, 190.0, 350.0, 600.0]
    assert has_shape(xs, ys) and saturating_fit(xs, ys, [0.05] * 4) == ys
    # falling throughput is allowed (overload), a per-request rate that rises with load is not
    assert has_shape([1.0, 2.0], [100.0, 90.0]) and not has_shape([1.0, 2.0], [100.0, 210.0])
    spiky = [100.0, 190.0, 500.0, 600.0]  # C=4 serves 125 tok/s per request, more than C=2's 95
    fitted = saturating_fit(xs, spiky, [0.05] * 4)
    assert has_shape(xs, fitted)
    assert fitted[2] < 500 and fitted[1] > 190  # the spike is shared with its neighbour
    # a tighter level pulls harder: pinned C=4, the neighbour moves
    pinned = saturating_fit(xs, spiky, [0.05, 0.05, 0.001, 0.05])
    assert pinned[2] == pytest.approx(500, rel=0.01) and pinned[1] > fitted[1]
    assert saturating_fit(xs, spiky, [0.0] * 4) == spiky  # exact data: nothing to weigh the shape against


def test_a_level_within_the_noise_is_no_crossover() -> None:
    # speculation 3% behind at C=2 only, 10-30% ahead elsewhere: exact curves would cross twice
    spec = [(1, 330.0), (2, 582.0), (4, 1265.0), (8, 2580.0), (16, 5070.0)]
    base = [(1, 300.0), (2, 600.0), (4, 1150.0), (8, 2150.0), (16, 3900.0)]
    assert crossings(curve(spec), curve(base))[0][1] == -1  # what the old calibrate took
    cal = calibrate(_measured(spec, 0.05), _measured(base, 0.05))
    assert cal.verdict is Verdict.SPECULATIVE_ONLY and cal.crossover is None
    assert cal.levels[1].winner is Winner.NEITHER and cal.levels[-1].winner is Winner.SPECULATIVE
    assert all(s > b for (_, s), (_, b) in zip(cal.speculative, cal.baseline, strict=True))


def test_a_crossover_needs_the_baseline_beyond_the_noise_at_the_top() -> None:
    spec = [(1, 100.0), (10, 500.0), (30, 700.0), (100, 800.0), (250, 810.0)]
    base = [(1, 50.0), (10, 400.0), (30, 690.0), (100, 1000.0), (250, 1200.0)]
    cal = calibrate(_measured(spec, 0.05), _measured(base, 0.05))
    assert cal.verdict is Verdict.CROSSOVER and cal.confidence == "high"
    assert cal.crossover_range == (10.0, 100.0)  # 30 is within the noise
    assert cal.crossover is not None and 30 < cal.crossover < 100
    # the spec's current crossover lies in that range: kept, nothing rolls for noise
    kept = calibrate(_measured(spec, 0.05), _measured(base, 0.05), current_crossover=20.0)
    assert kept.crossover == 20.0 and any("kept" in n for n in kept.notes)
    moved = calibrate(_measured(spec, 0.05), _measured(base, 0.05), current_crossover=150.0)
    assert moved.crossover == cal.crossover  # the baseline wins beyond the noise at 100: 150 is contradicted


def test_a_current_crossover_above_what_was_measured_stays() -> None:
    spec = [(1, 200.0), (8, 1400.0), (64, 5900.0)]
    base = [(1, 100.0), (8, 900.0), (64, 5000.0)]
    assert calibrate(_measured(spec, 0.05), _measured(base, 0.05)).verdict is Verdict.SPECULATIVE_ONLY
    kept = calibrate(_measured(spec, 0.05), _measured(base, 0.05), current_crossover=100.0)
    assert kept.verdict is Verdict.CROSSOVER and kept.crossover == 100.0 and kept.confidence == "low"
    assert kept.adaptive_config == {"1": [3], "104": [0]}
    # below speculation's last win, the data contradict it
    assert calibrate(_measured(spec, 0.05), _measured(base, 0.05), current_crossover=40.0).crossover is None


def test_a_baseline_lead_within_the_noise_at_high_load_is_a_low_confidence_crossover() -> None:
    # speculation wins clearly at low load; at the top the baseline leads by 2%, within the noise:
    # conservative is baseline at high load, said with low confidence
    spec = [(1, 200.0), (8, 1400.0), (64, 4900.0)]
    base = [(1, 100.0), (8, 900.0), (64, 5000.0)]
    cal = calibrate(_measured(spec, 0.05), _measured(base, 0.05))
    assert cal.verdict is Verdict.CROSSOVER and cal.confidence == "low"
    assert cal.crossover is not None and 8 < cal.crossover < 64
    assert "Conservative: baseline at high load" in cal.notes[0]


def test_data_that_cannot_decide_say_so_and_keep_the_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = [(1, 102.0), (10, 498.0), (100, 1010.0)]
    base = [(1, 100.0), (10, 500.0), (100, 1000.0)]
    cal = calibrate(_measured(spec, 0.05), _measured(base, 0.05))
    assert cal.verdict is Verdict.UNDECIDED and cal.confidence == "low" and cal.crossover is None
    assert cal.initial_mode == "Baseline" and "cannot decide" in cal.notes[0]
    s, b = _bench(tmp_path / "s.json", spec, "speculative"), _bench(tmp_path / "b.json", base, "baseline")
    yaml_path = tmp_path / "specserve.yaml"
    yaml_path.write_text(SPEC_YAML)
    assert main(["calibrate", s, b, "--write", str(yaml_path)]) == 0
    assert "not changed" in capsys.readouterr().out and yaml_path.read_text() == SPEC_YAML
    # the same data taken as exact (--noise 0) decide
    assert main(["calibrate", s, b, "--noise", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] != "undecided"


def test_repeated_levels_carry_their_own_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 3% lead measured tightly (v2 files: samples and CI per level) is a win; the same lead from one window
    per level (v1) is within the default noise."""

    def repeated(path: Path, points: Sequence[tuple[float, float]], label: str) -> str:
        levels = [
            {"concurrency": c, "output_tokens_per_s": t, "requests": 30, "samples": [t * 0.995, t, t * 1.005],
             "ci_low": t * 0.99, "ci_high": t * 1.01}
            for c, t in points
        ]  # fmt: skip
        path.write_text(json.dumps({"format": "specserve-bench/v2", "label": label, "levels": levels}))
        return str(path)

    spec = [(1, 103.0), (10, 515.0), (100, 1030.0)]
    base = [(1, 100.0), (10, 500.0), (100, 1000.0)]
    assert main(["calibrate", repeated(tmp_path / "s.json", spec, "s"), repeated(tmp_path / "b.json", base, "b"),
                 "--json"]) == 0  # fmt: skip
    tight = json.loads(capsys.readouterr().out)
    assert tight["verdict"] == "speculative-only" and tight["confidence"] == "high"
    assert main(["calibrate", _bench(tmp_path / "s1.json", spec, "s"), _bench(tmp_path / "b1.json", base, "b"),
                 "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["verdict"] == "undecided"


def test_replay_of_the_first_real_engine_run_puts_no_crossover_at_1_27(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 18: fed the two real sweeps, calibrate put the crossover at 1.27 in flight because one noisy level
    (C=2) crossed, although speculation won by 4-43% from C=4 to 64."""
    from specserve.policy.curves import ModeCurves  # noqa: PLC0415
    from specserve.policy.curves import crossover as policy_crossover  # noqa: PLC0415

    run = REAL / "reconstructed"
    spec_file, base_file = str(run / "standalone.json"), str(run / "plain.json")
    spec, base = load_result(spec_file), load_result(base_file)
    # the fixture reproduces the failure: the raw curves' first crossing is 1.27
    x, direction = crossings(spec.curve(), base.curve())[0]
    assert x == pytest.approx(1.27, abs=0.01) and direction == -1
    cal = calibrate(spec.measured(DEFAULT_NOISE), base.measured(DEFAULT_NOISE))
    assert cal.verdict is Verdict.SPECULATIVE_ONLY and cal.crossover is None
    assert cal.initial_mode == "Speculative" and cal.adaptive_config == {"1": [3]}
    # what the operator reads: the written curves give its policy no crossover either
    written = ModeCurves(Curve.from_points(cal.speculative), Curve.from_points(cal.baseline))
    assert policy_crossover(written) is None
    # end to end, over a spec that holds the old answer: --write removes the 1.27 and keeps speculation on
    yaml_path = tmp_path / "specserve.yaml"
    yaml_path.write_text(SPEC_YAML + "    crossoverConcurrency: 1.27\n")
    assert main(["calibrate", spec_file, base_file, "--write", str(yaml_path)]) == 0
    assert "speculative-only" in capsys.readouterr().out
    sw = parse_object(spec_doc_from_text(yaml_path.read_text(), "x")).spec.switching
    assert sw.crossover_concurrency is None and sw.initial_mode.value == "Speculative"
    assert obj_adaptive(yaml_path) == {"1": [4]}


def obj_adaptive(path: Path) -> dict[str, list[int]] | None:
    return parse_object(spec_doc_from_text(path.read_text(), "x")).spec.speculative.adaptive_config


def test_several_sweeps_of_a_mode_give_a_run_to_run_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Several sweeps per mode: each level's noise is the t interval across the runs, not --noise."""
    xs = (1, 10, 100)
    runs = {
        "s": [[(x, r * x * f) for x in xs] for r, f in ((100.0, 1.04), (100.0, 1.03), (100.0, 1.035))],
        "b": [[(x, r * x * f) for x in xs] for r, f in ((100.0, 1.0), (100.0, 1.005), (100.0, 0.998))],
    }
    files = {m: [_bench(tmp_path / f"{m}{i}.json", pts, m) for i, pts in enumerate(rs)] for m, rs in runs.items()}
    # one sweep each: a 3-4% lead is within the default 5% noise
    assert main(["calibrate", files["s"][0], files["b"][0], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "undecided"
    # three sweeps each, agreeing within 1%: the lead is beyond the noise
    more = [a for m, flag in (("s", "--more-speculative"), ("b", "--more-baseline")) for f in files[m][1:]
            for a in (flag, f)]  # fmt: skip
    assert main(["calibrate", files["s"][0], files["b"][0], *more, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "speculative-only" and report["levels"][0]["speculative"] == pytest.approx(103.5)
    # two runs: the noise is at least what one run gets (--noise), so the lead stays within it
    assert main(["calibrate", files["s"][0], files["b"][0], "--more-speculative", files["s"][1],
                 "--more-baseline", files["b"][1], "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["verdict"] == "undecided"


H200 = REAL / "h200-sglang-0.5.17"


@pytest.mark.parametrize("mode", ["standalone", "eagle3", "adaptive"])
def test_replay_of_the_h200_sweeps_says_baseline_only(mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The real H200 sweeps (two runs per server): the baseline wins everywhere, whichever runs are compared, and
    the two runs of each pooled still say so."""
    for spec_run in ("r1", "r2"):
        for base_run in ("r1", "r2"):
            spec = load_result(str(H200 / f"h200-{mode}-{spec_run}.json"))
            base = load_result(str(H200 / f"h200-baseline-{base_run}.json"))
            cal = calibrate(spec.measured(DEFAULT_NOISE), base.measured(DEFAULT_NOISE))
            assert cal.verdict is Verdict.BASELINE_ONLY and cal.crossover is None, (spec_run, base_run)
    assert main(["calibrate", str(H200 / f"h200-{mode}-r1.json"), str(H200 / "h200-baseline-r1.json"),
                 "--more-speculative", str(H200 / f"h200-{mode}-r2.json"),
                 "--more-baseline", str(H200 / "h200-baseline-r2.json"), "--json"]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "baseline-only" and report["spec"]["switching"]["initialMode"] == "Baseline"
    top = report["levels"][-1]
    assert top["winner"] == "baseline" and top["baseline"] > 1.4 * top["speculative"]


def test_runs_that_disagree_widen_the_noise() -> None:
    """The Adaptive pod's two real sweeps differ by 37% at C=2 (316 vs 216 tok/s): pooled, that level's noise
    is that difference, and it is called for neither mode although the baseline leads it by 24%."""
    runs = [load_result(str(H200 / f"h200-adaptive-{r}.json")) for r in ("r1", "r2")]
    base = [load_result(str(H200 / f"h200-baseline-{r}.json")) for r in ("r1", "r2")]
    spec_m = measured_runs(runs, DEFAULT_NOISE)
    assert spec_m.noise[1] > 0.3 and spec_m.noise[2] == DEFAULT_NOISE  # C=2 disagree; C=4 agree within 1%
    cal = calibrate(spec_m, measured_runs(base, DEFAULT_NOISE))
    assert [c.winner for c in cal.levels][1:3] == [Winner.NEITHER, Winner.BASELINE]


def test_a_dip_within_the_noise_is_no_low_confidence_crossover_either() -> None:
    """Speculation wins beyond the noise at C=1 only; C=2 dips under the baseline and 4-64 lead by 3%, all
    within the noise: the fitted curves cross at ~1.3 but speculation is ahead again above, so no crossover."""
    spec = [(1, 330.0), (2, 560.0), (4, 1185.0), (8, 2215.0), (16, 4020.0), (32, 6800.0), (64, 10500.0)]
    base = [(1, 300.0), (2, 600.0), (4, 1150.0), (8, 2150.0), (16, 3900.0), (32, 6600.0), (64, 10200.0)]
    cal = calibrate(_measured(spec, 0.05), _measured(base, 0.05))
    assert [c.winner for c in cal.levels][:2] == [Winner.SPECULATIVE, Winner.NEITHER]
    assert cal.verdict is Verdict.SPECULATIVE_ONLY and cal.crossover is None and cal.confidence == "low"


def test_swapped_bench_files_are_refused_with_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each file carries its label: given the other way round, calibrate would call speculation the loser (and
    --write would store that); it refuses, naming the files and the command the other way round."""
    spec = _bench(tmp_path / "s.json", [(1, 100), (10, 500), (100, 800)], "speculative")
    base = _bench(tmp_path / "b.json", [(1, 50), (10, 400), (100, 1000)], "baseline")
    yaml_path = tmp_path / "specserve.yaml"
    yaml_path.write_text(SPEC_YAML)
    assert main(["calibrate", base, spec, "--write", str(yaml_path)]) == 2
    err = capsys.readouterr().err
    assert f"{base} measured a baseline server but is given as the speculative one" in err
    assert f"swap them: specserve calibrate {spec} {base}" in err
    assert yaml_path.read_text() == SPEC_YAML  # nothing written
    # The server's own word counts too (get_server_info's speculative_algorithm), whatever the label.
    doc = json.loads(Path(spec).read_text())
    doc |= {"label": "run-2", "server": {"speculative_algorithm": "EAGLE3"}}
    (tmp_path / "s2.json").write_text(json.dumps(doc))
    assert main(["calibrate", spec, base, "--more-baseline", str(tmp_path / "s2.json")]) == 2
    assert "s2.json measured a speculative server but is given as the baseline one" in capsys.readouterr().err
    assert main(["calibrate", base, spec, "--ignore-labels", "--json"]) == 0  # the escape hatch


def test_bench_plot_tells_two_speculative_runs_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specserve_tools.commands import bench  # noqa: PLC0415

    drawn: list[str] = []
    monkeypatch.setattr(bench, "plot_curves", lambda curves, path: drawn.extend(label for label, _ in curves))
    one = _bench(tmp_path / "eagle3-r1.json", [(1, 100), (10, 500)], "speculative")
    two = _bench(tmp_path / "eagle3-r2.json", [(1, 110), (10, 520)], "speculative")
    base = _bench(tmp_path / "base.json", [(1, 50), (10, 400)], "baseline")
    assert main(["bench", "--plot", one, two, base, "--output-dir", str(tmp_path)]) == 0
    assert drawn == ["speculative (eagle3-r1.json)", "speculative (eagle3-r2.json)", "baseline"]

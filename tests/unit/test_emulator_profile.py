"""Performance profiles: the shipped data, the H100 baseline model, user files, and bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specserve_tools.emulator.adaptive import parse_adaptive_config
from specserve_tools.emulator.profile import (
    ProfileError,
    baseline_model,
    load_profile,
    parse_profile,
    profile_from_bench,
    shipped_profiles,
)

# shared/data/seed_benchmark.csv, as copied into the shipped profile
SEED = [
    (1, 77.5, 92.6), (2, 125.1, 159.7), (5, 183.2, 292.5), (10, 239.6, 457.2),
    (30, 299.5, 711.0), (70, 337.7, 784.2), (100, 338.8, 761.6), (250, 340.9, 772.1),
]  # fmt: skip
# shared/data/eagle3_llama31_8b_h100.csv
SPEEDUP = {1: 2.36, 2: 1.81, 4: 1.82, 8: 1.62, 16: 1.48, 24: 1.39, 32: 1.32, 48: 1.38, 56: 1.34, 64: 1.38}


def test_both_profiles_ship() -> None:
    assert {"seed-kimi-k25-rtxpro6000", "eagle3-llama31-8b-h100"} <= set(shipped_profiles())


def test_seed_profile_is_the_seed_benchmark() -> None:
    p = load_profile("seed-kimi-k25-rtxpro6000")
    assert p.speculative.points() == [(c, s) for c, s, _ in SEED]
    assert p.baseline.points() == [(c, b) for c, _, b in SEED]
    assert p.startup_seconds == 510


def test_h100_profile_is_baseline_model_times_speedup() -> None:
    p = load_profile("eagle3-llama31-8b-h100")
    assert p.baseline.at(1) == pytest.approx(158.0)
    assert p.speculative.at(1) == pytest.approx(158.0 * 2.36)  # the paper's 373 tok/s
    for batch, ratio in SPEEDUP.items():
        assert p.speculative.at(batch) / p.baseline.at(batch) == pytest.approx(ratio)
    assert p.speculative.at(250) / p.baseline.at(250) == pytest.approx(1.38)  # held beyond the data
    # the stated saturating model: per-stream rate halves at batch s + 1
    assert baseline_model(158.0, 32.0, 33) / 33 == pytest.approx(158.0 / 2)


def test_interpolation_between_profile_points_is_linear() -> None:
    p = load_profile("seed-kimi-k25-rtxpro6000")
    assert p.baseline.at(20) == pytest.approx(457.2 + (711.0 - 457.2) * 10 / 20)
    assert p.baseline.at(1000) == 772.1  # flat beyond the last point


def test_user_profile_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"name": "mine", "curves": {"speculative": [[1, 10], [8, 40]],
                                                          "baseline": [[1, 8], [8, 60]]}}))  # fmt: skip
    p = load_profile(str(path))
    assert p.name == "mine" and p.speculative.at(4.5) == pytest.approx(25)


def test_profile_from_bench_results(tmp_path: Path) -> None:
    for name, scale in (("s", 1.0), ("b", 2.0)):
        levels = [{"concurrency": c, "output_tokens_per_s": c * 10 * scale} for c in (1, 4, 16)]
        (tmp_path / f"{name}.json").write_text(json.dumps({"levels": levels}))
    p = profile_from_bench(str(tmp_path / "s.json"), str(tmp_path / "b.json"))
    assert p.speculative.at(4) == 40 and p.baseline.at(4) == 80


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ([], "JSON object"),
        ({"name": "x"}, "needs 'curves'"),
        ({"curves": {"speculative": [[1, 2]], "baseline": "nope"}}, "list of [concurrency, value]"),
        ({"curves": {"speculative": [[0, 2]], "baseline": [[1, 2]]}}, "concurrency must be > 0"),
        ({"curves": {"speculative": [[1, -2]], "baseline": [[1, 2]]}}, "tokens/s must be >= 0"),
        ({"curves": {"speculative": [[1, 2], [1, 3]], "baseline": [[1, 2]]}}, "appears twice"),
        ({"curves": {"speculative": [[1, 2]], "baseline": [[1, 2]]}, "ttft_seconds": "fast"}, "ttft_seconds"),
    ],
)
def test_malformed_profiles_are_named(doc: object, fragment: str) -> None:
    with pytest.raises(ProfileError, match=re.escape(fragment)):
        parse_profile(doc, "p.json")


def test_missing_and_broken_profile_files(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="not found: give a file path or one of"):
        load_profile("no-such-profile")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(str(bad))
    with pytest.raises(ProfileError, match="not a `specserve bench` result"):
        profile_from_bench(_write(tmp_path, {"x": 1}), str(bad))


def _write(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_adaptive_config_both_forms() -> None:
    assert parse_adaptive_config({"1": {"candidate_steps": [1, 3]}, "32": {"candidate_steps": [0]}}, "f") == {
        1: [1, 3],
        32: [0],
    }
    assert parse_adaptive_config({"1": [3], "16": [0]}, "f") == {1: [3], 16: [0]}
    with pytest.raises(ValueError, match="at least one batch-size key"):
        parse_adaptive_config({"x": [1]}, "f")
    with pytest.raises(ValueError, match="non-empty list"):
        parse_adaptive_config({"1": []}, "f")

"""The bench's pure pieces: percentiles, windowed throughput, TPOT, level parsing, /metrics reading, prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from specserve_tools.bench.prompts import BUILTIN_PROMPTS, PromptFileError, load_prompts
from specserve_tools.bench.promtext import accept_length
from specserve_tools.bench.stats import (
    RequestRecord,
    mean_ci,
    percentile,
    relative_half_width,
    summarize,
    tpot,
    window_tokens,
)
from specserve_tools.bench.sweep import SweepPlan, parse_levels


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile(list(map(float, range(101))), 99) == pytest.approx(99.0)


def _rec(start: float, times: list[float], tokens: int | None, end: float | None, chars: int = 4) -> RequestRecord:
    return RequestRecord(
        start=start, first_token=times[0] if times else None, end=end, completion_tokens=tokens,
        chunks=[(t, chars) for t in times],
    )  # fmt: skip


def test_window_counts_only_chunks_inside_it() -> None:
    a = _rec(0.0, [1.0, 2.0, 3.0, 4.0], 4, 4.0)  # 1 token per chunk
    b = _rec(0.0, [2.5, 3.5], None, None)  # cut off: uses the level-wide ratio (1 token / 4 chars)
    assert window_tokens([a, b], 1.5, 3.5) == pytest.approx(2 + 2)


def test_window_uses_usage_to_convert_characters() -> None:
    a = _rec(0.0, [1.0, 2.0], 10, 2.0, chars=20)  # 10 tokens over 40 chars
    assert window_tokens([a], 0.0, 1.5) == pytest.approx(5)


def test_tpot_is_sglangs_definition() -> None:
    assert tpot(_rec(0.0, [1.0, 3.0], 5, 3.0)) == pytest.approx(0.5)
    assert tpot(_rec(0.0, [1.0], 1, 1.0)) is None


def test_summarize_reports_in_emulated_time() -> None:
    recs = [_rec(0.0, [0.1 * i for i in range(1, 11)], 10, 1.0) for _ in range(2)]
    stats = summarize(2, recs, 0.0, 1.0, errors=0, time_scale=10.0)
    assert stats.output_tokens_per_s == pytest.approx(20 / 1.0 / 10)
    assert stats.requests == 2 and stats.requests_per_s == pytest.approx(0.2)
    assert stats.ttft_p50_s == pytest.approx(1.0)  # 0.1 s wall x 10
    assert stats.window_s == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("", "empty"), ("1,x", "not an integer"), ("0,2", ">= 1"), ("-3", ">= 1"), ("2,2", "twice")],
)
def test_bad_levels_are_rejected(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_levels(text)


def test_levels_and_default_counts() -> None:
    assert parse_levels("1, 2,5") == [1, 2, 5]
    assert SweepPlan().counts(100) == (100, 200)
    assert SweepPlan().counts(1) == (1, 8)
    assert SweepPlan(requests=3, warmup=0).counts(50) == (0, 3)


def test_accept_length_from_metrics_text() -> None:
    text = (
        "# HELP sglang:spec_accept_length x\n# TYPE sglang:spec_accept_length gauge\n"
        'sglang:spec_accept_length{tp_rank="0"} 2.5\nsglang:spec_accept_length{tp_rank="1"} 3.5\n'
    )
    assert accept_length(text) == pytest.approx(3.0)
    assert accept_length("# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length 0\n") is None
    assert accept_length("# TYPE other gauge\nother 1\n") is None
    assert accept_length("garbage {{{") is None


def test_prompts_builtin_and_files(tmp_path: Path) -> None:
    assert load_prompts(None) == list(BUILTIN_PROMPTS) and len(BUILTIN_PROMPTS) >= 20
    lines = tmp_path / "p.txt"
    lines.write_text("first prompt\n\nsecond prompt\n")
    assert load_prompts(str(lines)) == ["first prompt", "second prompt"]
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    assert load_prompts(str(jsonl)) == ["a", "b"]
    js = tmp_path / "p.json"
    js.write_text('["x", "y"]')
    assert load_prompts(str(js)) == ["x", "y"]
    empty = tmp_path / "e.txt"
    empty.write_text("\n\n")
    with pytest.raises(PromptFileError, match="no prompts"):
        load_prompts(str(empty))
    with pytest.raises(PromptFileError, match="cannot read"):
        load_prompts(str(tmp_path / "missing.txt"))


def test_mean_ci_is_students_t() -> None:
    assert mean_ci([5.0]) is None and relative_half_width([5.0]) is None
    ci = mean_ci([9.0, 10.0, 11.0])  # sd 1, n 3: half-width t(0.975, 2) / sqrt(3) = 4.303 / 1.732
    assert ci is not None and ci[0] == pytest.approx(10.0)
    assert ci[2] - ci[0] == pytest.approx(2.484, abs=1e-3) and ci[0] - ci[1] == pytest.approx(ci[2] - ci[0])
    assert relative_half_width([10.0, 10.0, 10.0]) == 0.0


def test_summarize_splits_the_window_into_repeats() -> None:
    # one token per chunk; 10 chunks/s in (0, 1], 20 in (1, 2], 15 in (2, 3]
    times = [0.1 * i for i in range(1, 11)] + [1 + 0.05 * i for i in range(1, 21)] + [2 + i / 15 for i in range(1, 16)]
    rec = _rec(0.0, times, len(times), 3.0)
    stats = summarize(1, [rec], 0.0, 3.0, errors=0, bounds=[0.0, 1.0, 2.0, 3.0])
    assert stats.samples == pytest.approx((10.0, 20.0, 15.0)) and stats.repeats == 3
    assert stats.output_tokens_per_s == pytest.approx(15.0)
    assert stats.ci_low is not None and stats.ci_high is not None and stats.ci_low < 15.0 < stats.ci_high
    single = summarize(1, [rec], 0.0, 3.0, errors=0)
    assert single.output_tokens_per_s == pytest.approx(15.0) and single.ci_low is None and single.repeats == 1


def test_a_level_repeats_until_its_interval_is_tight_enough() -> None:
    plan = SweepPlan(repeats=3, max_repeats=5, ci_target=0.05)
    assert not plan.enough([100.0, 100.0])  # fewer than --repeats
    assert plan.enough([100.0, 101.0, 99.0])  # +-2.5%
    assert not plan.enough([100.0, 120.0, 80.0])  # +-50%: one more window
    assert plan.enough([100.0, 120.0, 80.0, 110.0, 90.0])  # --max-repeats bounds it
    assert SweepPlan(repeats=2, max_repeats=6, ci_target=None).enough([1.0, 50.0])  # no target: exactly --repeats
    with pytest.raises(ValueError, match="repeats"):
        SweepPlan(repeats=4, max_repeats=2)

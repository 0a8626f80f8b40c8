"""Trace loaders: each public format on a small sample, detection, scaling, and the bad-file messages."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from specserve.cli import main
from specserve_tools.simulate.synthetic import diurnal, diurnal_requests, oscillating, shipped_trace, step
from specserve_tools.simulate.traces import TraceError, TraceFormat, detect_format, load_trace, scale

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.2000000,879,20
"""
BURSTGPT = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,0,1087,Conversation log
118,GPT-4,417,1009,1426,Conversation log
"""
MOONCAKE = """{"timestamp": 0, "input_length": 6955, "output_length": 52, "hash_ids": [0, 1]}
{"timestamp": 2500, "input_length": 6472, "output_length": 26, "hash_ids": [2]}
"""
CLOSED = """time,concurrency
0,4
60,64
120,8
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_azure_sample(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "azure.csv", AZURE))
    assert trace.outputs == (44, 109, 20)
    assert trace.arrivals[0] == 0.0 and trace.arrivals[1] == pytest.approx(4.314579, abs=1e-5)
    assert not trace.closed_loop


def test_burstgpt_sample_skips_failed_requests(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "burst.csv", BURSTGPT))
    assert trace.outputs == (18, 1009)  # the 0-token (failed) request has nothing to serve
    assert trace.arrivals == (0.0, 113.0)


def test_mooncake_sample_in_milliseconds(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "mc.jsonl", MOONCAKE))
    assert trace.arrivals == (0.0, 2.5) and trace.outputs == (52, 26)


def test_closed_loop_sample(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path, "cl.csv", CLOSED))
    assert trace.closed_loop and trace.steps == ((0.0, 4.0), (60.0, 64.0), (120.0, 8.0))
    assert trace.duration == 180.0


@pytest.mark.parametrize(
    ("name", "text", "fmt"),
    [("a.csv", AZURE, TraceFormat.AZURE), ("b.csv", BURSTGPT, TraceFormat.BURSTGPT),
     ("m.jsonl", MOONCAKE, TraceFormat.MOONCAKE), ("c.csv", CLOSED, TraceFormat.CLOSED_LOOP)],
)  # fmt: skip
def test_detect_format(tmp_path: Path, name: str, text: str, fmt: TraceFormat) -> None:
    assert detect_format(write(tmp_path, name, text)) is fmt


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("a.csv", AZURE.replace(",109", ",lots"), "line 3: field 'GeneratedTokens': expected a number, got 'lots'"),
        ("a.csv", "TIMESTAMP,ContextTokens\n1,2\n", "line 1: field 'GeneratedTokens': missing from the header"),
        ("a.csv", AZURE.replace("18:15:51.2000000", "yesterday"), "line 4: field 'TIMESTAMP'"),
        ("b.csv", BURSTGPT.replace(",18,", ",-3,"), "line 2: field 'Response tokens': expected a number >= 0"),
        ("m.jsonl", MOONCAKE + "{oops\n", "line 3: not valid JSON"),
        ("m.jsonl", '{"timestamp": 1}\n', "line 1: field 'output_length': missing"),
        ("c.csv", "time,concurrency\n0,4\n0,5\n", "line 3: field 'time': must increase"),
        ("c.csv", "time,concurrency\n0,4\n10,2.5.1\n", "line 3: field 'concurrency'"),
    ],
)
def test_bad_files_name_file_line_and_field(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(TraceError) as info:
        load_trace(path, detect_format(path) if "header" not in expected else TraceFormat.AZURE)
    assert str(info.value).startswith(path) and expected in str(info.value)


def test_cli_bad_trace_is_one_line_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "a.csv", AZURE.replace(",109", ",lots"))
    code = main(["simulate", "--trace", path, "--jobs", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert f"{path}: line 3: field 'GeneratedTokens'" in err


def test_cli_unknown_format_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--trace", write(tmp_path, "x.csv", "a,b\n1,2\n")]) == 2
    assert "cannot tell the format" in capsys.readouterr().err
    assert main(["simulate", "--trace", str(tmp_path / "nope.csv")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_scaling_open_and_closed_loop(tmp_path: Path) -> None:
    open_trace = load_trace(write(tmp_path, "mc.jsonl", MOONCAKE))
    doubled = scale(open_trace, time_scale=2.0, rate_scale=2.0)
    assert doubled.requests == 4 and doubled.arrivals[-1] == pytest.approx(5.001)
    closed = scale(load_trace(write(tmp_path, "cl.csv", CLOSED)), time_scale=0.5, rate_scale=3.0)
    assert closed.steps[1] == (30.0, 192.0) and closed.duration == 90.0
    with pytest.raises(TraceError):
        scale(open_trace, rate_scale=0.0)


def test_shipped_traces_are_seeded_and_shaped() -> None:
    assert diurnal(1) == diurnal(1) and diurnal(1) != diurnal(2)
    day = diurnal(1)
    assert day.duration == 86400.0 and len(day.steps) == 1440
    night, afternoon = day.steps[2 * 60][1], day.steps[15 * 60][1]
    assert night < 30 and afternoon > 100
    levels = {c for _, c in step().steps}
    assert levels == {16.0, 160.0}
    osc = [c for _, c in oscillating(1).steps]
    assert min(osc) < 64 < max(osc)
    crossings = sum(1 for a, b in itertools.pairwise(osc) if (a - 64) * (b - 64) < 0)
    assert crossings >= 30
    requests = diurnal_requests(1, requests=2000)
    assert 1800 < requests.requests < 2200 and requests.duration == 86400.0
    assert shipped_trace("step") == step()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--slo-tpot", "0"], "--slo-tpot must be > 0"),
        (["--profile", "no-such-profile"], "profile 'no-such-profile' not found"),
        (["--spec", "SPEC", "--trace", "step"], "is not valid YAML"),
    ],
)
def test_cli_bad_arguments_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    spec = write(tmp_path, "spec.yaml", "spec: [unclosed\n")
    code = main(["simulate", *[spec if a == "SPEC" else a for a in argv]])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err


def test_cli_unknown_trace_lists_the_shipped_ones(capsys: pytest.CaptureFixture[str]) -> None:
    from specserve_tools.simulate.synthetic import SHIPPED  # noqa: PLC0415

    assert main(["simulate", "--trace", "diurnl"]) == 2
    err = capsys.readouterr().err
    assert "--trace diurnl: no such file, and not a shipped trace" in err
    assert all(name in err for name in SHIPPED) and err.strip().count("\n") == 0


def test_cli_progress_goes_to_stderr_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--trace", "step", "--jobs", "1", "--json", "--progress"]) == 0
    captured = capsys.readouterr()
    assert "specserve simulate: simulating" in captured.err and "trace step" in captured.err
    assert "done in" in captured.err
    assert captured.out.lstrip().startswith("{")  # stdout stays the result alone
    assert main(["simulate", "--trace", "step", "--jobs", "1", "--json"]) == 0  # not a terminal: quiet
    assert "simulating" not in capsys.readouterr().err

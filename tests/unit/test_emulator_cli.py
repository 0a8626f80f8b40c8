"""`specserve emulate` flags: SGLang's speculation flags pick the mode, bad input is one line and exit 2."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from specserve.cli import main
from specserve_tools.commands.emulate import add_arguments, build_config
from specserve_tools.emulator.engine import Mode


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "mode"),
    [
        ((), Mode.BASELINE),
        (("--speculative-algorithm", "EAGLE3"), Mode.SPECULATIVE),
        (("--speculative-algorithm", "EAGLE3", "--speculative-adaptive"), Mode.ADAPTIVE),
        (("--speculative-algorithm", "EAGLE3", "--mode", "baseline"), Mode.BASELINE),
    ],
)
def test_sglang_flags_pick_the_mode(argv: tuple[str, ...], mode: Mode) -> None:
    config, startup = build_config(_args(*argv))
    assert config.mode is mode and startup is None
    assert config.profile.name == "seed-kimi-k25-rtxpro6000"


def test_adaptive_config_file_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps({"1": {"candidate_steps": [3]}, "16": {"candidate_steps": [0]}}))
    config, startup = build_config(
        _args("--speculative-adaptive", "--speculative-adaptive-config", str(path), "--max-running-requests", "48",
              "--time-scale", "5", "--startup-seconds", "0", "--profile", "eagle3-llama31-8b-h100")
    )  # fmt: skip
    assert config.adaptive_config == {1: [3], 16: [0]}
    assert config.max_running == 48 and config.time_scale == 5 and startup == 0
    assert config.profile.name == "eagle3-llama31-8b-h100"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--profile", "missing"], "profile 'missing' not found"),
        (["--time-scale", "-1"], "--time-scale must be > 0"),
        (["--max-running-requests", "0"], "--max-running-requests must be >= 1"),
        (["--speculative-adaptive-config", "/nonexistent.json"], "cannot read the adaptive config"),
        (["--from-bench", "/nonexistent-a.json", "/nonexistent-b.json"], "cannot read"),
    ],
)
def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    assert main(["emulate", *argv]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and err.startswith("specserve emulate: ")


def test_list_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["emulate", "--list-profiles"]) == 0
    out = capsys.readouterr().out
    assert "seed-kimi-k25-rtxpro6000" in out and "eagle3-llama31-8b-h100" in out


def test_the_options_are_one_typed_source_for_the_parser_and_the_demo() -> None:
    """The flags the demo writes (to_argv) parse back to the same options, and flag_values says how many values
    each flag of the emulate parser takes."""
    from specserve_tools.emulator.options import EmulatorOptions, flag_values, to_argv  # noqa: PLC0415

    argv = to_argv(host="127.0.0.1", port=4321, profile="p", startup_seconds=3.0, time_scale=0.5)
    assert argv[:4] == ["--host", "127.0.0.1", "--port", "4321"] and argv[-2:] == ["--time-scale", "0.5"]
    options = EmulatorOptions.from_namespace(_args(*argv, "--speculative-adaptive", "--from-bench", "a", "b"))
    assert (options.port, options.profile, options.startup_seconds, options.time_scale) == (4321, "p", 3.0, 0.5)
    assert options.speculative_adaptive and options.from_bench == ("a", "b")
    assert EmulatorOptions.from_namespace(_args()) == EmulatorOptions()
    values = flag_values()
    assert values["--speculative-adaptive"] == 0 and values["--from-bench"] == 2 and values["--port"] == 1
    with pytest.raises(TypeError, match="not an emulator option"):
        to_argv(tp_size=8)

"""The `specserve` command line: render and crd, including every way a file can be wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import specserve.commands.crd as crd_command
from specserve.cli import main
from tests.conftest import ROOT


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_render_prints_multidoc_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "render", str(ROOT / "examples" / "kimi-k25-rtxpro6000.yaml"))
    assert code == 0, err
    kinds = [d["kind"] for d in yaml.safe_load_all(out)]
    assert kinds.count("Deployment") == 2 and "HTTPRoute" in kinds


def test_render_mode_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "render", "--mode", "Speculative", str(ROOT / "examples" / "kimi-k25-rtxpro6000.yaml"))
    route = next(d for d in yaml.safe_load_all(out) if d["kind"] == "HTTPRoute")
    assert code == 0 and route["spec"]["rules"][0]["backendRefs"][0]["weight"] == 100


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("spec: [unclosed", "not valid YAML"),
        ("", "holds no documents"),
        (
            "apiVersion: specserve.io/v1alpha1\nkind: SpecServe\nmetadata: {name: a}\nspec:\n  model: {path: x}\n"
            "  strategy: Restart\n  speculative: {eagleTopk: 4, numDraftTokens: 8}\n"
            "  engine: {tensorParallelSize: 3}\n",
            "spec.speculative.draftModelPath: is required",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {model: {path: x}, strategy: Restart, "
            "speculative: {algorithm: NGRAM}}\n",
            "apiVersion",
        ),
    ],
)
def test_render_bad_files_exit_nonzero_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content, encoding="utf-8")
    code, out, err = run(capsys, "render", str(path))
    assert code != 0
    assert out == ""
    assert expected in err
    assert "Traceback" not in err


def test_render_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "render", str(tmp_path / "nope.yaml"))
    assert code == 2 and "cannot read" in err


def test_render_reports_each_bad_document(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = (
        "apiVersion: specserve.io/v1alpha1\nkind: SpecServe\nmetadata: {name: a}\n"
        "spec: {model: {path: x}, strategy: X}\n"
    )
    path = tmp_path / "two.yaml"
    path.write_text(doc + "---\n" + doc, encoding="utf-8")
    code, _, err = run(capsys, "render", str(path))
    assert code == 1 and "document 1" in err and "document 2" in err


def test_crd_command_matches_committed_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "crd")
    assert code == 0
    assert out == (ROOT / "crds" / "specserve.io_specserves.yaml").read_text(encoding="utf-8")


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "frobnicate")
    assert code == 2 and "invalid choice" in err


def test_unexpected_errors_are_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(_: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(crd_command, "run", explode)
    code, _, err = run(capsys, "crd")
    assert code == 1
    assert err.strip() == "specserve crd: unexpected error: RuntimeError: boom (please report it)"


# The tools (specserve-tools) join the CLI through the `specserve.commands` entry points.


def test_the_tools_commands_come_from_the_entry_points() -> None:
    from specserve.cli import TOOL_COMMANDS, Subcommand, plugin_commands  # noqa: PLC0415

    found = plugin_commands()
    assert set(TOOL_COMMANDS) <= set(found)
    for name in TOOL_COMMANDS:
        command = found[name]
        assert isinstance(command, Subcommand) and command.module == f"specserve_tools.commands.{name}"


@pytest.mark.parametrize("command", ["demo", "emulate", "bench", "calibrate", "simulate"])
def test_without_the_tools_a_tool_command_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setattr("specserve.cli.entry_points", lambda **_: [])
    code, out, err = run(capsys, command, "--help")
    assert code == 2 and out == ""
    assert f"specserve {command}: not installed: pip install specserve-tools (or ./tools)" in err
    assert "Traceback" not in err


def test_without_the_tools_the_operator_commands_still_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("specserve.cli.entry_points", lambda **_: [])
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "not installed: pip install specserve-tools" in out
    code, out, err = run(capsys, "render", str(ROOT / "examples" / "kimi-k25-rtxpro6000.yaml"))
    assert code == 0, err


def test_a_broken_plugin_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint  # noqa: PLC0415

    broken = EntryPoint("demo", "specserve_tools.no_such_module:DEMO", "specserve.commands")
    monkeypatch.setattr("specserve.cli.entry_points", lambda **_: [broken])
    code, _, err = run(capsys, "demo")
    assert code == 2 and "specserve demo: cannot load specserve_tools.no_such_module:DEMO" in err
    assert "Traceback" not in err


def test_the_tools_run_without_their_entry_points_too(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m specserve_tools COMMAND` (a checkout on PYTHONPATH, no installed metadata) runs the same
    commands the entry points register."""
    from specserve.cli import plugin_commands  # noqa: PLC0415
    from specserve_tools.__main__ import main as tools_main  # noqa: PLC0415
    from specserve_tools.commands import COMMANDS as TOOLS  # noqa: PLC0415

    assert {name: plugin_commands()[name] for name in TOOLS} == TOOLS
    with pytest.raises(SystemExit) as exc:
        tools_main(["emulate", "--help"])
    assert exc.value.code == 0 and "usage: specserve emulate" in capsys.readouterr().out
    assert tools_main(["nope"]) == 2 and "usage: python -m specserve_tools" in capsys.readouterr().err

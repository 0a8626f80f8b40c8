"""Every subcommand without the bench extra (matplotlib, rich, ruamel.yaml): it works, or it says how to install
the extra; never a traceback. The extra's absence is simulated by blocking its imports."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from specserve.cli import commands, main
from specserve_tools.commands import BENCH_EXTRA, BENCH_HINT

EXTRA_MODULES = (
    "matplotlib",
    "matplotlib.pyplot",
    "rich",
    "rich.console",
    "rich.progress",
    "rich.table",
    "ruamel",
    "ruamel.yaml",
)


@pytest.fixture
def without_bench_extra(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    before = set(sys.modules)
    for name in list(sys.modules):
        top = name.split(".")[0]
        if top in BENCH_EXTRA.packages or name.startswith(("specserve_tools.commands.", "specserve_tools.bench.")):
            monkeypatch.delitem(sys.modules, name)
    for name in EXTRA_MODULES:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` now raises ModuleNotFoundError
    yield
    # Modules first imported under the block would hold the blocked state: later tests import them afresh.
    for name in set(sys.modules) - before:
        del sys.modules[name]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # --help
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.usefixtures("without_bench_extra")
@pytest.mark.parametrize("command", list(commands()))
def test_every_subcommand_helps_or_says_how_to_install_the_extra(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = run(capsys, command, "--help")
    assert "Traceback" not in text
    if code != 0:
        assert code == 2 and BENCH_HINT in text and f"specserve {command}: needs the bench extra" in text
    else:
        assert f"usage: specserve {command}" in text


@pytest.mark.usefixtures("without_bench_extra")
def test_bench_without_the_extra_names_the_missing_package(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run(capsys, "bench", "--url", "http://127.0.0.1:1")
    assert code == 2
    assert "rich is not installed" in text and "pip install 'specserve-tools[bench]'" in text


@pytest.mark.usefixtures("without_bench_extra")
def test_render_does_not_need_the_extra(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run(capsys, "render", str(Path(__file__).parents[2] / "examples" / "kimi-k25-rtxpro6000.yaml"))
    assert code == 0, text


def test_a_lazily_imported_extra_is_reported_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """rich present but matplotlib missing: `bench --plot` fails at plot time, with the same hint."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = tmp_path / "a.json"
    result.write_text(json.dumps({}), encoding="utf-8")
    from specserve_tools.commands import bench  # noqa: PLC0415

    def plot(*_args: object, **_kwargs: object) -> None:
        import matplotlib  # noqa: F401, PLC0415

    monkeypatch.setattr(bench, "plot_curves", plot)
    monkeypatch.setattr(bench, "load_result", lambda _path: type("R", (), {"label": "x", "curve": lambda self: None})())
    code, text = run(capsys, "bench", "--plot", str(result))
    assert "Traceback" not in text
    assert code == 2 and "matplotlib is not installed" in text and BENCH_HINT in text

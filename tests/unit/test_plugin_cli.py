"""The plugin's command line: kubectl's flags, usage errors worded for users, the same commands under specserve."""

from __future__ import annotations

from pathlib import Path

import pytest

from specserve import cli
from specserve.plugin import main
from specserve.plugin.kube import Cluster


def test_without_a_command_it_prints_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main.main([])
    assert exc.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_what_if_needs_a_sensible_demand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main.main(["what-if", "m", "--demand", "-3"])
    assert "--demand must be >= 0" in capsys.readouterr().err


def test_a_missing_kubeconfig_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code = main.main(["status", "--kubeconfig", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert code == 1 and "cannot load the kubeconfig" in err and "Traceback" not in err


def test_the_plugin_commands_are_specserve_subcommands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in main.COMMANDS:
        assert cli.COMMANDS[name].module == main.COMMANDS[name][0]
    code = cli.main(["history", "m", "--kubeconfig", str(tmp_path / "nope")])
    assert code == 1 and "cannot load the kubeconfig" in capsys.readouterr().err


def test_the_context_namespace_is_the_default(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: a, context: {cluster: c, user: u, namespace: team-a}},"
        " {name: b, context: {cluster: c, user: u}}]\n"
    )
    assert Cluster(str(config)).default_namespace == "team-a"
    assert Cluster(str(config), context="b").default_namespace == "default"

"""The plugin's command line: kubectl's flags, usage errors worded for users, the same commands under specserve."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from specserve import __version__, cli
from specserve.plugin import main
from specserve.plugin.kube import DEFAULT_TIMEOUT, Cluster


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


def test_global_flags_may_come_before_the_command() -> None:
    assert main.command_first(["-n", "llm", "status"]) == ["status", "-n", "llm"]
    assert main.command_first(["--context=c", "-A", "status", "-o", "json"]) == ["status", "--context=c", "-A", "-o",
                                                                                  "json"]  # fmt: skip
    assert main.command_first(["-nllm", "--as", "alice", "explain", "m"]) == ["explain", "-nllm", "--as", "alice", "m"]
    assert main.command_first(["--bogus", "status"]) == ["--bogus", "status"]  # left for the usage error


def test_request_timeout_reads_kubectl_durations() -> None:
    from specserve.plugin.common import request_timeout  # noqa: PLC0415

    assert [request_timeout(t) for t in ("30s", "1m", "500ms", "5", "0")] == [30.0, 60.0, 0.5, 5.0, 0.0]
    with pytest.raises(argparse.ArgumentTypeError, match="duration such as 30s"):
        request_timeout("soon")


def test_version_and_completion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["version"]) == 0
    assert capsys.readouterr().out.startswith(f"kubectl-specserve {__version__}")
    assert main.main(["completion", "bash"]) == 0
    assert "complete -F _kubectl_specserve kubectl-specserve" in capsys.readouterr().out
    assert main.complete_main(["-n", "llm", "st"]) == 0
    assert capsys.readouterr().out.splitlines() == ["status", ":4"]
    main.complete_main(["status", "--req"])
    assert capsys.readouterr().out.splitlines() == ["--request-timeout", ":4"]
    main.complete_main(["explain", "m", "-o", ""])
    assert capsys.readouterr().out.splitlines() == ["text", "json", "yaml", ":4"]


def test_impersonation_is_sent_as_kubectl_sends_it(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
    )
    kube = Cluster(str(config), impersonate="alice", impersonate_groups=("ops",))
    headers = kube.api.api_client.default_headers
    assert headers["Impersonate-User"] == "alice" and headers["Impersonate-Group"] == "ops"
    assert kube.timeout == DEFAULT_TIMEOUT > 0  # a silent server cannot hang a command for ever


def test_as_group_needs_as(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["status", "--as-group", "ops"]) == 1
    err = capsys.readouterr().err
    assert "--as-group needs --as" in err and "Traceback" not in err
    assert main.main(["status", "--as", "alice", "--as-group", "a", "--as-group", "b"]) == 1
    assert "one --as-group at a time" in capsys.readouterr().err

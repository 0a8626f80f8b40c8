"""The chart's host path allowlist reaches `specserve run` as the flags the operator reads, and nothing else."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from specserve.commands.run import add_arguments, config_from
from tests.chart.chartlib import CHART, helm_template, run, tool


def operator_args(values: dict[str, str] | None = None) -> list[str]:
    (deployment,) = [o for o in helm_template(values) if o["kind"] == "Deployment"]
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_no_host_paths_by_default() -> None:
    assert not [a for a in operator_args() if a.startswith("--allow-host-path")]


def test_prefixes_and_write_become_flags_the_operator_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "specserve-system")  # the chart's downward API, for its other flags
    args = operator_args(
        {"modelCache.hostPathPrefixes": "{/mnt/models,/data/hf}", "modelCache.hostPathWritable": "true"}
    )
    assert [a for a in args if a.startswith("--allow-host-path")] == [
        "--allow-host-path=/mnt/models",
        "--allow-host-path=/data/hf",
        "--allow-host-path-write",
    ]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = config_from(parser.parse_args(args[1:]))  # args[0] is the `run` subcommand
    assert config.install_policy.host_path_prefixes == ("/mnt/models", "/data/hf")
    assert config.install_policy.host_path_writable is True


@pytest.mark.parametrize("prefix", ["relative/dir", "/a,b"])
def test_schema_refuses_prefixes_that_are_not_absolute_directories(prefix: Any) -> None:
    proc = run(
        [tool("helm"), "template", "ops", str(CHART), "--set-json", f'modelCache.hostPathPrefixes=["{prefix}"]'],
        check=False,
    )
    assert proc.returncode != 0 and "hostPathPrefixes" in proc.stderr

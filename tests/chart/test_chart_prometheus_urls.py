"""The chart's Prometheus allow-list reaches `specserve run` as the flags the operator reads."""

from __future__ import annotations

import argparse

import pytest

from specserve.commands.run import add_arguments, config_from
from tests.chart.chartlib import CHART, run, tool
from tests.chart.test_chart_host_paths import operator_args


def test_only_the_operator_s_prometheus_by_default() -> None:
    assert not [a for a in operator_args() if a.startswith("--allow-prometheus-url")]


def test_allowed_urls_become_flags_the_operator_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "specserve-system")  # the chart's downward API, for its other flags
    args = operator_args(
        {"allowedPrometheusUrls": "{http://thanos.monitoring:10902/tenant-a,https://prom.example.com}"}
    )
    assert [a for a in args if a.startswith("--allow-prometheus-url")] == [
        "--allow-prometheus-url=http://thanos.monitoring:10902/tenant-a",
        "--allow-prometheus-url=https://prom.example.com",
    ]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = config_from(parser.parse_args(args[1:]))  # args[0] is the `run` subcommand
    assert config.installation.prometheus_urls == (
        "http://thanos.monitoring:10902/tenant-a",
        "https://prom.example.com",
        "http://prometheus-operated.monitoring.svc:9090",  # the operator's own, always
    )


@pytest.mark.parametrize("url", ["http://user:pass@prom:9090", "prom:9090", "http://prom:9090/?x=1"])
def test_schema_refuses_urls_with_credentials_or_no_scheme(url: str) -> None:
    proc = run(
        [tool("helm"), "template", "ops", str(CHART), "--set-json", f'allowedPrometheusUrls=["{url}"]'],
        check=False,
    )
    assert proc.returncode != 0 and "allowedPrometheusUrls" in proc.stderr

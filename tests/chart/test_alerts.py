"""The alerts: promtool checks the rules and runs their unit tests (each alert fires on a constructed series and
stays quiet on a healthy one), each alert has a runbook, and the chart renders them as a PrometheusRule only
when asked and when the cluster serves the kind."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.chart.chartlib import CHART, REPO, helm_template, run, set_args, tool

RULES = CHART / "rules" / "specserve-alerts.yaml"
RULE_TESTS = REPO / "tests" / "rules" / "specserve-alerts.test.yaml"
RUNBOOKS = REPO / "docs" / "runbooks"
RUNBOOK_PREFIX = "https://github.com/specserve/specserve/blob/main/docs/runbooks/"
PROMETHEUS_RULE = "monitoring.coreos.com/v1/PrometheusRule"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed (Debian's prometheus package ships it; scripts/test.sh installs it)")
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, check=False)


def _alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_check_rules_accepts_the_rules() -> None:
    proc = _promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_rule_tests_pass() -> None:
    proc = _promtool("test", "rules", str(RULE_TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_every_alert_is_tested_firing_and_quiet() -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert names - fires == set(), "alerts never shown firing"
    assert names - quiet == set(), "alerts never shown quiet on a healthy series"


def test_every_alert_has_a_runbook_and_a_severity() -> None:
    for alert in _alerts():
        url = alert["annotations"]["runbook_url"]
        assert url == RUNBOOK_PREFIX + alert["alert"] + ".md"
        runbook = RUNBOOKS / (alert["alert"] + ".md")
        assert runbook.is_file(), f"{runbook} is missing"
        assert alert["alert"] in runbook.read_text().splitlines()[0]
        assert alert["labels"]["severity"] in ("critical", "warning")


def run_helm_template(values: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run([tool("helm"), "template", "ops", str(CHART), "--namespace", "specserve-system", *set_args(values)],
               check=False)  # fmt: skip


def run_helm(args: list[str]) -> str:
    return run([tool("helm"), *args]).stdout


def _rule(objs: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((o for o in objs if o["kind"] == "PrometheusRule"), None)


def test_the_chart_renders_the_rules_for_its_metrics_service_and_runbook_base() -> None:
    values = {"alerts.enabled": "true", "alerts.runbookBaseUrl": "https://wiki.example/runbooks/"}
    obj = _rule(helm_template(values, api_versions=[PROMETHEUS_RULE], release="ops"))
    assert obj is not None
    rendered = {r["alert"]: r for g in obj["spec"]["groups"] for r in g["rules"]}
    assert set(rendered) == {a["alert"] for a in _alerts()}
    down = rendered["SpecServeOperatorDown"]
    assert down["expr"] == 'absent(up{job="ops-specserve-metrics"} == 1)'  # the ServiceMonitor's job: the Service
    assert down["annotations"]["runbook_url"] == "https://wiki.example/runbooks/SpecServeOperatorDown.md"
    metrics_service = next(
        o
        for o in helm_template(values, release="ops")
        if o["kind"] == "Service" and o["metadata"]["name"].endswith("-metrics")
    )
    assert metrics_service["metadata"]["name"] == "ops-specserve-metrics"


def test_alerts_are_optional_and_need_the_kind() -> None:
    assert _rule(helm_template({}, api_versions=[PROMETHEUS_RULE])) is None
    assert _rule(helm_template({"alerts.enabled": "true"})) is None  # no Prometheus Operator: nothing to apply


def test_an_alert_can_be_left_out() -> None:
    values = {"alerts.enabled": "true", "alerts.disabled[0]": "SpecServeSwitchingFlapping"}
    obj = _rule(helm_template(values, api_versions=[PROMETHEUS_RULE]))
    assert obj is not None
    names = {r["alert"] for g in obj["spec"]["groups"] for r in g["rules"]}
    assert "SpecServeSwitchingFlapping" not in names and "SpecServeOperatorDown" in names


def test_the_dashboard_configmap_carries_the_committed_dashboard_with_the_sidecar_label() -> None:
    objs = helm_template({"dashboards.enabled": "true"})
    cm = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboards"))
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    committed = (CHART / "dashboards" / "specserve.json").read_text()
    assert cm["data"]["specserve.json"].strip() == committed.strip()
    assert not any(
        o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboards") for o in helm_template({})
    )


def test_the_servicemonitor_keeps_the_specserve_labels() -> None:
    objs = helm_template(
        {"metrics.serviceMonitor.enabled": "true"}, api_versions=["monitoring.coreos.com/v1/ServiceMonitor"]
    )
    monitor = next(o for o in objs if o["kind"] == "ServiceMonitor")
    assert all(e.get("honorLabels") is True for e in monitor["spec"]["endpoints"])


def test_runbooks_exist_only_for_alerts() -> None:
    names = {a["alert"] for a in _alerts()}
    assert {p.stem for p in RUNBOOKS.glob("SpecServe*.md")} == names


def test_the_values_schema_knows_every_alert_name() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    enum = schema["properties"]["alerts"]["properties"]["disabled"]["items"]["enum"]
    assert sorted(enum) == sorted(a["alert"] for a in _alerts())


SERVICE_MONITOR = "monitoring.coreos.com/v1/ServiceMonitor"


def test_alerts_imply_the_servicemonitor_they_read() -> None:
    """SpecServeOperatorDown is an absent() over the ServiceMonitor's job: alerts without it page for ever."""
    objs = helm_template({"alerts.enabled": "true"}, api_versions=[PROMETHEUS_RULE, SERVICE_MONITOR])
    monitor = next(o for o in objs if o["kind"] == "ServiceMonitor")
    rule = _rule(objs)
    assert rule is not None
    down = next(r for g in rule["spec"]["groups"] for r in g["rules"] if r["alert"] == "SpecServeOperatorDown")
    assert down["expr"] == 'absent(up{job="ops-specserve-metrics"} == 1)'
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "metrics"
    assert not any(o["kind"] == "ServiceMonitor" for o in helm_template({}, api_versions=[SERVICE_MONITOR]))


def test_the_implied_servicemonitor_carries_the_labels_the_alerts_prometheus_selects() -> None:
    values = {"alerts.enabled": "true", "alerts.labels.release": "kps", "metrics.serviceMonitor.labels.team": "ml"}
    objs = helm_template(values, api_versions=[PROMETHEUS_RULE, SERVICE_MONITOR])
    monitor = next(o for o in objs if o["kind"] == "ServiceMonitor")
    rule = _rule(objs)
    assert rule is not None and rule["metadata"]["labels"]["release"] == "kps"
    assert monitor["metadata"]["labels"]["release"] == "kps" and monitor["metadata"]["labels"]["team"] == "ml"
    # The ServiceMonitor's own value wins where both name a label.
    objs = helm_template({**values, "metrics.serviceMonitor.labels.release": "other"}, api_versions=[SERVICE_MONITOR])
    monitor = next(o for o in objs if o["kind"] == "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "other"


def test_alerts_without_the_metrics_service_are_refused() -> None:
    proc = run_helm_template({"alerts.enabled": "true", "metrics.service.enabled": "false"})
    assert proc.returncode != 0
    assert "alerts.enabled need metrics.service.enabled" in proc.stderr


def test_operator_down_does_not_page_critical() -> None:
    """The pools keep serving while the operator is down; an engine that stops serving pages on its own."""
    alerts = {a["alert"]: a for a in _alerts()}
    assert alerts["SpecServeOperatorDown"]["labels"]["severity"] == "warning"
    engine = alerts["SpecServeNoHealthyEngine"]
    # What fires reads the engines' own series (the operator's only silence it):
    assert engine["labels"]["severity"] == "critical" and "(up{" in engine["expr"].split("unless")[0]


def test_condition_alerts_aggregate_the_reason_away() -> None:
    for name in ("SpecServeNotReady", "SpecServeMetricsUnavailable", "SpecServeDegraded"):
        expr = next(a for a in _alerts() if a["alert"] == name)["expr"]
        assert expr.lstrip("( ").startswith("max by (namespace, name) (specserve_condition{"), name


def test_notes_warn_when_alerts_are_asked_for_without_the_prometheusrule_api() -> None:
    out = run_helm(["install", "ops", str(CHART), "--namespace", "specserve-system", "--dry-run=client",
                    "--set", "alerts.enabled=true"])  # fmt: skip
    notes = out.split("NOTES:", 1)[1]
    assert "NO ALERTS" in notes and "PrometheusRule" in notes
    quiet = run_helm(["install", "ops", str(CHART), "--namespace", "specserve-system", "--dry-run=client"])
    assert "NO ALERTS" not in quiet

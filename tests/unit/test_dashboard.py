"""The Grafana dashboard is generated from code: the chart's committed JSON must be what the code renders."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from specserve.cli import main
from specserve.observability import dashboard, grafana

COMMITTED = Path(__file__).resolve().parents[2] / "charts" / "specserve" / "dashboards" / "specserve.json"


def test_the_committed_dashboard_is_what_the_code_renders() -> None:
    assert COMMITTED.read_text() == grafana.render(), (
        "charts/specserve/dashboards/specserve.json drifted: run "
        "`specserve dashboard -o charts/specserve/dashboards/specserve.json`"
    )


def test_the_command_writes_the_dashboard(tmp_path: Path) -> None:
    out = tmp_path / "d.json"
    assert main(["dashboard", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["uid"] == dashboard.UID


def test_the_dashboard_has_the_variables_rows_and_decision_annotations() -> None:
    data = grafana.build()
    assert [v["name"] for v in data["templating"]["list"]] == ["datasource", "namespace", "name"]
    rows = [p["title"] for p in data["panels"] if p["type"] == "row"]
    assert rows == [row.title for row in dashboard.ROWS]
    (decisions,) = [a for a in data["annotations"]["list"] if a.get("name") == "Decisions"]
    assert "specserve_decisions_total" in decisions["expr"] and "{{action}}" in decisions["titleFormat"]
    exprs = [t["expr"] for p in data["panels"] for t in p.get("targets", [])]
    assert len(exprs) == len(dashboard.all_queries()) - 1  # every listed query is on a panel (the last: annotation)


def test_substitution_leaves_no_grafana_variable() -> None:
    for _row, _panel, target in dashboard.all_queries():
        assert "$" not in dashboard.substitute(target.expr, dashboard.Substitution(namespace="ns", name="m"))


def _panel(title: str) -> dashboard.PanelSpec:
    return next(p for row in dashboard.ROWS for p in row.panels if p.title == title)


def test_the_per_specserve_row_repeats_for_each_name_and_the_name_does_not_open_on_all() -> None:
    data = grafana.build()
    rows = {p["title"]: p for p in data["panels"] if p["type"] == "row"}
    assert rows[dashboard.SPECSERVE.title].get("repeat") == "name"
    assert "repeat" not in rows[dashboard.OVERVIEW.title]
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert variables["name"]["includeAll"] is False and variables["name"]["multi"] is True
    assert variables["namespace"]["includeAll"] is True


def test_no_query_sums_one_specserve_with_another() -> None:
    """100 and 5000 tok/s must stay two lines: every aggregation keeps the SpecServe's labels (operator row aside:
    the operator's own latency and queries are not per SpecServe)."""
    for row, _panel, target in dashboard.all_queries():
        if row == dashboard.OPERATOR.title:
            continue
        for by in re.findall(r"(?:sum|avg|max|min|count) by \(([^)]*)\)", target.expr):
            labels = {label.strip() for label in by.split(",")}
            assert "namespace" in labels and labels & {"name", "specserve_instance"}, target.expr
        assert not re.search(r"(?:sum|avg|max|min|count) \(", target.expr), target.expr  # no aggregation without by


def test_the_conditions_table_is_one_instant_table_query() -> None:
    data = grafana.build()
    (panel,) = [p for p in data["panels"] if p.get("title") == "Conditions"]
    assert panel["type"] == "table"
    (target,) = panel["targets"]
    assert target["format"] == "table" and target["instant"] is True and not target.get("range")


def test_variables_read_series_that_go_away_with_their_specserve() -> None:
    """label_values lists every SpecServe seen in the time range; an instant query only those there now."""
    data = grafana.build()
    for variable in (v for v in data["templating"]["list"] if v["name"] in ("namespace", "name")):
        query = variable["query"] if isinstance(variable["query"], str) else variable["query"]["query"]
        assert query.startswith("query_result(") and "specserve_condition" in query
        assert variable["regex"] == f'/{variable["name"]}="([^"]+)"/'


def test_the_dashboard_targets_the_pinned_grafana_sdk_build() -> None:
    """pyproject pins the SDK build of the Grafana version targeted (11.6: schema 41), not any build of any
    version (the >= pin admitted only 10.1 builds, schema 36, because epochs sort first)."""
    pyproject = tomllib.loads((COMMITTED.parents[3] / "pyproject.toml").read_text())
    (pin,) = pyproject["project"]["optional-dependencies"]["dashboard"]
    assert pin == f"grafana-foundation-sdk=={dashboard.GRAFANA_SDK_BUILD}"
    assert grafana.build()["schemaVersion"] == dashboard.GRAFANA_SCHEMA_VERSION


# SGLang 0.5.9 as its collector exports it: no per-request TPOT histogram and no spec_num_steps, but
# inter_token_latency_seconds, spec_accept_length and spec_accept_rate (tests/conformance NOT_IN_RELEASE).
POD = 'namespace="llm", specserve_instance="m", specserve_pool="speculative", pod="p1"'
RELEASE_0_5_9 = [
    {"series": f'sglang:inter_token_latency_seconds_bucket{{{POD}, le="0.02"}}', "values": "0+10x10"},
    {"series": f'sglang:inter_token_latency_seconds_bucket{{{POD}, le="0.05"}}', "values": "0+20x10"},
    {"series": f'sglang:inter_token_latency_seconds_bucket{{{POD}, le="+Inf"}}', "values": "0+20x10"},
    {"series": f"sglang:spec_accept_length{{{POD}}}", "values": "3x10"},
    {"series": f"sglang:spec_accept_rate{{{POD}}}", "values": "0.5x10"},
]


def _promtool_test(tmp_path: Path, rules: list[dict[str, str]], test: dict[str, object]) -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is not installed (Debian's prometheus package ships it; scripts/test.sh installs it)")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [{"interval": "1m", **test}]}
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(tests))
    proc = subprocess.run([promtool, "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    return proc.stdout + proc.stderr if proc.returncode else ""


@pytest.mark.parametrize("title", ["Time per output token", "Active draft steps"])
def test_tpot_and_draft_step_panels_have_series_on_0_5_9(tmp_path: Path, title: str) -> None:
    values = dashboard.Substitution(namespace="llm", name="m", rate_interval="5m")
    targets = _panel(title).targets
    rules = [{"alert": f"Panel{i}", "expr": f"count({dashboard.substitute(t.expr, values)}) > 0"}
             for i, t in enumerate(targets)]  # fmt: skip
    checks = [{"eval_time": "10m", "alertname": f"Panel{i}", "exp_alerts": [{"exp_labels": {}}]}
              for i in range(len(targets))]  # fmt: skip
    failed = _promtool_test(tmp_path, rules, {"input_series": RELEASE_0_5_9, "alert_rule_test": checks})
    assert failed == "", f"{title} is empty on 0.5.9:\n{failed}"


def test_draft_steps_on_0_5_9_are_the_draft_tokens_per_verify_less_one(tmp_path: Path) -> None:
    (target,) = _panel("Active draft steps").targets
    expr = dashboard.substitute(target.expr, dashboard.Substitution(namespace="llm", name="m"))
    exp = [{"labels": '{namespace="llm", specserve_instance="m", specserve_pool="speculative"}', "value": 5}]
    test = {"input_series": RELEASE_0_5_9, "promql_expr_test": [{"expr": expr, "eval_time": "5m", "exp_samples": exp}]}
    assert _promtool_test(tmp_path, [], test) == ""

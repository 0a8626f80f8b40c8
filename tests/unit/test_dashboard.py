"""The Grafana dashboard is generated from code: the chart's committed JSON must be what the code renders."""

from __future__ import annotations

import json
from pathlib import Path

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

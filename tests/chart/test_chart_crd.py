"""The chart's CRD template is generated from the API models (`specserve crd --helm`), like crds/."""

from __future__ import annotations

import subprocess
import sys

from specserve.api.crd import crd
from specserve.commands.crd import HELM_CRD_PATH, render_helm_crd_yaml
from tests.chart.chartlib import CHART, REPO, helm_template

TEMPLATE = REPO / HELM_CRD_PATH


def test_chart_crd_template_has_not_drifted() -> None:
    assert TEMPLATE.is_relative_to(CHART / "templates")
    assert TEMPLATE.read_text(encoding="utf-8") == render_helm_crd_yaml(), (
        f"{HELM_CRD_PATH} is stale: regenerate it with `specserve crd --helm -o {HELM_CRD_PATH}`"
    )


def test_rendered_crd_equals_the_generated_crd() -> None:
    (rendered,) = [o for o in helm_template() if o["kind"] == "CustomResourceDefinition"]
    generated = crd()
    assert rendered["spec"] == generated["spec"]
    assert rendered["metadata"]["name"] == generated["metadata"]["name"]
    assert rendered["apiVersion"] == generated["apiVersion"]


def test_crd_kept_by_default_and_optional() -> None:
    (kept,) = [o for o in helm_template() if o["kind"] == "CustomResourceDefinition"]
    assert kept["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    (not_kept,) = [o for o in helm_template({"crds.keep": "false"}) if o["kind"] == "CustomResourceDefinition"]
    assert "annotations" not in not_kept["metadata"]
    assert not [o for o in helm_template({"crds.enabled": "false"}) if o["kind"] == "CustomResourceDefinition"]


def test_cli_writes_the_helm_template(tmp_path: object) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "specserve.cli", "crd", "--helm"], capture_output=True, text=True, check=True
    ).stdout
    assert out == render_helm_crd_yaml()
    plain = subprocess.run(
        [sys.executable, "-m", "specserve.cli", "crd"], capture_output=True, text=True, check=True
    ).stdout
    assert "{{" not in plain and plain != out

"""The release pipeline, checked as far as a machine without Docker or registry credentials can: actionlint
accepts the workflows, the chart packages with the tag's versions and runbook links (the script the workflow
runs), the wheel carries the kubectl plugin's command, and the krew manifest names the archives the workflow
builds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.chartlib import REPO, parse_docs, run, tool

WORKFLOWS = REPO / ".github" / "workflows"
RELEASE = WORKFLOWS / "release.yaml"
KREW = REPO / ".github" / "krew" / "specserve.yaml"
PACKAGE_CHART = REPO / ".github" / "scripts" / "package-chart.sh"
ACTIONLINT = "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"
PROMETHEUS_RULE = "monitoring.coreos.com/v1/PrometheusRule"


def actionlint() -> str:
    """actionlint from PATH or .tools/bin, else `go install`ed there from the Go module proxy."""
    found = shutil.which("actionlint") or next(
        (str(p) for p in (REPO / ".tools" / "bin" / "actionlint",) if p.exists()), None
    )
    if found:
        return found
    go = shutil.which("go")
    if go is None:
        pytest.fail(f"actionlint is not installed and there is no Go toolchain to `go install {ACTIONLINT}`")
    env = {**os.environ, "GOBIN": str(REPO / ".tools" / "bin")}
    subprocess.run([go, "install", ACTIONLINT], check=True, env=env, timeout=600)
    return str(REPO / ".tools" / "bin" / "actionlint")


def workflow() -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(RELEASE.read_text())
    return loaded


def test_actionlint_accepts_the_workflows() -> None:
    files = sorted(str(p) for p in WORKFLOWS.glob("*.y*ml"))
    assert files
    proc = subprocess.run([actionlint(), "-no-color", *files], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ github.nope }}\n"
    )
    proc = subprocess.run(
        [actionlint(), "-no-color", str(bad)], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode != 0


def test_a_tag_publishes_images_for_both_architectures_the_chart_the_wheel_and_the_plugin() -> None:
    jobs = workflow()["jobs"]
    assert workflow()[True]["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+*"]  # YAML 1.1 reads `on` as True
    build = next(s for s in jobs["image"]["steps"] if s.get("uses", "").startswith("docker/build-push-action"))
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["file"] == "images/operator/Dockerfile" and build["with"]["push"] is True
    # The chart's default image is the operator image at appVersion (= the tag): the same repository.
    values = yaml.safe_load((REPO / "charts" / "specserve" / "values.yaml").read_text())
    assert workflow()["env"]["OPERATOR_IMAGE"] == values["image"]["repository"]
    chart_steps = " ".join(s.get("run", "") for s in jobs["chart"]["steps"])
    assert ".github/scripts/package-chart.sh" in chart_steps and "oci://ghcr.io/specserve/charts" in chart_steps
    assert any(s.get("uses", "").startswith("pypa/gh-action-pypi-publish") for s in jobs["python"]["steps"])
    assert jobs["python"]["permissions"]["id-token"] == "write"  # trusted publishing, no stored token
    platforms = {(m["os"], m["arch"]) for m in jobs["plugin"]["strategy"]["matrix"]["include"]}
    assert platforms == {("linux", "amd64"), ("linux", "arm64"), ("darwin", "amd64"), ("darwin", "arm64")}


def test_the_krew_manifest_offers_the_archives_the_workflow_builds() -> None:
    text = KREW.read_text()
    build = " ".join(s.get("run", "") for s in workflow()["jobs"]["plugin"]["steps"])
    assert 'archive="kubectl-specserve_${{ matrix.os }}_${{ matrix.arch }}.tar.gz"' in build
    # What krew-release-bot renders: the tag, and each uri with its sha256.
    rendered = re.sub(
        r'\{\{ addURIAndSha "([^"]+)" \.TagName \}\}',
        lambda m: f"uri: {m.group(1)}\n      sha256: {'0' * 64}",
        text,
    ).replace("{{ .TagName }}", "v0.2.0")
    plugin = yaml.safe_load(rendered)
    assert plugin["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2" and plugin["kind"] == "Plugin"
    assert plugin["metadata"]["name"] == "specserve" and plugin["spec"]["version"] == "v0.2.0"
    offered = set()
    for platform in plugin["spec"]["platforms"]:
        labels = platform["selector"]["matchLabels"]
        offered.add((labels["os"], labels["arch"]))
        assert platform["uri"].endswith(f"/v0.2.0/kubectl-specserve_{labels['os']}_{labels['arch']}.tar.gz")
        assert platform["bin"] == "kubectl-specserve"
    platforms = {(m["os"], m["arch"]) for m in workflow()["jobs"]["plugin"]["strategy"]["matrix"]["include"]}
    assert offered == platforms
    release = next(s for s in workflow()["jobs"]["github-release"]["steps"] if "krew-release-bot" in s.get("uses", ""))
    assert release["with"]["krew_template_file"] == ".github/krew/specserve.yaml"


def test_the_chart_packages_with_the_tags_versions_and_runbook_links(tmp_path: Path) -> None:
    before = (REPO / "charts" / "specserve" / "values.yaml").read_text()
    env = {**os.environ, "HELM": tool("helm")}
    proc = subprocess.run(["bash", str(PACKAGE_CHART), "0.2.0", str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    package = tmp_path / "specserve-0.2.0.tgz"
    with tarfile.open(package) as tar:
        chart = yaml.safe_load(tar.extractfile("specserve/Chart.yaml").read())  # type: ignore[union-attr]
    assert chart["version"] == "0.2.0" and chart["appVersion"] == "0.2.0"
    args = [tool("helm"), "template", "ops", str(package), "--namespace", "specserve-system",
            "--set", "alerts.enabled=true", "--api-versions", PROMETHEUS_RULE]  # fmt: skip
    objs = parse_docs(run(args).stdout)
    rule = next(o for o in objs if o["kind"] == "PrometheusRule")
    urls = {r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"]}
    prefix = "https://github.com/specserve/specserve/blob/v0.2.0/docs/runbooks/"
    assert urls and all(u.startswith(prefix) for u in urls), urls
    # A user's own runbook copy still replaces them in the released chart.
    wiki = parse_docs(run([*args, "--set", "alerts.runbookBaseUrl=https://wiki.example/rb"]).stdout)
    rule = next(o for o in wiki if o["kind"] == "PrometheusRule")
    urls = {r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert urls and all(u.startswith("https://wiki.example/rb/") for u in urls), urls
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "ghcr.io/specserve/specserve-operator:0.2.0"
    assert (REPO / "charts" / "specserve" / "values.yaml").read_text() == before  # the repository's chart untouched


def test_the_chart_script_refuses_a_version_that_is_not_semver(tmp_path: Path) -> None:
    proc = subprocess.run(["bash", str(PACKAGE_CHART), "v0.2.0", str(tmp_path)], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert proc.returncode != 0 and "not a semantic version" in proc.stderr


def test_the_wheel_carries_the_plugin_and_its_command(tmp_path: Path) -> None:
    """What PyPI gets: `pip install specserve[plugin]` puts kubectl-specserve on PATH (kubectl finds it)."""
    proc = subprocess.run(
        ["python", "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(tmp_path), str(REPO)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = tmp_path.glob("specserve-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = archive.read(entry_points).decode()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "kubectl-specserve = specserve.plugin.main:main" in scripts
    assert "specserve/plugin/main.py" in names and "specserve/render/templates/networkpolicy.yaml.j2" in names
    assert "Provides-Extra: plugin" in metadata
    assert not any(n.startswith(("tests/", "specserve_tools/", "specserve_kubefake/")) for n in names)

"""The emulator's metrics, the metric names the operator reads, and the HTTP endpoints it uses exist in SGLang.

Read with `ast` from each release's installed sources (sglang_source.py):
- metrics: the collector module (0.5.23: srt/observability/metrics_collector.py; 0.5.9: srt/metrics/collector.py),
  every `Gauge/Counter/Histogram/Summary(name="sglang:...", labelnames=...)` with the label names resolved from the
  collector's base labels (scheduler: model_name, engine_type, tp_rank, pp_rank, moe_ep_rank; tokenizer:
  model_name, engine_type);
- routes: decorators and add_api_route calls in srt/entrypoints/http_server.py, plus the /metrics Mount of
  add_prometheus_middleware in srt/utils/common.py.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from specserve.render import render
from specserve.versions import DEFAULT_VERSION, RELEASES
from specserve_tools.emulator.metrics import build_metrics
from tests.conformance.cases import ROOT, all_cases
from tests.conformance.conftest import SUPPORTED_VERSIONS, sglang_env
from tests.conformance.sglang_source import MetricDef, http_routes, metric_definitions, mounts

COLLECTOR_MODULES = ("srt/observability/metrics_collector.py", "srt/metrics/collector.py")
OPERATOR = ROOT / "operator" / "specserve"
# Endpoints the operator, its bench tools and the rendered pods depend on (issue 5). /ready is 0.5.2x only:
# the rendered probes use /health_generate and /health, which every supported release serves.
OPERATOR_ENDPOINTS = ("/health_generate", "/health", "/metrics", "/server_info", "/v1/chat/completions", "/v1/models")
NEWER_ENDPOINTS = {"/ready": "0.5.23"}


@cache
def sglang_metrics(version: str) -> dict[str, MetricDef]:
    env = sglang_env(version)
    for relative in COLLECTOR_MODULES:
        path = env.site_packages / "sglang" / relative
        if path.is_file():
            return {d.family: d for d in metric_definitions(path)}
    raise AssertionError(f"SGLang {version} has none of {COLLECTOR_MODULES}")


@cache
def sglang_routes(version: str) -> set[str]:
    env = sglang_env(version)
    routes = http_routes(env.source("srt/entrypoints/http_server.py"))
    common = env.source("srt/utils/common.py")
    if "add_prometheus_middleware" in env.source("srt/entrypoints/http_server.py").read_text():
        routes |= mounts(common, "add_prometheus_middleware")
    return routes


@dataclass(frozen=True)
class Exposed:
    type: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...]  # histogram upper bounds without +Inf


def emulator_families() -> dict[str, Exposed]:
    """What the emulator's registry exposes, read from collect() after one labelled series per metric."""
    metrics = build_metrics(CollectorRegistry())
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            value.labels(**dict.fromkeys(value._labelnames, "x"))
    out: dict[str, Exposed] = {}
    for family in metrics.registry.collect():
        labels = {tuple(k for k in s.labels if k != "le") for s in family.samples}
        assert len(labels) == 1, (family.name, labels)
        bounds = sorted({float(s.labels["le"]) for s in family.samples if "le" in s.labels} - {float("inf")})
        out[family.name] = Exposed(family.type, labels.pop(), tuple(bounds))
    return out


def operator_metric_names() -> set[str]:
    """Every `sglang:...` metric name the operator's code mentions outside the emulator."""
    names: set[str] = set()
    for path in OPERATOR.rglob("*.py"):
        if "emulator" in path.relative_to(OPERATOR).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(re.findall(r"sglang:[a-z0-9_]+", node.value))
    return names


def test_sglang_collector_is_read() -> None:
    """The harness sees SGLang's metrics with resolved labels (it cannot pass on an empty read)."""
    metrics = sglang_metrics(DEFAULT_VERSION)
    assert len(metrics) > 50
    scheduler_labels = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
    assert metrics["sglang:num_running_reqs"].labels == scheduler_labels
    assert metrics["sglang:num_running_reqs"].type == "gauge"


def test_emulator_exposes_only_sglang_metrics_with_sglang_types_and_labels() -> None:
    sglang = sglang_metrics(DEFAULT_VERSION)
    emulated = emulator_families()
    assert emulated, "the emulator registry exposes nothing"
    problems = []
    for family, ours in sorted(emulated.items()):
        theirs = sglang.get(family)
        if theirs is None:
            problems.append(f"{family}: not a metric of SGLang {DEFAULT_VERSION}")
            continue
        if ours.type != theirs.type:
            problems.append(f"{family}: emulator {ours.type}, SGLang {theirs.type}")
        if theirs.labels is None:
            problems.append(f"{family}: SGLang's label names could not be read")
        elif set(ours.labels) != set(theirs.labels):
            problems.append(f"{family}: emulator labels {sorted(ours.labels)}, SGLang {sorted(theirs.labels)}")
        if ours.type == "histogram" and theirs.buckets is not None and ours.buckets != theirs.buckets:
            problems.append(f"{family}: emulator buckets {ours.buckets}, SGLang's defaults {theirs.buckets}")
    assert not problems, "\n".join(problems)


def test_emulator_histograms_use_sglang_default_buckets() -> None:
    """Bucket boundaries are compared wherever SGLang's defaults are list literals (all the emulator's today)."""
    sglang = sglang_metrics(DEFAULT_VERSION)
    histograms = [f for f, e in emulator_families().items() if e.type == "histogram"]
    assert histograms
    assert all(sglang[f].buckets is not None for f in histograms), [f for f in histograms if not sglang[f].buckets]


def test_emulator_check_can_fail() -> None:
    sglang = sglang_metrics(DEFAULT_VERSION)
    assert "sglang:num_running_requests" not in sglang
    assert sglang["sglang:prompt_tokens"].labels != ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")


# Per-pool facts the operator reports but never decides on: where a release lacks them, status shows them as
# unknown (an empty result is unknown, never 0), and demand (running + queued) exists in every release.
NOT_IN_RELEASE: dict[str, set[str]] = {
    # 0.5.9 has no per-request TPOT histogram (only inter_token_latency) and no active-steps gauge.
    "0.5.9": {
        "sglang:request_time_per_output_token_seconds",
        "sglang:request_time_per_output_token_seconds_bucket",
        "sglang:spec_num_steps",
    },
    # 0.5.17 has no per-request TPOT histogram either (inter_token_latency only): its TPOT signals read as
    # unknown, as the real-engine run showed (docs/real-engine.md).
    "0.5.17": {
        "sglang:request_time_per_output_token_seconds",
        "sglang:request_time_per_output_token_seconds_bucket",
    },
}


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_metrics_the_operator_reads_exist(version: str) -> None:
    names = operator_metric_names() - NOT_IN_RELEASE.get(version, set())
    assert "sglang:num_running_reqs" in names
    families = sglang_metrics(version).values()
    known = {d.name for d in families}
    # A histogram is read through its series: name_bucket (quantiles), name_sum, name_count.
    series = ("_bucket", "_sum", "_count")
    known |= {f"{d.name}{suffix}" for d in families if d.type == "histogram" for suffix in series}
    missing = sorted(names - known)
    assert not missing, f"SGLang {version} has no {missing}"


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_endpoints_exist(version: str) -> None:
    routes = sglang_routes(version)
    assert len(routes) > 20
    assert "/no_such_endpoint" not in routes
    missing = [e for e in OPERATOR_ENDPOINTS if e not in routes]
    assert not missing, f"SGLang {version} serves none of {missing}"
    for endpoint, since in NEWER_ENDPOINTS.items():
        assert (endpoint in routes) == (tuple(map(int, version.split("."))) >= tuple(map(int, since.split("."))))


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_rendered_pod_endpoints_exist(version: str) -> None:
    """Probe and preStop URLs in every rendered pod of this release are SGLang routes."""
    routes = sglang_routes(version)
    used: set[str] = set()
    for case in all_cases():
        if case.version != version:
            continue
        for manifest in (m for m in render(case.spec) if m["kind"] == "Deployment"):
            container = next(c for c in manifest["spec"]["template"]["spec"]["containers"] if c["name"] == "sglang")
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                if probe in container:
                    used.add(container[probe]["httpGet"]["path"])
            handler = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
            used.update(re.findall(r"http://127\.0\.0\.1:\d+(/[A-Za-z0-9_/]+)", " ".join(handler)))
    assert used, f"no endpoints found in the rendered pods of {version}"
    assert not used - routes, f"SGLang {version} does not serve {sorted(used - routes)}"


def test_every_release_has_a_conformance_environment() -> None:
    """Adding a release to versions.py without adding it to scripts/sglang-env.sh fails here."""
    script = (ROOT / "scripts" / "sglang-env.sh").read_text()
    match = re.search(r"^VERSIONS=\(([^)]*)\)", script, re.MULTILINE)
    assert match, "scripts/sglang-env.sh has no VERSIONS=(...) line"
    assert set(match.group(1).split()) == set(RELEASES)
    assert set(SUPPORTED_VERSIONS) == set(RELEASES)
    for version in RELEASES:
        assert (ROOT / "tests" / "conformance" / "envs" / f"sglang-{version}.txt").is_file()

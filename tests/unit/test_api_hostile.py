"""Hostile and absurd input to the switching, curves, learning, metrics, SLO, pause and routing fields: each is
refused with the field and the fix (by the schema the API server checks, or by the operator where it cannot),
and whatever is accepted renders and decides without an exception (a property test over the numbers)."""

from __future__ import annotations

import asyncio
import copy
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specserve.api.install_policy import InstallPolicy, check_install_policy, url_allowed
from specserve.api.models import Mode
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.cli import main
from specserve.config import OperatorConfig
from specserve.metrics.promql import Windows, grouped_queries
from specserve.policy.curves import curves_from_spec
from specserve.policy.knobs import knobs_from_spec
from specserve.policy.pause import is_paused
from specserve.policy.switching import decide, initial_state
from specserve.policy.types import PoolSignal, Sample
from specserve.render import render
from specserve.switching.sources import Sources
from tests.unit.test_api import MINIMAL, with_


def document(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "m", "namespace": "ns"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "specserve.io/v1alpha1", "kind": "SpecServe", "metadata": meta, "spec": spec}


def refused(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, str]:
    with pytest.raises(InvalidSpecServe) as info:
        parse_object(document(spec, annotations))
    return {e.field: e.message for e in info.value.errors}


def pts(*points: tuple[float, float]) -> list[dict[str, float]]:
    return [{"concurrency": c, "tokensPerSecond": t} for c, t in points]


GOOD_SPEC = pts((1, 100), (8, 500), (64, 1200))
GOOD_BASE = pts((1, 60), (8, 400), (64, 2000))
# A noisy hand edit: the speculative curve zig-zags around the baseline's at every concurrency.
ZIGZAG_SPEC = pts(*[(c, 100 + (50 if c % 2 else -50)) for c in range(1, 65)])
ZIGZAG_BASE = pts(*[(c, 100) for c in range(1, 65)])

# The batch: (patch, field, fix). Each got through `specserve render` and the operator before this round.
NUMBERS: list[tuple[dict[str, Any], str, str]] = [
    ({"switching.crossoverConcurrency": math.inf}, "spec.switching.crossoverConcurrency", "finite number"),
    ({"switching.crossoverConcurrency": -math.inf}, "spec.switching.crossoverConcurrency", "finite number"),
    ({"switching.crossoverConcurrency": math.nan}, "spec.switching.crossoverConcurrency", "finite number"),
    ({"switching.crossoverConcurrency": 1e308}, "spec.switching.crossoverConcurrency", "less than or equal to 100000"),
    ({"switching.hysteresis": math.nan}, "spec.switching.hysteresis", "finite number"),
    (
        {"switching.curves": {"speculative": pts((1, 1.7e308), (8, 1.7e308)), "baseline": GOOD_BASE}},
        "spec.switching.curves.speculative[0].tokensPerSecond",
        "less than or equal to 1000000000",
    ),
    (
        {"switching.curves": {"speculative": pts((1, 100), (1e300, 200)), "baseline": GOOD_BASE}},
        "spec.switching.curves.speculative[1].concurrency",
        "less than or equal to 100000",
    ),
    (
        {"switching.curves": {"speculative": pts((1, math.inf), (2, 3)), "baseline": GOOD_BASE}},
        "spec.switching.curves.speculative[0].tokensPerSecond",
        "finite number",
    ),
    (
        {"switching.curves": {"speculative": pts((1, 0), (8, 0)), "baseline": pts((1, 0), (8, 0))}},
        "spec.switching.curves.speculative",
        "serves 0 tokens/s at every point",
    ),
    ({"switching.curves": {"speculative": GOOD_SPEC}}, "spec.switching.curves", "needs points for both modes"),
    ({"switching.curves": {"baseline": GOOD_BASE}}, "spec.switching.curves", "add the other mode's points"),
    ({"switching.calibratedAcceptLength": 0.5}, "spec.switching.calibratedAcceptLength", "greater than or equal to 1"),
    ({"switching.calibratedAcceptLength": math.inf}, "spec.switching.calibratedAcceptLength", "finite number"),
    ({"switching.tpotSloSeconds": 1e-300}, "spec.switching.tpotSloSeconds", "greater than or equal to 0.001"),
    (
        {"switching.curves": {"speculative": ZIGZAG_SPEC, "baseline": ZIGZAG_BASE}},
        "spec.switching.curves",
        "cross 63 times (at most 8)",
    ),
]

STRINGS: list[tuple[dict[str, Any], str, str]] = [
    ({"model.servedName": "llama\n--api-key x"}, "spec.model.servedName", "control characters"),
    ({"model.servedName": "llama\x1b[31m"}, "spec.model.servedName", "control characters"),
    ({"model.path": "meta-llama/x\x00"}, "spec.model.path", "control characters"),
    ({"model.revision": "main\r"}, "spec.model.revision", "control characters"),
    ({"speculative.draftModelPath": "org/head\t"}, "spec.speculative.draftModelPath", "control characters"),
]


SEL = "spec.switching.metrics.seriesSelector"
SELECTORS: list[tuple[dict[str, Any], str, str]] = [
    ({"switching.metrics": {"seriesSelector": 'a="b"}) or vector(1e9) or sum({x="y"'}}, SEL, "label matchers only"),
    ({"switching.metrics": {"seriesSelector": 'namespace="$namespace"} or up{'}}, SEL, "label matchers only"),
    ({"switching.metrics": {"seriesSelector": 'namespace="$namespace",__name__=~".+"'}}, SEL, "no reserved __"),
    ({"switching.metrics": {"seriesSelector": "namespace=$namespace"}}, SEL, "double-quoted values"),
    ({"switching.metrics": {"seriesSelector": 'namespace="kube-system",app="$name"'}}, SEL, "own namespace"),
    ({"switching.metrics": {"seriesSelector": 'app="$name-$pool"'}}, SEL, 'add namespace="$namespace"'),
    ({"switching.metrics": {"seriesSelector": 'namespace=~"$namespace|kube-system"'}}, SEL, "own namespace"),
    ({"switching.metrics": {"seriesSelector": 'namespace="$namespace",app="$app"'}}, SEL, "only substitute"),
]


@pytest.mark.parametrize(
    "selector",
    [
        'kubernetes_namespace="$namespace",app="$name-$pool"',
        'namespace = "$namespace" , app=~"x\\"y", pod!~"b"',
        'namespace="$namespace",namespace!="kube-system",',
    ],
)
def test_label_matchers_on_the_own_namespace_are_accepted(selector: str) -> None:
    obj = parse_object(document(with_({"switching.metrics": {"seriesSelector": selector}})))
    assert obj.spec.switching.metrics.series_selector == selector


@pytest.mark.parametrize(("patch", "field", "fix"), NUMBERS + STRINGS + SELECTORS)
def test_hostile_values_are_refused_with_the_field_and_the_fix(patch: dict[str, Any], field: str, fix: str) -> None:
    errors = refused(with_(patch))
    assert field in errors, errors
    assert fix in errors[field]


def test_curves_crossing_a_few_times_are_a_measurement() -> None:
    """Noise at the crossover makes real curves cross more than once: that is accepted."""
    spec = pts((1, 100), (4, 300), (8, 410), (12, 500), (16, 600))
    base = pts((1, 60), (4, 290), (8, 420), (12, 490), (16, 700))
    parse_object(document(with_({"switching.curves": {"speculative": spec, "baseline": base}})))


def test_values_at_the_bounds_are_accepted() -> None:
    edge = pts((1e-6, 0), (100_000, 1e9))
    obj = parse_object(
        document(
            with_(
                {
                    "switching.crossoverConcurrency": 100_000,
                    "switching.tpotSloSeconds": 0.001,
                    "switching.calibratedAcceptLength": 1,
                    "switching.curves": {"speculative": edge, "baseline": pts((1, 5), (2, 6))},
                }
            )
        )
    )
    assert obj.spec.switching.crossover_concurrency == 100_000


# ------------------------------------------------------------------------------------------------- property

_NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 1e-3, 0.5, 1.0, 64.0, 1e5, 1e9, 1.7e308, -1.0]),
    st.integers(min_value=-(2**70), max_value=2**70),
)
_INTEGER = st.one_of(st.integers(min_value=-(2**64), max_value=2**64), st.sampled_from([0, 1, 60, 86400, 86401]))
_CURVE = st.lists(st.fixed_dictionaries({"concurrency": _NUMBER, "tokensPerSecond": _NUMBER}), max_size=6)
# Numbers that keep a curve valid: drawn as increasing concurrencies, so that valid curves are common.
_VALID_CURVE = st.lists(
    st.tuples(st.floats(min_value=1e-6, max_value=1e5), st.floats(min_value=0, max_value=1e9)),
    min_size=2,
    max_size=8,
    unique_by=lambda p: p[0],
).map(lambda ps: pts(*sorted(ps)))

SWITCHING_FIELDS = {
    "crossoverConcurrency": _NUMBER,
    "hysteresis": _NUMBER,
    "calibratedAcceptLength": _NUMBER,
    "tpotSloSeconds": _NUMBER,
    "evaluationIntervalSeconds": _INTEGER,
    "upStabilizationSeconds": _INTEGER,
    "downStabilizationSeconds": _INTEGER,
    "minDwellSeconds": _INTEGER,
    "maxRestartsPerDay": _INTEGER,
}


@st.composite
def switching_specs(draw: st.DrawFn) -> dict[str, Any]:
    chosen = draw(st.sets(st.sampled_from(sorted(SWITCHING_FIELDS)), max_size=len(SWITCHING_FIELDS)))
    switching: dict[str, Any] = {name: draw(SWITCHING_FIELDS[name]) for name in sorted(chosen)}
    curves = draw(st.sampled_from(["none", "valid", "any"]))
    if curves != "none":
        curve = _VALID_CURVE if curves == "valid" else _CURVE
        switching["curves"] = {"speculative": draw(curve), "baseline": draw(curve)}
    spec = copy.deepcopy(MINIMAL)
    spec["switching"] = switching
    spec["strategy"] = draw(st.sampled_from(["TrafficSplit", "Restart", "Adaptive"]))
    return spec


# Demand as the metrics path delivers it (metrics.signal: unknown is None; absurd readings are unknown too).
DEMANDS = (0.0, 0.5, 3.0, 40.0, 1e4, 1e6, math.inf, math.nan, None, 7.0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(switching_specs())
def test_any_switching_numbers_are_refused_by_field_or_render_and_decide(spec: dict[str, Any]) -> None:
    try:
        obj = parse_object(document(spec))
    except InvalidSpecServe as exc:
        assert exc.errors
        for error in exc.errors:
            assert error.field.startswith("spec.switching"), error
            assert error.message
        return
    render(obj, None)
    curves = curves_from_spec(obj.spec.switching)
    knobs = knobs_from_spec(obj)
    state = initial_state(obj, obj.spec.switching.initial_mode, 0.0)
    single = obj.spec.strategy != "TrafficSplit"
    for i, demand in enumerate(DEMANDS):
        half = None if demand is None else demand / 2
        signal = PoolSignal(1, running=half, queued=0.0, tokens_per_second=half, accept_length=half)
        sample = Sample(15.0 * (i + 1), demand, signal, None if single else signal)
        verdict = decide(knobs, curves, state, sample)
        assert verdict.mode in (Mode.SPECULATIVE, Mode.BASELINE)
        state = verdict.state


# ------------------------------------------------------------------------------------------- Prometheus URLs

URL = "spec.switching.metrics.prometheusUrl"
OWN = "http://prometheus-operated.monitoring.svc:9090"


@pytest.mark.parametrize(
    "url",
    [
        "http://user:hunter2@prometheus.monitoring:9090",
        "http://token@prometheus.monitoring:9090",
        "http://prometheus.monitoring:9090/?x=1",
        "http://prometheus.monitoring:9090/#frag",
        "http://prometheus monitoring:9090",
    ],
)
def test_prometheus_urls_with_credentials_are_refused_by_the_schema(url: str) -> None:
    errors = refused(with_({"switching.metrics": {"prometheusUrl": url}}))
    assert "without credentials" in errors[URL]


def url_spec(url: str) -> Any:
    return parse_object(document(with_({"switching.metrics": {"prometheusUrl": url}}))).spec


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",  # the cloud metadata service
        "http://metadata.google.internal/computeMetadata/v1",
        "http://kubernetes.default.svc:443",
        "https://prometheus-operated.monitoring.svc:9090",  # another scheme
        "http://prometheus-operated.monitoring.svc:9091",  # another port
        "http://prometheus-operated.monitoring.svc.evil.com:9090",
    ],
)
def test_prometheus_urls_the_installation_does_not_list_are_refused(url: str) -> None:
    policy = InstallPolicy(prometheus_urls=(OWN, "http://thanos.monitoring:10902/tenant-a"))
    (error,) = check_install_policy(url_spec(url), policy)
    assert error.field == URL
    assert "is not a Prometheus this installation allows" in error.message and "allowedPrometheusUrls" in error.message


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        (OWN, True),
        (OWN + "/", True),
        ("HTTP://Prometheus-Operated.monitoring.svc:9090", True),
        ("http://thanos.monitoring:10902/tenant-a", True),
        ("http://thanos.monitoring:10902/tenant-a/sub", True),
        ("http://thanos.monitoring:10902/tenant-ab", False),
        ("http://thanos.monitoring:10902/", False),
        ("http://thanos.monitoring:10902/tenant-a/../tenant-b", False),
        ("http://thanos.monitoring:10902/tenant-a/%2e%2E/tenant-b", False),
        ("http://thanos.monitoring:10902/tenant-a/./x", False),
    ],
)
def test_allowed_prometheus_urls_compare_origin_and_path(url: str, ok: bool) -> None:
    assert url_allowed(url, (OWN, "http://thanos.monitoring:10902/tenant-a")) is ok


def test_the_operator_s_own_prometheus_is_always_allowed() -> None:
    config = OperatorConfig(prometheus_url=OWN)
    assert check_install_policy(url_spec(OWN), config.installation) == []
    assert check_install_policy(url_spec("http://other:9090"), config.installation)


def test_the_switching_loop_sends_nothing_to_a_url_not_allowed() -> None:
    sources = Sources(installation=InstallPolicy(prometheus_urls=(OWN,)))
    reader = sources.prometheus("http://169.254.169.254")
    results = asyncio.run(reader.read(grouped_queries(Windows(30, 60))))
    assert all(r.refused and r.error is not None and r.error.startswith("not sent: ") for r in results)
    assert sources.prometheus(OWN) is sources.prometheus(OWN)  # allowed: a real client, kept


def test_render_applies_the_prometheus_allow_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(document(with_({"switching.metrics": {"prometheusUrl": "http://169.254.169.254"}}))))
    assert main(["render", str(path)]) == 1
    assert URL in capsys.readouterr().err
    assert main(["render", "--allow-prometheus-url", "http://169.254.169.254", str(path)]) == 0


# ------------------------------------------------------------------------------------------------ annotations


@pytest.mark.parametrize("value", ["yes", "1", "on", "paused", "ture", ""])
def test_a_paused_value_the_operator_does_not_know_is_refused_naming_the_accepted_ones(value: str) -> None:
    """Issue 31: `specserve.io/paused: "yes"` silently paused nothing."""
    errors = refused(MINIMAL, {"specserve.io/paused": value})
    message = errors['metadata.annotations["specserve.io/paused"]']
    assert '"true"' in message and '"false"' in message and "pauses nothing" in message


@pytest.mark.parametrize(("value", "paused"), [("true", True), ("True", True), (" true ", True), ("false", False)])
def test_the_documented_paused_values_are_accepted(value: str, paused: bool) -> None:
    obj = parse_object(document(MINIMAL, {"specserve.io/paused": value}))
    assert is_paused(obj.metadata.annotations) is paused


# ----------------------------------------------------------------------------------------------- deep nesting

HEAD = "apiVersion: specserve.io/v1alpha1\nkind: SpecServe\nmetadata: {name: m}\nspec:\n  model: {path: x}\n"
HEAD += "  speculative: {draftModelPath: d}\n  routing: {gateway: {name: gw}}\n"


@pytest.mark.parametrize(
    ("tail", "field"),
    [
        ("  engine:\n    extraArgs: " + "[" * 200 + "1" + "]" * 200 + "\n", "spec.engine.extraArgs[0][0]"),
        ("  engine:\n    extraArgs: " + "[" * 5000 + "1" + "]" * 5000 + "\n", "spec.engine.extraArgs"),
        ("  switching:\n    metrics: " + "{a: " * 300 + "1" + "}" * 300 + "\n", "spec.switching.metrics.a.a"),
        ("  switching:\n    metrics: " + "{a: " * 2000 + "1" + "}" * 2000 + "\n", "spec.switching.metrics.a.a"),
    ],
    ids=["list-200", "list-5000", "map-300", "map-2000"],
)
def test_a_deeply_nested_value_is_refused_naming_its_field(
    tail: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31: refused with a bare YAML (or JSON) line and column, and the whole spec echoed back."""
    path = tmp_path / "deep.yaml"
    path.write_text(HEAD + tail)
    assert main(["render", str(path)]) in (1, 2)
    err = capsys.readouterr().err
    assert f": {field}" in err and "nest" in err
    assert len(err) < 600  # the field and the fix, not the document


def test_the_operator_refuses_deep_nesting_by_field_too() -> None:
    deep: Any = 1
    for _ in range(100):
        deep = {"a": deep}
    errors = refused(with_({"switching.metrics": deep}))
    (field,) = errors
    assert field.startswith("spec.switching.metrics.a.a") and "levels deep" in errors[field]
    deep_meta = document(MINIMAL)
    deep_meta["metadata"]["extra"] = deep
    with pytest.raises(InvalidSpecServe) as info:
        parse_object(deep_meta)
    assert info.value.errors[0].field.startswith("metadata.extra.a")

"""Refused at the front door: what the API server would refuse later in a child object (labels, tolerations,
node selectors, HTTPRoute hostnames and paths, resources, env), strict types, curves, and the install policy."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from specserve.api import k8s_rules
from specserve.api.curves import curve_problem
from specserve.api.install_policy import InstallPolicy, check_install_policy, under_prefix
from specserve.api.validation import parse_object, parse_spec
from specserve.cli import main
from tests.unit.test_api import MINIMAL, errors_of, with_

# -------------------------------------------------------------------------------------- labels and keys


@pytest.mark.parametrize(
    "key",
    ["app", "example.com/app", "a.b-c_d", "nvidia.com/gpu.product", "x" * 63, "a" * 253 + "/" + "b" * 63],
)
def test_valid_label_keys(key: str) -> None:
    assert k8s_rules.label_key_problem(key) is None


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("/app", "empty prefix"),
        ("example.com/", "empty name"),
        ("x" * 64, "longer than 63"),
        ("-app", "starting and ending alphanumeric"),
        ("app_", "starting and ending alphanumeric"),
        ("has space", "alphanumerics"),
        ("Example.com/app", "lowercase DNS subdomain"),
        ("a/b/c", "lowercase DNS subdomain"),
        ("a" * 254 + "/b", "prefix is longer than 253"),
    ],
)
def test_invalid_label_keys_say_why(key: str, why: str) -> None:
    problem = k8s_rules.label_key_problem(key)
    assert problem is not None and why in problem


def test_the_schema_pattern_for_keys_agrees_with_the_python_check() -> None:
    """The CRD carries LABEL_KEY_PATTERN where a key is a plain value (toleration keys)."""
    keys = [
        "app",
        "example.com/app",
        "a.b-c_d",
        "/app",
        "example.com/",
        "-app",
        "app_",
        "has space",
        "Example.com/a",
        "a/b/c",
    ]
    for key in keys:
        assert bool(re.match(k8s_rules.LABEL_KEY_PATTERN, key)) is (k8s_rules.label_key_problem(key) is None), key


@pytest.mark.parametrize(
    ("value", "ok"), [("", True), ("v1.2_b-3", True), ("x" * 64, False), ("a b", False), ("-a", False)]
)
def test_label_values(value: str, ok: bool) -> None:
    assert (k8s_rules.label_value_problem(value) is None) is ok


@pytest.mark.parametrize(
    ("patch", "field", "fix"),
    [
        ({"placement.nodeSelector": {"bad key": "x"}}, "spec.placement.nodeSelector.bad key", "alphanumerics"),
        ({"placement.nodeSelector": {"pool": "a b"}}, "spec.placement.nodeSelector.pool", "label value"),
        ({"monitoring.labels": {"Example.com/x": "y"}}, "spec.monitoring.labels.Example.com/x", "DNS subdomain"),
        ({"monitoring.labels": {"release": "x" * 64}}, "spec.monitoring.labels.release", "at most 63"),
        ({"placement.gpuProduct": "NVIDIA H100"}, "spec.placement.gpuProduct", "label value"),
        (
            {"monitoring.labels": {"app.kubernetes.io/managed-by": "me"}},
            "spec.monitoring.labels",
            "operator's own labels",
        ),
        ({"monitoring.labels": {"specserve.io/pool": "x"}}, "spec.monitoring.labels", "use another key"),
    ],
)
def test_label_problems_name_the_field_and_the_fix(patch: dict[str, Any], field: str, fix: str) -> None:
    errors = errors_of(with_(patch))
    assert field in errors, errors
    assert fix in errors[field]


def test_user_labels_that_do_not_collide_pass() -> None:
    parse_spec(with_({"monitoring.labels": {"release": "kps", "team.example.com/owner": "ml"}}))


# ------------------------------------------------------------------------------------------- tolerations


@pytest.mark.parametrize(
    ("toleration", "fix"),
    [
        ({"key": "gpu", "operator": "Exists", "value": "x"}, "takes no value"),
        ({"operator": "Equal", "value": "x"}, "add the taint's key"),
        ({"key": "gpu", "effect": "NoSchedule", "tolerationSeconds": 60}, "set effect: NoExecute"),
        ({"key": "-gpu"}, "alphanumeric"),
        ({"key": "gpu", "operator": "Equal", "value": "a b"}, "label value"),
    ],
)
def test_tolerations_the_api_server_refuses(toleration: dict[str, Any], fix: str) -> None:
    errors = errors_of(with_({"placement.tolerations": [toleration]}))
    assert any(fix in message for message in errors.values()), errors
    assert all(field.startswith("spec.placement.tolerations") for field in errors)


@pytest.mark.parametrize(
    "toleration",
    [
        {"operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "tolerationSeconds": 300},
    ],
)
def test_tolerations_kubernetes_accepts(toleration: dict[str, Any]) -> None:
    parse_spec(with_({"placement.tolerations": [toleration]}))


# ---------------------------------------------------------------------------------------- routes (Gateway)


@pytest.mark.parametrize("hostname", ["llm.example.com", "*.example.com", "a", "a-b.c-d.io"])
def test_gateway_hostnames_kubernetes_accepts(hostname: str) -> None:
    parse_spec(with_({"routing.hostnames": [hostname]}))


@pytest.mark.parametrize(
    ("hostname", "fix"),
    [
        ("https://llm.example.com", "has a scheme"),
        ("llm.example.com:443", "has a port"),
        ("llm.*.example.com", "wildcard only as the whole leftmost label"),
        ("*llm.example.com", "wildcard only"),
        ("LLM.example.com", "lowercase"),
        ("llm.example.com.", "lowercase DNS name"),
    ],
)
def test_gateway_hostnames_refused(hostname: str, fix: str) -> None:
    errors = errors_of(with_({"routing.hostnames": ["ok.example.com", hostname]}))
    assert fix in errors["spec.routing.hostnames[1]"]


@pytest.mark.parametrize("path", ["/", "/v1", "/v1/chat%20x", "/a.b/~c", "/v1/"])
def test_gateway_paths_kubernetes_accepts(path: str) -> None:
    parse_spec(with_({"routing.pathPrefix": path}))


@pytest.mark.parametrize(
    ("path", "fix"),
    [
        ("v1", "must start with /"),
        ("/v1 x", "URL path characters"),
        ("/v1?q=1", "URL path characters"),
        ("/v1//x", "may not contain"),
        ("/v1/../x", "may not contain"),
        ("/v1/%2fx", "may not contain"),
        ("/v1/.", "nor end with"),
    ],
)
def test_gateway_paths_refused(path: str, fix: str) -> None:
    assert fix in errors_of(with_({"routing.pathPrefix": path}))["spec.routing.pathPrefix"]


# ------------------------------------------------------------------------------------- resources and env


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("32Gi", Decimal(32 * 2**30)),
        ("500m", Decimal("0.5")),
        ("4", Decimal(4)),
        ("1e3", Decimal(1000)),
        ("1.5k", Decimal(1500)),
    ],
)
def test_quantities_parse_as_kubernetes_reads_them(text: str, value: Decimal) -> None:
    assert k8s_rules.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["1 GB", "1GB", "Gi", "1.2.3", "--1", "1ki"])
def test_not_quantities(text: str) -> None:
    assert k8s_rules.parse_quantity(text) is None
    assert "quantity" in errors_of(with_({"engine.shmSize": text}))["spec.engine.shmSize"]


@pytest.mark.parametrize(
    ("requests", "limits", "field"),
    [
        ({"memory": "64Gi"}, {"memory": "32Gi"}, "spec.engine.resources.requests.memory"),
        ({"cpu": "2"}, {"cpu": "1500m"}, "spec.engine.resources.requests.cpu"),
        (
            {"ephemeral-storage": "1Ti"},
            {"ephemeral-storage": "1000Gi"},
            "spec.engine.resources.requests.ephemeral-storage",
        ),
    ],
)
def test_requests_above_limits_are_refused(requests: dict[str, str], limits: dict[str, str], field: str) -> None:
    errors = errors_of(with_({"engine.resources": {"requests": requests, "limits": limits}}))
    assert "may not exceed its limit" in errors[field]


def test_requests_up_to_limits_pass() -> None:
    parse_spec(
        with_(
            {
                "engine.resources": {
                    "requests": {"cpu": "1000m", "memory": "1Gi"},
                    "limits": {"cpu": "1", "memory": "1024Mi"},
                }
            }
        )
    )


@pytest.mark.parametrize(
    ("env", "fix"),
    [
        ([{"name": "1ST", "value": "x"}], "environment variable name"),
        ([{"name": "A=B", "value": "x"}], "environment variable name"),
        ([{"name": "", "value": "x"}], "at least 1 character"),
        ([{"name": "A", "value": "1"}, {"name": "A", "value": "2"}], "names each variable once"),
    ],
)
def test_env_vars_kubernetes_refuses(env: list[dict[str, str]], fix: str) -> None:
    errors = errors_of(with_({"engine.env": env}))
    assert any(fix in message for message in errors.values()), errors


# ------------------------------------------------------------------------------------------ strict types


@pytest.mark.parametrize(
    ("patch", "field", "fix"),
    [
        ({"pools.speculative.replicas": "2"}, "spec.pools.speculative.replicas", "without quotes, e.g. 2"),
        ({"pools.speculative.replicas": 2.5}, "spec.pools.speculative.replicas", "valid integer"),
        ({"switching.advisory": "yes"}, "spec.switching.advisory", "write true or false without quotes"),
        ({"switching.advisory": 1}, "spec.switching.advisory", "valid boolean"),
        ({"switching.hysteresis": "0.2"}, "spec.switching.hysteresis", "valid number (got '0.2'); write a number"),
        ({"model.path": 42}, "spec.model.path", "valid string"),
        ({"engine.resources": {"requests": {"cpu": 4}}}, "spec.engine.resources.requests.cpu", 'quote it, e.g. "4"'),
    ],
)
def test_types_are_as_strict_as_the_api_server(patch: dict[str, Any], field: str, fix: str) -> None:
    errors = errors_of(with_(patch))
    assert fix in errors[field], errors


def test_numbers_and_enums_still_read_as_the_api_server_reads_them() -> None:
    spec = parse_spec(
        with_(
            {
                "switching.hysteresis": 0,  # an integer for a number field
                "switching.crossoverConcurrency": 2.0,
                "engine.memFractionStatic": 0.8,
                "strategy": "Restart",  # an enum value as a string
                "pools.speculative.replicas": 3,
            }
        )
    )
    assert spec.switching.hysteresis == 0.0 and spec.switching.crossover_concurrency == 2.0
    assert spec.strategy == "Restart" and spec.pools.speculative.replicas == 3


# ------------------------------------------------------------------------------------------------ curves


def points(*xs: float) -> list[dict[str, float]]:
    return [{"concurrency": x, "tokensPerSecond": 10 * x} for x in xs]


@pytest.mark.parametrize("curve", [points(1, 2), points(1, 2.5, 8, 64)])
def test_valid_curves(curve: list[dict[str, float]]) -> None:
    parse_spec(with_({"switching.curves": {"speculative": curve, "baseline": points(1, 4)}}))


def test_empty_curves_are_no_curves() -> None:
    parse_spec(with_({"switching.curves": {"speculative": [], "baseline": []}}))


@pytest.mark.parametrize(
    ("curve", "why"),
    [(points(1), "at least 2"), (points(2, 1), "strictly increase"), (points(1, 1), "strictly increase")],
)
def test_invalid_curves(curve: list[dict[str, float]], why: str) -> None:
    errors = errors_of(with_({"switching.curves": {"baseline": curve}}))
    assert "spec.switching.curves.baseline" in errors
    pts = [(p["concurrency"], p["tokensPerSecond"]) for p in curve]
    problem = curve_problem(pts)
    assert problem is not None and why in problem


def test_curve_problem_checks_values_too() -> None:
    assert curve_problem([(1.0, 1.0), (float("inf"), 2.0)]) is not None
    assert curve_problem([(1.0, -1.0), (2.0, 2.0)]) is not None


# --------------------------------------------------------------------------------------- install policy


@pytest.mark.parametrize(
    ("path", "prefix", "inside"),
    [
        ("/mnt/models", "/mnt/models", True),
        ("/mnt/models/llama", "/mnt/models/", True),
        ("/mnt/models-evil", "/mnt/models", False),
        ("/mnt", "/mnt/models", False),
        ("/anything", "/", True),
    ],
)
def test_prefixes_compare_whole_segments(path: str, prefix: str, inside: bool) -> None:
    assert under_prefix(path, prefix) is inside


def host_path_spec(path: str, read_only: bool | None = None) -> Any:
    cache: dict[str, Any] = {"hostPath": path}
    if read_only is not None:
        cache["readOnly"] = read_only
    return parse_spec(with_({"model.cache": cache}))


def test_host_paths_are_refused_by_default() -> None:
    (error,) = check_install_policy(host_path_spec("/mnt/models"), InstallPolicy())
    assert error.field == "spec.model.cache.hostPath"
    assert "allowed: none" in error.message and "pvcName" in error.message


def test_allowed_host_paths_pass_read_only() -> None:
    policy = InstallPolicy(("/mnt/models",))
    assert check_install_policy(host_path_spec("/mnt/models/kimi"), policy) == []
    assert check_install_policy(host_path_spec("/mnt/models/kimi", read_only=True), policy) == []


def test_writable_host_paths_need_the_installation_to_allow_writes() -> None:
    (error,) = check_install_policy(host_path_spec("/mnt/models", read_only=False), InstallPolicy(("/mnt/models",)))
    assert error.field == "spec.model.cache.readOnly" and "hostPathWritable" in error.message
    assert check_install_policy(host_path_spec("/mnt/models", read_only=False), InstallPolicy(("/mnt",), True)) == []


def test_path_tricks_cannot_escape_a_prefix() -> None:
    errors = errors_of(with_({"model.cache": {"hostPath": "/mnt/models/../../etc"}}))
    assert "normalised" in errors["spec.model.cache.hostPath"]


def test_pvc_caches_are_not_the_policy_s_business() -> None:
    assert check_install_policy(parse_spec(with_({"model.cache": {"pvcName": "w"}})), InstallPolicy()) == []
    assert check_install_policy(parse_spec(MINIMAL), InstallPolicy()) == []


HOST_PATH_DOC = """\
apiVersion: specserve.io/v1alpha1
kind: SpecServe
metadata: {name: m, namespace: ns}
spec:
  model: {path: /models/llama, cache: {hostPath: /mnt/models/llama}}
  speculative: {draftModelPath: org/eagle3-head}
  strategy: Restart
"""


@pytest.mark.parametrize(
    ("flags", "code", "says"),
    [
        ([], 1, "is not under a host path this installation allows (allowed: none)"),
        (["--allow-host-path", "/srv", "--allow-host-path", "/mnt/models"], 0, ""),
        (["--allow-host-path", "/mnt/models-old"], 1, "allowed: /mnt/models-old"),
    ],
)
def test_render_command_applies_the_install_policy(
    flags: list[str], code: int, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HOST_PATH_DOC, encoding="utf-8")
    assert main(["render", *flags, str(path)]) == code
    out, err = capsys.readouterr()
    assert says in err
    if code == 0:
        (deployment,) = [d for d in yaml.safe_load_all(out) if d["kind"] == "Deployment"]
        mounts = deployment["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        assert {"name": "model-cache", "mountPath": "/models", "readOnly": True} in mounts


def test_render_command_needs_the_write_flag_for_writable_host_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        HOST_PATH_DOC.replace("hostPath: /mnt/models/llama", "hostPath: /mnt/models/llama, readOnly: false")
    )
    assert main(["render", "--allow-host-path", "/mnt", str(path)]) == 1
    assert "spec.model.cache.readOnly" in capsys.readouterr().err
    assert main(["render", "--allow-host-path", "/mnt", "--allow-host-path-write", str(path)]) == 0


def test_strict_parsing_takes_kopf_bodies_and_yaml_dates() -> None:
    doc = yaml.safe_load(
        HOST_PATH_DOC.replace("model: {path: /models/llama,", "model: {revision: 2024-01-01, path: /x,")
    )
    assert parse_object(kopf.Body(doc)).spec.model.revision == "2024-01-01"

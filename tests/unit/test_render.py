"""Rendering a SpecServe into Kubernetes objects: golden files, official schemas, and what each choice renders."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from specserve.api.models import Mode, SpecServe
from specserve.api.validation import parse_object
from specserve.kube.kinds import OWNED_KINDS, kind_of
from specserve.kube.rbac import REQUIRED_RULES, allows
from specserve.render import render, to_yaml
from specserve.render.engine import adaptive_steps
from specserve.render.manifests import OPERATOR_POD_LABELS
from tests.conftest import EXAMPLES, ROOT, load_yaml
from tests.unit.test_api import MINIMAL, with_

GOLDEN = ROOT / "tests" / "golden"
K8S_VERSION = "1.35.0"
BUILTIN = {
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
}


def obj(spec: dict[str, Any], name: str = "m", uid: str | None = "uid-1") -> SpecServe:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if uid:
        meta["uid"] = uid
    return parse_object({"apiVersion": "specserve.io/v1alpha1", "kind": "SpecServe", "metadata": meta, "spec": spec})


def by_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind]


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return result


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_match_golden_files(path: Path) -> None:
    rendered = to_yaml(render(parse_object(load_yaml(path))))
    golden = GOLDEN / path.name
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(rendered, encoding="utf-8")
    assert golden.read_text(encoding="utf-8") == rendered, (
        f"re-run with UPDATE_GOLDEN=1 if {path.name} changed on purpose"
    )


SCENARIOS = {"example-" + p.stem: load_yaml(p)["spec"] for p in EXAMPLES} | {
    "restart": with_({"strategy": "Restart"}),
    "adaptive": with_({"strategy": "Adaptive", "switching.crossoverConcurrency": 12}),
    "adaptive-default-config": with_({"strategy": "Adaptive"}),
    "hostpath-token": with_({"model.cache": {"hostPath": "/mnt/models"}, "model.hfTokenSecret": {"name": "hf"}}),
    "old-sglang": with_({"engine.sglangVersion": "0.5.9", "placement.gpuProduct": "NVIDIA-RTX-PRO-6000-Blackwell"}),
    "no-route": with_({"strategy": "Restart", "routing": {}}),
    "surge-autoscaled-netpol": with_(
        {
            "pools": {"speculative": {"maxSurge": 2}, "baseline": {"autoscaling": "External"}},
            "networkPolicy": {"enabled": True},
            "engine.runAsUser": 0,
        }
    ),
    "netpol-no-route": with_(
        {"strategy": "Restart", "routing": {}, "networkPolicy": {"enabled": True, "prometheusNamespaces": []}}
    ),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_builtin_objects_are_valid_kubernetes(name: str) -> None:
    for manifest in render(obj(SCENARIOS[name])):
        if (manifest["apiVersion"], manifest["kind"]) in BUILTIN:
            kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)


@pytest.mark.parametrize("name", SCENARIOS)
def test_everything_is_owned_and_labelled(name: str) -> None:
    for manifest in render(obj(SCENARIOS[name])):
        meta = manifest["metadata"]
        assert meta["namespace"] == "ns"
        assert meta["ownerReferences"][0]["uid"] == "uid-1"
        assert meta["ownerReferences"][0]["controller"] is True
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "specserve"


def test_offline_render_has_no_owner() -> None:
    assert all("ownerReferences" not in m["metadata"] for m in render(obj(MINIMAL, uid=None)))


def test_traffic_split_runs_two_flavours_and_weights_follow_the_mode() -> None:
    out = render(obj(MINIMAL), Mode.SPECULATIVE)
    spec_args, base_args = (container(d)["args"] for d in by_kind(out, "Deployment"))
    assert flag(spec_args, "--speculative-algorithm") == "EAGLE3"
    assert flag(spec_args, "--speculative-draft-model-path") == "org/eagle3-head"
    assert flag(spec_args, "--speculative-num-draft-tokens") == "4"  # steps 3 + 1 with topk 1
    assert not any(a.startswith("--speculative") for a in base_args)
    for args in (spec_args, base_args):
        assert flag(args, "--host") == "0.0.0.0"
        assert "--enable-metrics" in args
    (route,) = by_kind(out, "HTTPRoute")
    refs = route["spec"]["rules"][0]["backendRefs"]
    assert [(r["name"], r["weight"], r["group"], r["kind"], r["port"]) for r in refs] == [
        ("m-spec", 100, "", "Service", 30000),
        ("m-base", 0, "", "Service", 30000),
    ]
    route_b = by_kind(render(obj(MINIMAL), Mode.BASELINE), "HTTPRoute")[0]
    assert [r["weight"] for r in route_b["spec"]["rules"][0]["backendRefs"]] == [0, 100]


def test_traffic_never_goes_to_a_pool_without_replicas() -> None:
    out = render(obj(with_({"pools": {"speculative": {"replicas": 0}, "baseline": {"replicas": 2}}})), Mode.SPECULATIVE)
    assert [r["weight"] for r in by_kind(out, "HTTPRoute")[0]["spec"]["rules"][0]["backendRefs"]] == [0, 100]


def test_restart_runs_one_pool_in_the_active_mode() -> None:
    spec = with_({"strategy": "Restart"})
    (speculative,) = by_kind(render(obj(spec), Mode.SPECULATIVE), "Deployment")
    (baseline,) = by_kind(render(obj(spec), Mode.BASELINE), "Deployment")
    assert speculative["metadata"]["name"] == baseline["metadata"]["name"] == "m-engine"
    assert "--speculative-algorithm" in container(speculative)["args"]
    assert "--speculative-algorithm" not in container(baseline)["args"]
    # The selector is immutable in a Deployment, so the mode must not be part of it.
    assert speculative["spec"]["selector"] == baseline["spec"]["selector"]
    assert speculative["spec"]["template"]["metadata"]["labels"]["specserve.io/mode"] == "speculative"


def test_adaptive_renders_sglang_config_file_with_drafting_off_above_the_crossover() -> None:
    out = render(obj(with_({"strategy": "Adaptive", "switching.crossoverConcurrency": 12})))
    (configmap,) = by_kind(out, "ConfigMap")
    config = json.loads(configmap["data"]["adaptive-config.json"])
    assert config == {"1": {"candidate_steps": [3]}, "12": {"candidate_steps": [0]}}
    (deployment,) = by_kind(out, "Deployment")
    args = container(deployment)["args"]
    assert "--speculative-adaptive" in args
    path = flag(args, "--speculative-adaptive-config")
    mounts = {m["name"]: m["mountPath"] for m in container(deployment)["volumeMounts"]}
    assert path == f"{mounts['adaptive-config']}/adaptive-config.json"


def test_adaptive_without_crossover_or_config_uses_sglang_defaults() -> None:
    out = render(obj(with_({"strategy": "Adaptive"})))
    assert by_kind(out, "ConfigMap") == []
    assert "--speculative-adaptive-config" not in container(by_kind(out, "Deployment")[0])["args"]


def test_adaptive_config_change_rolls_pods() -> None:
    a = with_({"strategy": "Adaptive", "speculative.adaptiveConfig": {"1": [3], "16": [0]}})
    b = with_({"strategy": "Adaptive", "speculative.adaptiveConfig": {"1": [3], "32": [0]}})
    hashes = [by_kind(render(obj(s)), "Deployment")[0]["spec"]["template"]["metadata"]["annotations"] for s in (a, b)]
    assert hashes[0]["specserve.io/engine-config-hash"] != hashes[1]["specserve.io/engine-config-hash"]


def test_switching_knobs_leave_workloads_untouched() -> None:
    before = render(obj(MINIMAL))
    after = render(obj(with_({"switching": {"hysteresis": 0.4, "minDwellSeconds": 60, "advisory": True}})))
    assert by_kind(before, "Deployment") == by_kind(after, "Deployment")


@pytest.mark.parametrize(
    ("product", "sm120"),
    [
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", True),
        ("NVIDIA-GeForce-RTX-5090", True),
        ("NVIDIA-H100-80GB-HBM3", False),
    ],
)
def test_sm120_placements_get_safe_engine_settings(product: str, sm120: bool) -> None:
    out = render(obj(with_({"placement.gpuProduct": product})))
    deployment = by_kind(out, "Deployment")[0]
    args = container(deployment)["args"]
    assert (flag(args, "--attention-backend") == "flashinfer") is sm120
    assert ("--enforce-disable-flashinfer-allreduce-fusion" in args) is sm120
    terms = deployment["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": [product]}]}]


def test_user_backend_wins_over_the_sm120_default() -> None:
    out = render(obj(with_({"placement.sm120": True, "engine.attentionBackend": "triton"})))
    assert flag(container(by_kind(out, "Deployment")[0])["args"], "--attention-backend") == "triton"


def test_old_release_gets_the_spec_v2_env_var_and_its_own_flags() -> None:
    out = render(obj(with_({"engine.sglangVersion": "0.5.9", "placement.sm120": True})))
    spec_pool, base_pool = by_kind(out, "Deployment")
    assert {"name": "SGLANG_ENABLE_SPEC_V2", "value": "True"} in container(spec_pool)["env"]
    assert "env" not in container(base_pool)  # plain decoding needs no spec v2
    assert "--enforce-disable-flashinfer-allreduce-fusion" not in container(spec_pool)["args"]  # absent in 0.5.9
    assert container(spec_pool)["image"].endswith(":0.5.9-cu130")


def test_ngram_on_the_old_release_gets_no_spec_v2_env_var() -> None:
    spec = with_(
        {"engine.sglangVersion": "0.5.9", "speculative.algorithm": "NGRAM", "speculative.draftModelPath": None}
    )
    assert all("env" not in container(d) for d in by_kind(render(obj(spec)), "Deployment"))


def test_new_release_needs_no_env_var() -> None:
    out = render(obj(MINIMAL))
    assert all("env" not in container(d) for d in by_kind(out, "Deployment"))


def test_gpu_resources_probes_and_draining() -> None:
    spec = with_(
        {
            "placement.gpusPerPod": 2,
            "engine.tensorParallelSize": 2,
            "engine.startupTimeoutSeconds": 1230,
            "engine.terminationGracePeriodSeconds": 300,
        }
    )
    deployment = by_kind(render(obj(spec)), "Deployment")[0]
    c = container(deployment)
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "2" == c["resources"]["requests"]["nvidia.com/gpu"]
    startup = c["startupProbe"]
    assert startup["httpGet"]["path"] == "/health_generate"
    budget = startup["initialDelaySeconds"] + startup["periodSeconds"] * startup["failureThreshold"]
    assert 1230 <= budget < 1230 + startup["periodSeconds"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    assert c["readinessProbe"]["httpGet"]["path"] == "/health_generate"
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 300
    drain = c["lifecycle"]["preStop"]["exec"]["command"]
    assert "sglang:num_running_reqs" in drain[-1] and "end=time.time()+290" in drain[-1]
    compile(drain[-1], "preStop", "exec")  # the drain script is valid Python
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"


def test_extra_args_and_env_are_passed_through() -> None:
    spec = with_(
        {
            "engine.extraArgs": ["--cuda-graph-max-bs-decode", "64"],
            "engine.env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
            "model.hfTokenSecret": {"name": "hf"},
        }
    )
    c = container(by_kind(render(obj(spec)), "Deployment")[0])
    assert c["args"][-2:] == ["--cuda-graph-max-bs-decode", "64"]
    assert {"name": "NCCL_DEBUG", "value": "INFO"} in c["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}} in c["env"]


def test_values_cannot_break_the_yaml() -> None:
    nasty = 'x": 1 #  evil: [' + "'{{ }}'"  # YAML's syntax; control characters are refused by the API
    out = render(obj(with_({"model.servedName": nasty})))
    assert flag(container(by_kind(out, "Deployment")[0])["args"], "--served-model-name") == nasty
    assert list(yaml.safe_load_all(to_yaml(out))) == out


def test_podmonitor_only_when_asked() -> None:
    assert by_kind(render(obj(MINIMAL)), "PodMonitor") == []
    (pm,) = by_kind(
        render(obj(with_({"monitoring": {"podMonitor": True, "labels": {"release": "kps"}}}))), "PodMonitor"
    )
    assert pm["metadata"]["labels"]["release"] == "kps"
    endpoint = pm["spec"]["podMetricsEndpoints"][0]
    assert endpoint["path"] == "/metrics" and endpoint["port"] == "http"
    assert {r["targetLabel"] for r in endpoint["relabelings"]} == {
        "specserve_instance",
        "specserve_pool",
        "specserve_mode",
    }


def test_adaptive_steps_edges() -> None:
    assert adaptive_steps(obj(with_({"strategy": "Adaptive", "switching.crossoverConcurrency": 0.5})).spec) == {
        "1": [0]
    }
    assert adaptive_steps(obj(with_({"strategy": "Adaptive", "switching.crossoverConcurrency": 7.2})).spec) == {
        "1": [3],
        "8": [0],
    }


# ------------------------------------------------------------------------------------------- capacity safety


def test_default_roll_stops_one_pod_then_starts_one() -> None:
    for deployment in by_kind(render(obj(MINIMAL)), "Deployment"):
        assert deployment["spec"]["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
        }


def test_max_surge_starts_new_pods_before_stopping_old_ones_per_pool() -> None:
    out = render(obj(with_({"pools": {"speculative": {"maxSurge": 2}, "baseline": {"replicas": 3}}})))
    spec_pool, base_pool = by_kind(out, "Deployment")
    assert spec_pool["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 2, "maxUnavailable": 0}
    assert base_pool["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}


def test_single_pool_strategies_take_the_speculative_pool_settings() -> None:
    spec = with_({"strategy": "Restart", "pools": {"speculative": {"maxSurge": 1, "autoscaling": "External"}}})
    (deployment,) = by_kind(render(obj(spec)), "Deployment")
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 1
    assert "replicas" not in deployment["spec"]


def test_external_autoscaling_leaves_replicas_to_the_autoscaler() -> None:
    out = render(obj(with_({"pools": {"speculative": {"replicas": 4, "autoscaling": "External"}}})))
    spec_pool, base_pool = by_kind(out, "Deployment")
    assert "replicas" not in spec_pool["spec"]
    assert base_pool["spec"]["replicas"] == 1


def test_every_serving_pool_gets_a_disruption_budget_of_one_pod() -> None:
    out = render(obj(with_({"pools": {"speculative": {"replicas": 3}, "baseline": {"replicas": 0}}})))
    (pdb,) = by_kind(out, "PodDisruptionBudget")  # none for the empty baseline pool
    spec_pool = by_kind(out, "Deployment")[0]
    assert pdb["metadata"]["name"] == spec_pool["metadata"]["name"]
    assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
    assert pdb["spec"]["selector"]["matchLabels"] == spec_pool["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


def test_autoscaled_pool_at_zero_replicas_still_gets_its_budget() -> None:
    spec = with_({"pools": {"baseline": {"replicas": 0, "autoscaling": "External"}}})
    assert len(by_kind(render(obj(spec)), "PodDisruptionBudget")) == 2


# ------------------------------------------------------------------------------------------------- security


def pod_spec(deployment: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return result


def test_engine_pods_run_unprivileged_and_without_an_api_token() -> None:
    for deployment in by_kind(render(obj(MINIMAL)), "Deployment"):
        pod = pod_spec(deployment)
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 1000  # the user images/sglang/Dockerfile runs as
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert container(deployment)["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }


def test_the_image_runs_as_the_user_the_pods_are_given() -> None:
    dockerfile = (ROOT / "images" / "sglang" / "Dockerfile").read_text(encoding="utf-8")
    assert "USER 1000:1000" in dockerfile


def test_run_as_root_is_an_explicit_choice_and_keeps_the_other_restrictions() -> None:
    deployment = by_kind(render(obj(with_({"engine.runAsUser": 0}))), "Deployment")[0]
    pod = pod_spec(deployment)
    assert pod["securityContext"]["runAsUser"] == 0
    assert "runAsNonRoot" not in pod["securityContext"] and "fsGroup" not in pod["securityContext"]
    assert container(deployment)["securityContext"]["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize(
    ("cache", "read_only"),
    [
        ({"hostPath": "/mnt/models"}, True),
        ({"hostPath": "/mnt/models", "readOnly": False}, False),
        ({"pvcName": "weights"}, False),
        ({"pvcName": "weights", "readOnly": True}, True),
    ],
)
def test_host_paths_mount_read_only_unless_asked(cache: dict[str, Any], read_only: bool) -> None:
    deployment = by_kind(render(obj(with_({"model.cache": cache}))), "Deployment")[0]
    (mount,) = [m for m in container(deployment)["volumeMounts"] if m["name"] == "model-cache"]
    assert mount["readOnly"] is read_only
    env = {e["name"]: e.get("value") for e in container(deployment)["env"]}
    assert env["HF_HOME"] == "/models"  # downloads land on the cache, not in the container's home


def test_user_hf_home_wins() -> None:
    spec = with_({"model.cache": {"pvcName": "w"}, "engine.env": [{"name": "HF_HOME", "value": "/models/hf"}]})
    env = container(by_kind(render(obj(spec)), "Deployment")[0])["env"]
    assert [e["value"] for e in env if e["name"] == "HF_HOME"] == ["/models/hf"]


def test_podmonitor_keeps_the_operator_labels_on_top() -> None:
    (pm,) = by_kind(
        render(obj(with_({"monitoring": {"podMonitor": True, "labels": {"release": "kps"}}}))), "PodMonitor"
    )
    assert pm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "specserve"
    assert pm["metadata"]["labels"]["specserve.io/instance"] == "m"


def test_no_network_policy_unless_asked() -> None:
    assert by_kind(render(obj(MINIMAL)), "NetworkPolicy") == []


def test_network_policy_lets_only_the_gateway_and_prometheus_reach_the_engine_port() -> None:
    spec = with_({"routing.gateway": {"name": "gw", "namespace": "gateway-system"}, "networkPolicy": {"enabled": True}})
    (policy,) = by_kind(render(obj(spec)), "NetworkPolicy")
    assert policy["spec"]["podSelector"] == {"matchLabels": {"specserve.io/instance": "m"}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    sources = [p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for p in rule["from"]]
    assert sources == ["gateway-system", "monitoring"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 30000}]


def test_network_policy_namespaces_can_be_named() -> None:
    spec = with_(
        {
            "networkPolicy": {
                "enabled": True,
                "gatewayNamespaces": ["envoy-gateway-system"],
                "prometheusNamespaces": ["obs", "obs"],
            }
        }
    )
    (policy,) = by_kind(render(obj(spec)), "NetworkPolicy")
    sources = [
        p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for p in policy["spec"]["ingress"][0]["from"]
    ]
    assert sources == ["envoy-gateway-system", "obs"]


def test_network_policy_admits_the_operator_when_it_scrapes_the_engines_itself() -> None:
    """metrics.source Direct: the operator reads each pod's /metrics; a policy without it starves the loop."""
    direct = with_({"networkPolicy": {"enabled": True}, "switching.metrics": {"source": "Direct"}})
    (policy,) = by_kind(render(obj(direct)), "NetworkPolicy")
    (rule,) = policy["spec"]["ingress"]
    operator = [p for p in rule["from"] if "podSelector" in p]
    assert operator == [{"namespaceSelector": {}, "podSelector": {"matchLabels": OPERATOR_POD_LABELS}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": 30000}]
    # Without sources otherwise, the operator alone is admitted (not all ingress denied).
    alone = with_({"strategy": "Restart", "routing": {}, "switching.metrics": {"source": "Direct"},
                   "networkPolicy": {"enabled": True, "prometheusNamespaces": []}})  # fmt: skip
    (policy,) = by_kind(render(obj(alone)), "NetworkPolicy")
    assert [p for p in policy["spec"]["ingress"][0]["from"]] == operator
    # Reading from Prometheus, the operator never connects to the pods: not admitted.
    (policy,) = by_kind(render(obj(with_({"networkPolicy": {"enabled": True}}))), "NetworkPolicy")
    assert all("podSelector" not in p for p in policy["spec"]["ingress"][0]["from"])


def test_network_policy_without_sources_denies_all_ingress() -> None:
    spec = with_({"strategy": "Restart", "routing": {}, "networkPolicy": {"enabled": True, "prometheusNamespaces": []}})
    (policy,) = by_kind(render(obj(spec)), "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in policy["spec"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_rendered_kind_is_owned_and_the_operator_may_manage_it(name: str) -> None:
    """The reconcile applies and prunes OWNED_KINDS only, with the verbs RBAC grants."""
    for manifest in render(obj(SCENARIOS[name])):
        kind = kind_of(manifest)
        assert kind in OWNED_KINDS
        for verb in ("get", "list", "create", "patch", "delete"):
            assert allows(REQUIRED_RULES, kind.group, kind.plural, verb), (kind.kind, verb)

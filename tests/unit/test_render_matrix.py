"""A seeded matrix of generated specs: whatever the front door (`parse_object`, as `specserve render` and the
operator call it) accepts must render objects the official Kubernetes schemas accept, and must pass the CRD's
schema and CEL rules too, so the API server would not refuse it either. Values are drawn from near the edges
(63/64-character labels, wildcards, escapes, quantities in every notation) so both outcomes occur."""

from __future__ import annotations

import copy
import random
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
from celpy.adapter import json_to_cel

from specserve.api import k8s_rules, rules
from specserve.api.rules import RULES
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.render import render
from tests.unit.test_api import MINIMAL
from tests.unit.test_crd import KUBERNETES_CEL_FUNCTIONS, schema, to_jsonschema
from tests.unit.test_render import BUILTIN, K8S_VERSION

SEED = 20261201
CASES = 200

# (accepted by Kubernetes, refused by it): the generator mostly picks the first, so most specs get through and
# the rest fail for one reason at a time.
LABEL_KEYS = (["team", "example.com/team", "a" * 63, "x.io/" + "b" * 63, "k8s.io/ok_1"], ["a" * 64, "Bad Key", "-x"])
LABEL_VALUES = (["", "v1", "a" * 63, "ok-1.2_3", "NVIDIA-H100-80GB-HBM3"], ["a" * 64, "a b", "-bad"])
HOSTNAMES = (["llm.example.com", "*.example.com", "a-b.c"], ["a.*.b", "https://x.io", "x.io:443", "UPPER.io"])
PATHS = (["/", "/v1", "/v1/", "/a%20b", "/~user", "/a.b"], ["/v1//x", "/a b", "/v1/..", "v1", "/x#y"])
QUANTITIES = (["1", "500m", "2Gi", "1.5", "1e3", "64Gi", "100Mi", "0.5Gi", "3Ti"], ["1GB", "1 Gi"])
ENV_NAMES = (["NCCL_DEBUG", "a.b-c", "HF_HOME", "_ok", "OMP_NUM_THREADS"], ["1BAD", "HF_TOKEN", "X=Y"])
TOLERATIONS: tuple[list[dict[str, Any]], list[dict[str, Any]]] = (
    [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"operator": "Exists"},
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 60},
        {"key": "dedicated", "operator": "Equal", "value": "llm"},
    ],
    [
        {"key": "k", "operator": "Exists", "value": "v"},
        {"operator": "Equal", "value": "v"},
        {"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5},
        {"key": "Bad Key"},
    ],
)


def pick(rng: random.Random, choices: tuple[list[Any], list[Any]]) -> Any:
    good, bad = choices
    return copy.deepcopy(rng.choice(good if rng.random() < 0.9 else bad))


def generate(rng: random.Random) -> dict[str, Any]:
    spec = copy.deepcopy(MINIMAL)
    spec["strategy"] = rng.choice(["TrafficSplit", "Restart", "Adaptive"])
    placement: dict[str, Any] = {}
    if rng.random() < 0.4:
        placement["nodeSelector"] = {pick(rng, LABEL_KEYS): pick(rng, LABEL_VALUES) for _ in range(rng.randint(1, 2))}
    if rng.random() < 0.4:
        placement["tolerations"] = [pick(rng, TOLERATIONS) for _ in range(rng.randint(0, 2))]
    if rng.random() < 0.3:
        placement["gpuProduct"] = pick(rng, LABEL_VALUES) or "NVIDIA-B200"
    spec["placement"] = placement
    if rng.random() < 0.4:
        hostnames = list(dict.fromkeys(pick(rng, HOSTNAMES) for _ in range(rng.randint(0, 2))))
        spec["routing"] = {"gateway": {"name": "gw"}, "hostnames": hostnames, "pathPrefix": pick(rng, PATHS)}
    engine: dict[str, Any] = {}
    if rng.random() < 0.4:
        kinds = rng.sample(["cpu", "memory", "ephemeral-storage"], rng.randint(1, 2))
        sides = rng.sample(["requests", "limits"], rng.randint(1, 2))
        engine["resources"] = {side: {k: pick(rng, QUANTITIES) for k in kinds} for side in sides}
    if rng.random() < 0.3:
        engine["env"] = [{"name": pick(rng, ENV_NAMES), "value": "1"} for _ in range(rng.randint(1, 2))]
    if rng.random() < 0.2:
        engine["runAsUser"] = rng.choice([0, 1000, 65532])
    spec["engine"] = engine
    if rng.random() < 0.3:
        spec["monitoring"] = {"podMonitor": True, "labels": {pick(rng, LABEL_KEYS): pick(rng, LABEL_VALUES)}}
    if rng.random() < 0.3:
        spec["model"]["cache"] = rng.choice(
            [{"pvcName": "w"}, {"hostPath": "/mnt/models"}, {"pvcName": "w", "readOnly": True}]
        )
    pools: dict[str, Any] = {}
    for pool in ("speculative", "baseline"):
        if rng.random() < 0.4:
            pools[pool] = {
                "replicas": rng.randint(0, 3),
                "maxSurge": rng.choice([0, 0, 1, 2]),
                "autoscaling": rng.choice(["Operator", "External"]),
            }
    spec["pools"] = pools
    if rng.random() < 0.3:
        spec["networkPolicy"] = {"enabled": True}
    return spec


def _labels_ok(labels: dict[str, str]) -> bool:
    return all(
        k8s_rules.label_key_problem(k) is None and k8s_rules.label_value_problem(v) is None for k, v in labels.items()
    )


def api_server_rules(manifest: dict[str, Any]) -> list[str]:
    """The validation the official schemas do not express, as the API server applies it to what we render."""
    problems = []
    if not _labels_ok(manifest["metadata"].get("labels", {})):
        problems.append("metadata.labels")
    if manifest["kind"] == "Deployment":
        pod = manifest["spec"]["template"]["spec"]
        if not _labels_ok(manifest["spec"]["template"]["metadata"]["labels"]):
            problems.append("pod labels")
        if not _labels_ok(pod.get("nodeSelector", {})):
            problems.append("nodeSelector")
        for t in pod.get("tolerations", []):
            if t.get("operator") == "Exists" and t.get("value"):
                problems.append("toleration value with Exists")
            if t.get("operator") == "Equal" and not t.get("key"):
                problems.append("toleration without key")
            if "tolerationSeconds" in t and t.get("effect") != "NoExecute":
                problems.append("tolerationSeconds without NoExecute")
        for c in pod["containers"]:
            res = c["resources"]
            for name, request in res.get("requests", {}).items():
                if name in res.get("limits", {}) and k8s_rules.request_above_limit(request, res["limits"][name]):
                    problems.append(f"request above limit: {name}")
            names = [e["name"] for e in c.get("env", [])]
            if len(set(names)) != len(names):
                problems.append("duplicate env")
    if manifest["kind"] == "HTTPRoute":
        for host in manifest["spec"].get("hostnames", []):
            if k8s_rules.hostname_problem(host):
                problems.append(f"hostname {host}")
        for rule in manifest["spec"]["rules"]:
            for match in rule["matches"]:
                if k8s_rules.path_problem(match["path"]["value"]):
                    problems.append("path")
    return problems


def _documents(cases: int = CASES) -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    return [
        {
            "apiVersion": "specserve.io/v1alpha1",
            "kind": "SpecServe",
            "metadata": {"name": f"m{i}", "namespace": "ns", "uid": "u"},
            "spec": generate(rng),
        }
        for i in range(cases)
    ]


@pytest.fixture(scope="module")
def cel_programs() -> list[tuple[str, Any]]:
    env = celpy.Environment()
    return [(r.field, env.program(env.compile(r.cel), functions=KUBERNETES_CEL_FUNCTIONS)) for r in RULES]


def check_matrix(cel_programs: list[tuple[str, Any]], documents: list[dict[str, Any]]) -> tuple[int, int, list[str]]:
    """(accepted, refused, problems): what the API server would refuse of what the front door accepted."""
    crd_schema = jsonschema.Draft7Validator(to_jsonschema(schema()))
    accepted = refused = 0
    problems: list[str] = []
    for document in documents:
        try:
            obj = parse_object(document)
        except InvalidSpecServe:
            refused += 1
            continue
        accepted += 1
        where = f"{document['metadata']['name']} {document['spec']}"
        # The API server would store it: the CRD's schema and every CEL rule accept the object as written.
        problems += [f"{where}: schema: {e.message}" for e in crd_schema.iter_errors(document)]
        activation = json_to_cel(obj.spec.model_dump(mode="json", by_alias=True, exclude_none=True))
        problems += [f"{where}: CEL {f}" for f, prog in cel_programs if not bool(prog.evaluate({"self": activation}))]
        for manifest in render(obj):
            if (manifest["apiVersion"], manifest["kind"]) in BUILTIN:
                try:
                    kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
                except kubernetes_validate.ValidationError as exc:
                    problems.append(f"{where}: {manifest['kind']}: {exc.message}")
            problems += [f"{where}: {manifest['kind']}: {p}" for p in api_server_rules(manifest)]
    return accepted, refused, problems


def test_everything_accepted_renders_what_kubernetes_accepts(cel_programs: list[tuple[str, Any]]) -> None:
    accepted, refused, problems = check_matrix(cel_programs, _documents())
    assert problems == []
    # The matrix is only worth something if it exercises both sides of the front door.
    assert accepted >= CASES // 5 and refused >= CASES // 5, (accepted, refused)


def test_the_matrix_catches_a_front_door_that_lets_too_much_in(
    cel_programs: list[tuple[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rules, "python_only", lambda spec: [])  # forget requests <= limits
    with_resources = [d for d in _documents() if "resources" in d["spec"]["engine"]]
    _, _, problems = check_matrix(cel_programs, with_resources)
    assert problems and all("request above limit" in p for p in problems)

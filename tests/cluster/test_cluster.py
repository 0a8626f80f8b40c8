"""The operator on a real control plane: kube-apiserver (TLS, RBAC, ServiceAccount tokens, real CRD defaulting and
validation), the real Deployment and ReplicaSet controllers, the scheduler placing GPU requests on matching kwok
nodes, and the operator run with the chart's ServiceAccount and RBAC. Every write the operator makes is read from
the API server's audit log.

One control plane and one operator for the file; each test works in its own namespace. The leader election test
replaces the operator, so it runs last."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.plugin.common import ANNOTATION_PAUSED
from tests.cluster.controlplane import (
    FAIL_ANNOTATION,
    OPERATOR_NS,
    OPERATOR_USER,
    ROOT,
    WRITE_VERBS,
    ControlPlane,
    wait_for,
)

RESYNC = 3  # --resync-seconds of the operator under test
JSON = dict[str, Any]
SPECSERVE = "specserves.specserve.io"


def example(name: str, namespace: str, **spec_overrides: Any) -> JSON:
    doc: JSON = yaml.safe_load((ROOT / "examples" / name).read_text(encoding="utf-8"))
    doc["metadata"]["namespace"] = namespace
    doc["spec"].update(copy.deepcopy(spec_overrides))
    return doc


@pytest.fixture(scope="module")
def operator(plane: ControlPlane) -> Iterator[ControlPlane]:
    """The operator, leader-elected on the chart's Lease, as the chart's ServiceAccount over TLS."""
    plane.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": "llm-serving"}, "value": 1000})  # fmt: skip
    plane.run_operator("pod-a", f"--resync-seconds={RESYNC}", "--full-resync-every=1")
    wait_for(lambda: holder(plane) == "pod-a", 90, "pod-a holding the Lease", interval=1)
    yield plane


def holder(plane: ControlPlane) -> str | None:
    out = plane.kubectl("get", "lease", "specserve", "-n", OPERATOR_NS, "-o", "json", check=False)
    return json.loads(out.stdout)["spec"].get("holderIdentity") if out.returncode == 0 else None


_namespaces = iter(range(1000))


def namespace(plane: ControlPlane, prefix: str) -> str:
    """A fresh namespace with what the examples reference: the model-cache and hf-cache claims (bound to
    hostPath volumes) and the hf-token Secret."""
    ns = f"{prefix}-{next(_namespaces)}"
    plane.kubectl("create", "namespace", ns)
    for claim in ("model-cache", "hf-cache"):
        pv = f"{ns}-{claim}"
        plane.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
                     "spec": {"capacity": {"storage": "10Ti"}, "accessModes": ["ReadOnlyMany", "ReadWriteMany"],
                              "hostPath": {"path": f"/models/{pv}"}, "storageClassName": "",
                              "claimRef": {"namespace": ns, "name": claim}}})  # fmt: skip
        plane.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": ns},
                     "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Ti"}},
                              "storageClassName": "", "volumeName": pv}})  # fmt: skip
    plane.kubectl("create", "secret", "generic", "hf-token", "-n", ns, "--from-literal=token=hf_test")
    return ns


def specserve(plane: ControlPlane, ns: str, name: str) -> JSON:
    return plane.get(SPECSERVE, name, "-n", ns)  # type: ignore[no-any-return]


def condition(obj: JSON, type_: str) -> JSON:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == type_), {})


def accept_routes(plane: ControlPlane, ns: str) -> None:
    """Play the Gateway controller: accept every HTTPRoute of `ns` at its current generation (the operator waits
    for that before it rolls a pool it drained)."""
    for route in plane.get("httproutes.gateway.networking.k8s.io", "-n", ns)["items"]:
        seen = [c.get("observedGeneration") for p in (route.get("status") or {}).get("parents") or []
                for c in p.get("conditions") or []]  # fmt: skip
        if seen and all(g == route["metadata"]["generation"] for g in seen):
            continue
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        parents = [{
            "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", **ref},
            "controllerName": "specserve.test/gateway",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "test gateway",
                            "lastTransitionTime": now, "observedGeneration": route["metadata"]["generation"]}],
        } for ref in route["spec"].get("parentRefs") or []]  # fmt: skip
        plane.kubectl("patch", "httproute", route["metadata"]["name"], "-n", ns, "--subresource=status",
                      "--type=merge", "-p", json.dumps({"status": {"parents": parents}}))  # fmt: skip


def wait_ready(plane: ControlPlane, ns: str, name: str, timeout: float = 180) -> JSON:
    def ready() -> JSON | None:
        accept_routes(plane, ns)
        obj = specserve(plane, ns, name)
        return obj if condition(obj, "Ready").get("status") == "True" else None

    return wait_for(ready, timeout, f"SpecServe {ns}/{name} Ready", interval=1)  # type: ignore[no-any-return]


def deployments(plane: ControlPlane, ns: str) -> dict[str, JSON]:
    return {d["metadata"]["name"]: d for d in plane.get("deployments", "-n", ns)["items"]}


def pods(plane: ControlPlane, ns: str) -> list[JSON]:
    return plane.get("pods", "-n", ns)["items"]  # type: ignore[no-any-return]


def quiet(plane: ControlPlane, ns: str, seconds: float, settle: float = 90) -> list[str]:
    """[] once the operator made no write in `ns` for `seconds` (within `settle` seconds of Ready: what it still
    reports after Ready, e.g. load unknown for three evaluations, is news, not a storm); else the last writes."""
    deadline = time.monotonic() + settle
    while True:
        start = plane.audit_count()
        time.sleep(seconds)
        writes = writes_in(plane, ns, start)
        if not writes or time.monotonic() > deadline:
            return writes


def writes_in(plane: ControlPlane, ns: str, start: int = 0) -> list[str]:
    """The operator's writes in `ns` (verb resource/name/subresource code), from its `start`-th audit event."""
    out = []
    for i, event in enumerate(plane.audit()):
        ref = event.get("objectRef") or {}
        if i >= start and event.get("verb") in WRITE_VERBS and ref.get("namespace") == ns:
            code = (event.get("responseStatus") or {}).get("code")
            out.append(f"{event['verb']} {ref.get('resource')}/{ref.get('name')}/{ref.get('subresource', '')} {code}")
    return out


# ------------------------------------------------------------------------------------------ the examples


def test_examples_apply_with_kubectl_place_on_their_gpus_and_settle_with_no_writes(operator: ControlPlane) -> None:
    plane = operator
    placed: dict[str, str] = {}
    for file, product in (("kimi-k25-rtxpro6000.yaml", "RTX-PRO-6000"), ("llama31-8b-h100.yaml", "H100"),
                          ("llama31-8b-h200.yaml", "H200")):  # fmt: skip
        ns = namespace(plane, "ex")
        doc = example(file, ns)
        plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))  # as a user would: client-side apply
        obj = wait_ready(plane, ns, doc["metadata"]["name"])
        assert condition(obj, "Ready")["reason"]
        for pod in pods(plane, ns):
            node = plane.get("node", pod["spec"]["nodeName"])
            assert product in node["metadata"]["labels"]["nvidia.com/gpu.product"], (file, node["metadata"]["name"])
            placed[pod["metadata"]["name"]] = node["metadata"]["name"]
        # A steady state under real defaulting (CRD defaults, Deployment and Service defaults, managedFields):
        # resync rounds every RESYNC seconds, and not one write.
        assert quiet(plane, ns, 4 * RESYNC) == [], f"{file}: the operator writes in a steady state"
    assert placed


# ------------------------------------------------------------------------------------------ R2 and R1


def test_a_non_bmp_character_in_an_env_value_applies(operator: ControlPlane) -> None:
    plane = operator
    ns = namespace(plane, "r2")
    doc = example("llama31-8b-h100.yaml", ns)
    doc["spec"]["engine"]["env"] = [{"name": "BANNER", "value": "serving 🚀 \U0001d11e"}]
    plane.apply(doc)
    wait_ready(plane, ns, doc["metadata"]["name"])
    for d in deployments(plane, ns).values():
        env = {e["name"]: e.get("value") for e in d["spec"]["template"]["spec"]["containers"][0].get("env", [])}
        assert env["BANNER"] == "serving 🚀 \U0001d11e"
    assert not [w for w in writes_in(plane, ns) if w.endswith(" 400")]


def test_the_old_encoding_is_refused_by_the_real_server(operator: ControlPlane) -> None:
    """What R2 fixed, shown on the real server: an ASCII-escaped (surrogate-pair) apply body is a 400."""
    plane = operator
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "emoji", "namespace": "default"},
                       "data": {"x": "🚀"}})  # fmt: skip
    assert "\\ud83d" in body
    out = plane.kubectl("patch", "configmap", "emoji", "-n", "default", "--type=apply", "--field-manager=t",
                        "-p", body, check=False)  # fmt: skip
    assert out.returncode != 0


def test_a_gpu_quota_refusing_pods_is_named_within_one_resync(operator: ControlPlane) -> None:
    plane = operator
    ns = namespace(plane, "r1")
    plane.apply({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu", "namespace": ns},
                 "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}})  # fmt: skip
    doc = example("llama31-8b-h100.yaml", ns)  # two pods of one GPU each: the quota admits one
    plane.apply(doc)
    name = doc["metadata"]["name"]

    def refused() -> bool:
        return any(c.get("type") == "ReplicaFailure" for d in deployments(plane, ns).values()
                   for c in (d.get("status") or {}).get("conditions") or [])  # fmt: skip

    wait_for(refused, 120, "the Deployment controller's ReplicaFailure", interval=0.5)
    seen = time.monotonic()

    def named() -> str:
        obj = specserve(plane, ns, name)
        messages = [c.get("reason", "") + ": " + c.get("message", "") for c in obj["status"].get("conditions", [])]
        return next((m for m in messages if "FailedCreate" in m and "exceeded quota" in m), "")

    message = wait_for(named, 2 * RESYNC + 30, "FailedCreate named in the SpecServe's status", interval=0.5)
    assert "nvidia.com/gpu" in message
    assert time.monotonic() - seen < 2 * RESYNC + 30


def test_a_podsecurity_warning_on_a_deployment_apply_is_logged_once_per_deployment(operator: ControlPlane) -> None:
    """The real API server's Warning header (PodSecurity's "would violate" in a namespace that warns on the restricted
    level; the pods are still admitted): the operator logs it at WARNING, once per Deployment. The default render
    meets the restricted level; an engine run as root (runAsUser 0, for images that need it) does not."""
    plane = operator
    ns = namespace(plane, "psa")
    plane.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/warn=restricted")
    doc = example("llama31-8b-h100.yaml", ns)
    doc["spec"]["engine"]["runAsUser"] = 0
    plane.apply(doc)
    wait_ready(plane, ns, doc["metadata"]["name"])
    names = list(deployments(plane, ns))
    assert names

    def logged() -> dict[str, int]:
        text = "".join(
            (plane.workdir / f"operator-{pod}.log").read_text(errors="replace")
            for pod in ("pod-a", "pod-b")
            if (plane.workdir / f"operator-{pod}.log").exists()
        )
        marks = ("WARNING", "the API server warns on", "would violate PodSecurity")
        lines = [line for line in text.splitlines() if all(m in line for m in marks)]
        seen = {n: sum(1 for line in lines if f"/namespaces/{ns}/deployments/{n}:" in line) for n in names}
        return seen if all(seen.values()) else {}

    seen = wait_for(logged, 60, "the PodSecurity warning in the operator's log", interval=1)
    time.sleep(3 * RESYNC)  # resync rounds: the same warning is not logged again
    assert logged() == seen == dict.fromkeys(names, 1)


# ------------------------------------------------------------------------------------------ rolls and failover


def sample(plane: ControlPlane, ns: str, name: str) -> tuple[dict[str, int], dict[str, int], dict[str, bool]]:
    """Route weights (read first: a pool is drained before its pods go), then per pool: ready pods and whether it
    is rolling (not yet complete)."""
    routes = plane.get("httproutes.gateway.networking.k8s.io", "-n", ns)["items"]
    weights: dict[str, int] = {}
    for route in routes:
        for rule in route["spec"].get("rules") or []:
            for ref in rule.get("backendRefs") or []:
                weights[ref["name"]] = weights.get(ref["name"], 0) + int(ref.get("weight", 1))
    ready, rolling = {}, {}
    for d_name, d in deployments(plane, ns).items():
        s = d.get("status") or {}
        ready[d_name] = int(s.get("readyReplicas") or 0)
        want = int(d["spec"].get("replicas") or 0)
        # Rolling until complete: with maxUnavailable 1 a one-pod pool is down (0 ready, 1 updated) mid-roll.
        rolling[d_name] = (s.get("observedGeneration") != d["metadata"]["generation"]
                           or int(s.get("replicas") or 0) > int(s.get("updatedReplicas") or 0)
                           or int(s.get("updatedReplicas") or 0) < want or ready[d_name] < want)  # fmt: skip
    return weights, ready, rolling


def test_a_change_rolls_one_pool_at_a_time_and_never_routes_to_a_pool_without_ready_pods(
    operator: ControlPlane,
) -> None:
    plane = operator
    ns = namespace(plane, "roll")
    doc = example("llama31-8b-h200.yaml", ns)
    plane.apply(doc)
    name = doc["metadata"]["name"]
    wait_ready(plane, ns, name)
    before = {n: d["spec"]["template"] for n, d in deployments(plane, ns).items()}
    doc["spec"]["engine"]["memFractionStatic"] = 0.77
    plane.apply(doc)
    samples = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        accept_routes(plane, ns)
        weights, ready, rolling = sample(plane, ns, name)
        samples.append((weights, ready, rolling))
        live = deployments(plane, ns)
        done = all(live[n]["spec"]["template"] != before[n] for n in before) and not any(rolling.values())
        if done and condition(specserve(plane, ns, name), "Ready").get("status") == "True":
            break
        time.sleep(0.3)
    else:
        pytest.fail(f"the roll did not finish: last samples {samples[-3:]}")
    assert any(any(r.values()) for _, _, r in samples), "no roll was ever seen: this proves nothing"
    for weights, ready, rolling in samples:
        assert sum(rolling.values()) <= 1, f"two pools rolled at once: {rolling}"
        assert sum(ready.values()) >= 1, f"no pool served: {ready}"
        for pool, weight in weights.items():
            assert weight == 0 or ready.get(pool, 0) >= 1, f"traffic routed to {pool} with no ready pod: {weights}"


def test_failover_when_kwok_takes_the_serving_pools_pods_away(operator: ControlPlane) -> None:
    plane = operator
    ns = namespace(plane, "fo")
    doc = example("llama31-8b-h200.yaml", ns)
    plane.apply(doc)
    name = doc["metadata"]["name"]
    wait_ready(plane, ns, name)
    weights, _, _ = sample(plane, ns, name)
    serving = [p for p, w in weights.items() if w > 0]
    assert serving, weights
    victim = serving[0]
    selector = deployments(plane, ns)[victim]["spec"]["selector"]["matchLabels"]
    labels = ",".join(f"{k}={v}" for k, v in selector.items())
    plane.kubectl("annotate", "pods", "-n", ns, "-l", labels, f"{FAIL_ANNOTATION}=true")

    def moved() -> dict[str, int] | None:
        accept_routes(plane, ns)
        w, ready, _ = sample(plane, ns, name)
        return w if ready.get(victim, 0) == 0 and w.get(victim, 0) == 0 and sum(w.values()) > 0 else None

    after = wait_for(moved, 60, f"traffic moved off {victim}", interval=0.5)
    assert any(w > 0 for p, w in after.items() if p != victim)


# ------------------------------------------------------------------------------------------ the kubectl plugin


def plugin(plane: ControlPlane, cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl specserve ARGS` as a user would run it (kubectl finds the plugin on PATH), with `cfg`."""
    return subprocess.run(["kubectl", "specserve", *args, f"--kubeconfig={cfg}"], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "KUBECONFIG": str(cfg)})  # fmt: skip


def test_the_kubectl_plugin_with_the_charts_view_and_edit_roles(operator: ControlPlane) -> None:
    plane = operator
    ns = namespace(plane, "plugin")
    doc = example("llama31-8b-h100.yaml", ns)
    plane.apply(doc)
    name = doc["metadata"]["name"]
    wait_ready(plane, ns, name)
    viewer = plane.user_kubeconfig("viewer", ns, "specserve-view")
    editor = plane.user_kubeconfig("editor", ns, "specserve-view", "specserve-edit")
    can_patch = plane.kubectl("auth", "can-i", "patch", SPECSERVE, "-n", ns, kubeconfig=viewer, check=False)
    assert can_patch.stdout.strip() == "no", can_patch

    for args in (("status", name), ("status",), ("explain", name), ("history", name)):
        out = plugin(plane, viewer, *args, "-n", ns)
        assert out.returncode == 0, (args, out.stdout, out.stderr)
        assert name in out.stdout or args[0] != "status", (args, out.stdout)
    out = plugin(plane, viewer, "status", "-A")  # the view role is bound in one namespace only
    assert out.returncode != 0 and "forbidden" in out.stderr, (out.stdout, out.stderr)

    out = plugin(plane, viewer, "pause", name, "-n", ns)
    assert out.returncode != 0, (out.stdout, out.stderr)
    assert "forbidden" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert ANNOTATION_PAUSED not in (specserve(plane, ns, name)["metadata"].get("annotations") or {})

    out = plugin(plane, editor, "pause", name, "-n", ns)
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert specserve(plane, ns, name)["metadata"]["annotations"][ANNOTATION_PAUSED] == "true"
    wait_for(lambda: condition(specserve(plane, ns, name), "Switching").get("reason") == "Paused", 60,
             "Switching=False, Paused in status", interval=1)  # fmt: skip
    out = plugin(plane, viewer, "status", name, "-n", ns)
    assert out.returncode == 0 and "paused" in out.stdout.lower(), (out.stdout, out.stderr)
    out = plugin(plane, editor, "resume", name, "-n", ns)
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert ANNOTATION_PAUSED not in (specserve(plane, ns, name)["metadata"].get("annotations") or {})


# ------------------------------------------------------------------------------------------ RBAC


@pytest.mark.parametrize(
    ("verb", "resource", "where", "allowed"),
    [
        ("patch", "deployments", "-n=default", True),
        ("patch", "specserves.specserve.io", "--subresource=status", True),
        ("update", "leases", f"-n={OPERATOR_NS}", True),
        ("create", "pods", "-n=default", False),
        ("update", "deployments", "-n=default", False),  # server-side apply only: no blind overwrite
        ("delete", "specserves.specserve.io", "-n=default", False),
        ("get", "secrets", "-n=default", False),
        ("delete", "nodes", "", False),
        ("create", "clusterrolebindings", "", False),
        ("escalate", "clusterroles", "", False),
        ("impersonate", "users", "", False),
        ("create", "pods/exec", "-n=default", False),
        ("delete", "customresourcedefinitions", "", False),
    ],
)
def test_the_chart_rbac_allows_what_the_operator_needs_and_not_more(
    operator: ControlPlane, verb: str, resource: str, where: str, allowed: bool
) -> None:
    args = ["auth", "can-i", verb, resource, f"--as={OPERATOR_USER}"] + ([where] if where else [])
    out = operator.kubectl(*args, check=False)
    assert out.stdout.strip() == ("yes" if allowed else "no"), (args, out.stdout, out.stderr)


def test_the_operator_was_never_refused_by_rbac(operator: ControlPlane) -> None:
    refused = [(e.get("verb"), e.get("objectRef")) for e in operator.audit()
               if (e.get("responseStatus") or {}).get("code") == 403]  # fmt: skip
    assert refused == []


# ------------------------------------------------------------------------------------------ leader election (last)


def test_a_standby_takes_the_lease_when_the_leader_dies_and_then_acts(operator: ControlPlane) -> None:
    plane = operator
    plane.run_operator("pod-b", f"--resync-seconds={RESYNC}", "--full-resync-every=1")
    time.sleep(5)
    assert holder(plane) == "pod-a"  # the standby waits
    plane.stop_process("operator-pod-a", signal.SIGKILL)
    wait_for(lambda: holder(plane) == "pod-b", 60, "pod-b holding the Lease", interval=0.5)
    ns = namespace(plane, "le")
    doc = example("llama31-8b-h100.yaml", ns)
    plane.apply(doc)
    wait_ready(plane, ns, doc["metadata"]["name"])


def test_no_process_died(operator: ControlPlane) -> None:
    for name, proc in operator.procs.items():
        assert proc.poll() is None, f"{name} exited:\n{operator.log_tail(name)}"

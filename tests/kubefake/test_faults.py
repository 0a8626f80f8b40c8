"""The fault-injection layer: refused writes by object, mutating admission, Deployment conditions and pod reasons,
other field managers, slow and hung calls by kind, and CRDs missing or removed at run time."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from specserve_kubefake import (
    CRDS,
    DEPLOYMENTS,
    HTTPROUTES,
    PODMONITORS,
    PODS,
    SERVICES,
    ApiError,
    FakeApiServer,
    PodState,
    admission,
)
from tests.kubefake.conftest import NS, deployment, namespace

Live = tuple[FakeApiServer, aiohttp.ClientSession]
DEPLOY_PATH = f"/apis/apps/v1/namespaces/{NS}/deployments"
ROUTE_PATH = f"/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/httproutes"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}


async def _json(resp: aiohttp.ClientResponse) -> Any:
    return json.loads(await resp.text())


def _route(name: str = "r") -> dict[str, Any]:
    spec = {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]}
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": name, "namespace": NS}, "spec": spec}  # fmt: skip


async def _apply(session: aiohttp.ClientSession, path: str, body: dict[str, Any], manager: str = "specserve") -> Any:
    async with session.patch(path, data=json.dumps(body), headers=APPLY, params={"fieldManager": manager}) as resp:
        return resp.status, await _json(resp)


# ------------------------------------------------------------------------------------------ refused writes


async def test_refused_writes_by_object_verb_status_and_count(live: Live) -> None:
    api, session = live
    api.create(deployment("a"))
    await _apply(session, f"{DEPLOY_PATH}/b", deployment("b"))
    api.faults.refuse("Deployment", name="a", status=403, message='admission webhook "gpu-policy" denied the request')
    # Apply, merge patch and PUT of "a" are refused with the status and message; "b" and reads of "a" pass.
    status, body = await _apply(session, f"{DEPLOY_PATH}/a", deployment("a", replicas=2))
    assert status == 403 and body["reason"] == "Forbidden" and "gpu-policy" in body["message"]
    async with session.patch(f"{DEPLOY_PATH}/a", json={"spec": {"replicas": 3}}, headers=MERGE) as resp:
        assert resp.status == 403
    current = api.get(DEPLOYMENTS, NS, "a")
    assert current is not None
    async with session.put(f"{DEPLOY_PATH}/a", json=current) as resp:
        assert resp.status == 403
    async with session.get(f"{DEPLOY_PATH}/a") as resp:
        assert resp.status == 200
    status, _ = await _apply(session, f"{DEPLOY_PATH}/b", deployment("b", replicas=2))
    assert status == 200
    assert api.get(DEPLOYMENTS, NS, "a")["spec"]["replicas"] == 1  # type: ignore[index]


async def test_refusal_counts_down_and_can_be_narrowed_to_a_verb_and_subresource(live: Live) -> None:
    api, session = live
    await _apply(session, f"{DEPLOY_PATH}/a", deployment("a"))
    fault = api.faults.refuse("apps/v1/deployments", verb="apply", status=409, times=2, message="conflict")
    codes = [(await _apply(session, f"{DEPLOY_PATH}/a", deployment("a", replicas=2)))[0] for _ in range(3)]
    assert codes == [409, 409, 200] and fault.hits == 2
    # A merge patch is not an apply; creation names the object in its body.
    api.faults.refuse("deployments", verb="create", name="c", status=500, message="etcd down")
    async with session.patch(f"{DEPLOY_PATH}/a", json={"spec": {"replicas": 3}}, headers=MERGE) as resp:
        assert resp.status == 200
    async with session.post(DEPLOY_PATH, json=deployment("c")) as resp:
        assert resp.status == 500 and (await _json(resp))["message"] == "etcd down"
    async with session.post(DEPLOY_PATH, json=deployment("d")) as resp:
        assert resp.status == 201
    # Status writes pass a refusal of the main resource (subresource "" by default) unless they are named.
    async with session.patch(f"{DEPLOY_PATH}/a/status", json={"status": {"replicas": 1}}, headers=MERGE) as resp:
        assert resp.status == 200
    api.faults.refuse("Deployment", verb="patch", subresource="status", status=422, name="a")
    async with session.patch(f"{DEPLOY_PATH}/a/status", json={"status": {"replicas": 2}}, headers=MERGE) as resp:
        assert resp.status == 422
    api.faults.remove(fault)
    api.faults.clear()
    async with session.patch(f"{DEPLOY_PATH}/a/status", json={"status": {"replicas": 2}}, headers=MERGE) as resp:
        assert resp.status == 200


async def test_deletes_are_refused_only_when_asked(live: Live) -> None:
    api, session = live
    api.create(deployment("a"))
    api.faults.refuse("Deployment", status=422)  # the default: writes that change, not deletes
    async with session.delete(f"{DEPLOY_PATH}/a") as resp:
        assert resp.status == 200
    api.create(deployment("b"))
    api.faults.refuse("Deployment", verb="delete", status=403, namespace=NS)
    async with session.delete(f"{DEPLOY_PATH}/b") as resp:
        assert resp.status == 403
    assert api.get(DEPLOYMENTS, NS, "b") is not None


def test_unknown_verb_is_a_clear_error(server: FakeApiServer) -> None:
    with pytest.raises(ValueError, match="unknown verb"):
        server.faults.refuse("Deployment", verb="edit")


# -------------------------------------------------------------------------------------- slow and hung calls


async def test_slow_and_hung_calls_by_kind_and_verb(live: Live) -> None:
    api, session = live
    api.create(deployment("a"))
    api.create(_route())
    api.faults.hang("HTTPRoute", verb="list")
    with pytest.raises(asyncio.TimeoutError):
        async with session.get(ROUTE_PATH, timeout=aiohttp.ClientTimeout(total=0.3)):
            pass
    async with session.get(DEPLOY_PATH) as resp:  # other kinds are served
        assert resp.status == 200
    async with session.get(f"{ROUTE_PATH}/r") as resp:  # a GET of one route is not a list
        assert resp.status == 200
    slow = api.faults.slow("Deployment", 0.2, verb="get")
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with session.get(f"{DEPLOY_PATH}/a") as resp:
        assert resp.status == 200
    assert loop.time() - started >= 0.2
    slow.cancel()
    started = loop.time()
    async with session.get(f"{DEPLOY_PATH}/a") as resp:
        assert resp.status == 200
    assert slow.hits == 1


# ------------------------------------------------------------------------------------- mutating admission


async def test_mutating_webhook_adds_to_the_pod_template_and_owns_what_it_added(live: Live) -> None:
    api, session = live
    hook = api.mutating_webhook("Deployment", admission.pod_template_annotation("sidecar.io/inject", "true"),
                                manager="sidecar-injector")  # fmt: skip
    api.mutating_webhook("Deployment", admission.pod_template_env("PROXY", "on", container="main"), manager="env")
    status, stored = await _apply(session, f"{DEPLOY_PATH}/web", deployment("web"))
    assert status == 201
    template = stored["spec"]["template"]
    assert template["metadata"]["annotations"] == {"sidecar.io/inject": "true"}
    assert template["spec"]["containers"][0]["env"] == [{"name": "PROXY", "value": "on"}]
    owners = {e["manager"]: json.dumps(e["fieldsV1"]) for e in stored["metadata"]["managedFields"]}
    assert "sidecar.io/inject" in owners["sidecar-injector"] and "sidecar.io/inject" not in owners["specserve"]
    assert "PROXY" in owners["env"] and "PROXY" not in owners["specserve"]
    # The same apply again is a no-op: the webhook's fields survive it and nothing changes.
    status, again = await _apply(session, f"{DEPLOY_PATH}/web", deployment("web"))
    assert status == 200
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert again["metadata"]["generation"] == 1
    # Status writes are not intercepted; an uninstalled webhook leaves later objects alone.
    hook.cancel()
    status, other = await _apply(session, f"{DEPLOY_PATH}/other", deployment("other"))
    assert "annotations" not in other["spec"]["template"]["metadata"]


def test_a_plain_webhook_leaves_its_fields_unowned_and_they_survive_applies(server: FakeApiServer) -> None:
    server.mutating_webhook("Deployment", admission.pod_template_annotation("policy/x", "1"), manager=None)
    stored = server.write_as("specserve", DEPLOYMENTS, NS, "web", deployment("web"))
    assert stored["spec"]["template"]["metadata"]["annotations"] == {"policy/x": "1"}
    assert all("policy/x" not in json.dumps(e["fieldsV1"]) for e in stored["metadata"]["managedFields"])
    again = server.write_as("specserve", DEPLOYMENTS, NS, "web", deployment("web", replicas=2))
    assert again["spec"]["template"]["metadata"]["annotations"] == {"policy/x": "1"}
    assert again["metadata"]["generation"] == 2  # only the replica change


def test_mutating_webhook_on_direct_writes_and_by_name(server: FakeApiServer) -> None:
    server.mutating_webhook("Service", lambda o: o["metadata"].setdefault("labels", {}).update({"mesh": "on"}),
                            name="only-me")  # fmt: skip
    svc: dict[str, Any] = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "only-me", "namespace": NS},
           "spec": {"ports": [{"port": 80}]}}  # fmt: skip
    assert server.create(svc)["metadata"]["labels"] == {"mesh": "on"}
    svc["metadata"]["name"] = "another"
    assert "labels" not in server.create(svc)["metadata"]
    assert server.get(SERVICES, NS, "only-me")["metadata"]["labels"] == {"mesh": "on"}  # type: ignore[index]


# ------------------------------------------------------------------------------------ other field managers


def test_write_as_another_manager_takes_the_field(server: FakeApiServer) -> None:
    server.write_as("specserve", DEPLOYMENTS, NS, "web", deployment("web", replicas=2))
    scaled = server.hpa_scale(NS, "web", 6)
    assert scaled["spec"]["replicas"] == 6
    owners = {e["manager"]: (e["operation"], json.dumps(e["fieldsV1"])) for e in scaled["metadata"]["managedFields"]}
    assert owners["horizontal-pod-autoscaler"][0] == "Update"
    assert "replicas" in owners["horizontal-pod-autoscaler"][1] and "replicas" not in owners["specserve"][1]
    # An apply that still sets replicas now conflicts with the HPA's field (409), unless forced.
    with pytest.raises(ApiError) as conflict:
        server.write_as("specserve", DEPLOYMENTS, NS, "web", deployment("web", replicas=2))
    assert conflict.value.status == 409 and "replicas" in conflict.value.message
    # kubectl edit: a PUT with the read resourceVersion, recorded under its own manager.
    edited = server.write_as("kubectl-edit", DEPLOYMENTS, NS, "web", {"metadata": {"labels": {"team": "x"}}},
                             verb="update")  # fmt: skip
    assert edited["metadata"]["labels"] == {"team": "x"}
    assert "kubectl-edit" in {e["manager"] for e in edited["metadata"]["managedFields"]}
    with pytest.raises(ValueError, match="verb"):
        server.write_as("x", DEPLOYMENTS, NS, "web", {}, verb="edit")


# ------------------------------------------------------------------------------ Deployment conditions and pods


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def test_pods_with_reasons_and_status_counts_that_match(server: FakeApiServer) -> None:
    server.create(deployment("web", replicas=2))
    states: list[PodState | str] = [PodState("Ready", updated=False), PodState("ImagePullBackOff"),
                                    PodState("OOMKilled"), PodState("Unschedulable"), PodState("CrashLoopBackOff"),
                                    "Pending"]  # fmt: skip
    pods = server.set_pods(NS, "web", states)
    assert len(server.list(PODS, NS)) == 6
    by_state = dict(zip([s if isinstance(s, str) else s.state for s in states], pods, strict=True))
    pull = by_state["ImagePullBackOff"]["status"]
    assert pull["phase"] == "Pending"
    assert pull["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
    oom = by_state["OOMKilled"]["status"]["containerStatuses"][0]
    assert oom["lastState"]["terminated"]["reason"] == "OOMKilled" and oom["lastState"]["terminated"]["exitCode"] == 137
    assert oom["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    sched = _condition(by_state["Unschedulable"], "PodScheduled")
    assert sched["status"] == "False" and sched["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in sched["message"]
    assert _condition(by_state["Ready"], "Ready")["status"] == "True"
    assert _condition(by_state["Pending"], "Ready")["status"] == "False"
    # Pods carry the template's labels and a hash that differs between old and new template.
    hashes = {p["metadata"]["labels"]["pod-template-hash"] for p in pods}
    assert len(hashes) == 2 and all(p["metadata"]["labels"]["app"] == "web" for p in pods)
    status = server.get(DEPLOYMENTS, NS, "web")["status"]  # type: ignore[index]
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"]) == (6, 5, 1)
    assert status["unavailableReplicas"] == 1
    progressing = _condition(server.get(DEPLOYMENTS, NS, "web") or {}, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "ReplicaSetUpdated")
    # Replacing the pods replaces them; deleting the Deployment collects them.
    server.set_pods(NS, "web", ["Ready", "Ready"])
    assert len(server.list(PODS, NS)) == 2
    assert server.get(DEPLOYMENTS, NS, "web")["status"]["readyReplicas"] == 2  # type: ignore[index]


def test_progress_deadline_exceeded_keeps_the_counts(server: FakeApiServer) -> None:
    server.create(deployment("web"))
    server.set_pods(NS, "web", ["CrashLoopBackOff"])
    stored = server.set_progress_deadline_exceeded(NS, "web")
    cond = _condition(stored, "Progressing")
    assert (cond["status"], cond["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert "has timed out progressing" in cond["message"]
    assert stored["status"]["updatedReplicas"] == 1 and "readyReplicas" not in stored["status"]
    assert stored["status"]["observedGeneration"] == stored["metadata"]["generation"]


async def test_a_stalled_rollout_keeps_old_pods_and_reports_the_deadline() -> None:
    async with FakeApiServer(auto_ready=True) as api:
        api.create(namespace())
        api.create(deployment("web", replicas=2, strategy={"type": "RollingUpdate", "rollingUpdate":
                                                            {"maxSurge": 1, "maxUnavailable": 0}}))  # fmt: skip
        assert api.get(DEPLOYMENTS, NS, "web")["status"]["readyReplicas"] == 2  # type: ignore[index]
        api.stall_rollouts(NS, "web", "ImagePullBackOff", deadline=0.2)
        template = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:9.9"}]}}}}
        api.patch(DEPLOYMENTS, NS, "web", template)
        status = api.get(DEPLOYMENTS, NS, "web")["status"]  # type: ignore[index]
        assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"]) == (3, 1, 2)
        assert status["observedGeneration"] == 2
        states = [p["status"]["containerStatuses"][0]["state"] for p in api.list(PODS, NS)]
        assert sorted(next(iter(s)) for s in states) == ["running", "running", "waiting"]
        assert [s["waiting"]["reason"] for s in states if "waiting" in s] == ["ImagePullBackOff"]
        assert _condition(api.get(DEPLOYMENTS, NS, "web") or {}, "Progressing")["status"] == "True"
        await asyncio.sleep(0.4)
        cond = _condition(api.get(DEPLOYMENTS, NS, "web") or {}, "Progressing")
        assert cond["reason"] == "ProgressDeadlineExceeded"
        # Fixed: the rollout completes (auto_ready) and the pods the stall made go.
        api.unstall_rollouts(NS, "web")
        status = api.get(DEPLOYMENTS, NS, "web")["status"]  # type: ignore[index]
        assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"]) == (2, 2, 2)
        assert _condition(api.get(DEPLOYMENTS, NS, "web") or {}, "Progressing")["status"] == "True"
        assert api.list(PODS, NS) == []


def test_a_replica_only_change_is_no_stalled_rollout_but_resizes_one_in_progress() -> None:
    api = FakeApiServer(auto_ready=True)
    api.create(namespace())
    api.create(deployment("web", replicas=2))
    api.stall_rollouts(NS, "web", "CrashLoopBackOff", deadline=60)
    scaled = api.hpa_scale(NS, "web", 3)  # same template: the controller scales, nothing stalls
    assert (scaled["metadata"]["generation"], scaled["spec"]["replicas"]) == (2, 3)
    status = api.get(DEPLOYMENTS, NS, "web")["status"]  # type: ignore[index]
    assert (status["readyReplicas"], status["updatedReplicas"], status["observedGeneration"]) == (3, 3, 2)
    api.patch(DEPLOYMENTS, NS, "web", {"spec": {"template": {"metadata": {"annotations": {"x": "1"}}}}})
    assert api.get(DEPLOYMENTS, NS, "web")["status"]["updatedReplicas"] == 1  # type: ignore[index]
    api.hpa_scale(NS, "web", 4)  # during the stalled rollout: still stalled, on the new size
    status = api.get(DEPLOYMENTS, NS, "web")["status"]  # type: ignore[index]
    assert status["updatedReplicas"] < 4 and status["observedGeneration"] == 4


def test_a_stalled_one_replica_pool_without_surge_is_off_the_air(server: FakeApiServer) -> None:
    server.create(deployment("web", strategy={"type": "RollingUpdate", "rollingUpdate":
                                              {"maxSurge": 0, "maxUnavailable": 1}}))  # fmt: skip
    server.set_deployment_ready(NS, "web")
    server.stall_rollouts(NS, "web", "OOMKilled", deadline=0)
    server.patch(DEPLOYMENTS, NS, "web", {"spec": {"template": {"metadata": {"annotations": {"x": "1"}}}}})
    stored = server.get(DEPLOYMENTS, NS, "web") or {}
    assert "readyReplicas" not in stored["status"] and stored["status"]["updatedReplicas"] == 1
    assert _condition(stored, "Progressing")["reason"] == "ProgressDeadlineExceeded"
    # Available stays True: with maxUnavailable 1 of 1 replica, zero available pods is the minimum.
    assert _condition(stored, "Available")["status"] == "True"
    with pytest.raises(ValueError, match="pod state"):
        server.stall_rollouts(NS, "web", "Exploded")


def test_lose_pods(server: FakeApiServer) -> None:
    server.create(deployment("web", replicas=3))
    server.set_deployment_ready(NS, "web")
    lost = server.lose_pods(NS, "web")
    assert "readyReplicas" not in lost["status"] and lost["status"]["unavailableReplicas"] == 3


# ------------------------------------------------------------------------------------------- missing CRDs


async def test_remove_and_reinstall_an_optional_crd_at_run_time(live: Live) -> None:
    api, session = live
    api.create(_route())
    async with session.get(ROUTE_PATH, params={"watch": "true", "timeoutSeconds": "5"}) as watch:
        first = json.loads(await watch.content.readline())
        assert first["type"] == "ADDED"
        api.remove_crd(HTTPROUTES)
        deleted = json.loads(await watch.content.readline())
        assert deleted["type"] == "DELETED"
        assert await asyncio.wait_for(watch.content.read(), 2) == b""  # the watch ends
    async with session.get(ROUTE_PATH) as resp:
        assert resp.status == 404
    async with session.get("/apis") as resp:
        assert "gateway.networking.k8s.io" not in {g["name"] for g in (await _json(resp))["groups"]}
    assert "httproutes.gateway.networking.k8s.io" not in {c["metadata"]["name"] for c in api.list(CRDS)}
    status, _ = await _apply(session, f"{ROUTE_PATH}/r", _route())
    assert status == 404
    api.install_crd(HTTPROUTES)
    async with session.get(ROUTE_PATH) as resp:
        assert resp.status == 200 and (await _json(resp))["items"] == []
    status, _ = await _apply(session, f"{ROUTE_PATH}/r", _route())
    assert status == 201


async def test_a_cluster_started_without_the_gateway_api_can_get_it_later() -> None:
    async with FakeApiServer(gateway_api=False) as api, aiohttp.ClientSession(base_url=api.url) as session:
        api.create(namespace())
        async with session.get(ROUTE_PATH) as resp:
            assert resp.status == 404
        api.install_crd(HTTPROUTES)
        async with session.get(ROUTE_PATH) as resp:
            assert resp.status == 200
        api.remove_crd(PODMONITORS)
        async with session.get(f"/apis/monitoring.coreos.com/v1/namespaces/{NS}/podmonitors") as resp:
            assert resp.status == 404
        with pytest.raises(ValueError, match="built-in"):
            api.remove_crd(DEPLOYMENTS)


# ------------------------------------------------------------------------------------------ gateway stand-in


def _accepted_generation(route: dict[str, Any]) -> set[Any]:
    return {c.get("observedGeneration") for p in route["status"]["parents"] for c in p["conditions"]}


async def test_the_gateway_stand_in_accepts_each_route_generation_after_its_delay() -> None:
    async with FakeApiServer(accept_routes=0.2) as api:
        api.create(namespace())
        api.create(_route())
        assert "status" not in (api.get(HTTPROUTES, NS, "r") or {})  # not yet: the gateway takes its time
        await asyncio.sleep(0.4)
        assert _accepted_generation(api.get(HTTPROUTES, NS, "r") or {}) == {1}
        api.patch(HTTPROUTES, NS, "r", {"spec": {"rules": [{"backendRefs": [{"name": "svc", "port": 81}]}]}})
        assert _accepted_generation(api.get(HTTPROUTES, NS, "r") or {}) == {1}
        await asyncio.sleep(0.4)
        route = api.get(HTTPROUTES, NS, "r") or {}
        assert _accepted_generation(route) == {2}
        assert route["status"]["parents"][0]["conditions"][0]["status"] == "True"


def test_the_gateway_stand_in_at_once_and_refusing() -> None:
    api = FakeApiServer(accept_routes=0)
    api.create(namespace())
    api.create(_route())
    assert _accepted_generation(api.get(HTTPROUTES, NS, "r") or {}) == {1}
    assert api.gateway is not None
    api.gateway.accepted = False
    api.patch(HTTPROUTES, NS, "r", {"spec": {"hostnames": ["llm.example.com"]}})
    route = api.get(HTTPROUTES, NS, "r") or {}
    assert route["status"]["parents"][0]["conditions"][0]["status"] == "False"

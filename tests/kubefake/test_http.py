"""The HTTP surface: discovery as kopf scans it, LIST selectors, WATCH streams, patch formats, faults."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from specserve_kubefake import DEPLOYMENTS, FakeApiServer
from tests.kubefake.conftest import NS, deployment

Live = tuple[FakeApiServer, aiohttp.ClientSession]
DEPLOY_PATH = f"/apis/apps/v1/namespaces/{NS}/deployments"


async def _json(resp: aiohttp.ClientResponse) -> Any:
    return json.loads(await resp.text())


async def test_discovery_lists_resources_with_verbs_and_subresources(live: Live) -> None:
    _, session = live
    async with session.get("/apis") as resp:
        groups = {g["name"]: g for g in (await _json(resp))["groups"]}
    assert {"apps", "specserve.io", "gateway.networking.k8s.io", "monitoring.coreos.com"} <= groups.keys()
    assert groups["specserve.io"]["preferredVersion"]["version"] == "v1alpha1"
    async with session.get("/apis/specserve.io/v1alpha1") as resp:
        resources = {r["name"]: r for r in (await _json(resp))["resources"]}
    assert {"list", "watch", "patch"} <= set(resources["specserves"]["verbs"])
    assert "specserves/status" in resources
    async with session.get("/api/v1") as resp:
        core = {r["name"]: r for r in (await _json(resp))["resources"]}
    assert core["namespaces"]["namespaced"] is False and core["pods"]["namespaced"] is True
    async with session.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions") as resp:
        names = {c["metadata"]["name"] for c in (await _json(resp))["items"]}
    assert "specserves.specserve.io" in names


async def test_a_cluster_without_the_prometheus_operator_answers_404() -> None:
    async with FakeApiServer(prometheus_operator=False) as api, aiohttp.ClientSession(base_url=api.url) as session:
        async with session.get(f"/apis/monitoring.coreos.com/v1/namespaces/{NS}/podmonitors") as resp:
            assert resp.status == 404
            assert (await _json(resp))["reason"] == "NotFound"
        async with session.get("/apis") as resp:
            assert "monitoring.coreos.com" not in {g["name"] for g in (await _json(resp))["groups"]}


async def test_list_with_label_selectors(live: Live) -> None:
    api, session = live
    for name, labels in (("a", {"tier": "gpu", "pool": "spec"}), ("b", {"tier": "gpu"}), ("c", {"tier": "cpu"})):
        body = deployment(name)
        body["metadata"]["labels"] = labels
        api.create(body)
    cases = {"tier=gpu": {"a", "b"}, "pool": {"a"}, "!pool": {"b", "c"}, "tier in (cpu,gpu),tier!=gpu": {"c"},
             "tier notin (gpu)": {"c"}, "": {"a", "b", "c"}}  # fmt: skip
    for selector, expected in cases.items():
        async with session.get(DEPLOY_PATH, params={"labelSelector": selector}) as resp:
            listed = await _json(resp)
        assert {i["metadata"]["name"] for i in listed["items"]} == expected, selector
        assert "kind" not in listed["items"][0]  # built-in list items carry no kind, as on a real server
    async with session.get(DEPLOY_PATH, params={"fieldSelector": "metadata.name=b"}) as resp:
        assert [i["metadata"]["name"] for i in (await _json(resp))["items"]] == ["b"]


async def test_label_selected_lists_follow_relabels_and_deletions(live: Live) -> None:
    api, session = live
    for name in ("a", "b"):
        body = deployment(name)
        body["metadata"]["labels"] = {"tier": "gpu"}
        api.create(body)
    api.patch(DEPLOYMENTS, NS, "a", {"metadata": {"labels": {"tier": "cpu"}}})
    api.delete(DEPLOYMENTS, NS, "b")
    api.create(deployment("c"))
    api.patch(DEPLOYMENTS, NS, "c", {"metadata": {"labels": {"tier": "gpu", "app": None}}})
    for selector, expected in {"tier=gpu": ["c"], "tier==cpu": ["a"], "tier=gpu,app=c": [], "app=b": []}.items():
        async with session.get(DEPLOY_PATH, params={"labelSelector": selector}) as resp:
            assert [i["metadata"]["name"] for i in (await _json(resp))["items"]] == expected, selector


async def test_watch_streams_events_from_a_resource_version(live: Live) -> None:
    api, session = live
    api.create(deployment("before"))
    async with session.get(DEPLOY_PATH) as resp:
        rv = (await _json(resp))["metadata"]["resourceVersion"]
    params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "2"}
    async with session.get(DEPLOY_PATH, params=params) as resp:
        api.create(deployment("web"))
        api.patch(DEPLOYMENTS, NS, "web", {"spec": {"replicas": 2}})
        api.delete(DEPLOYMENTS, NS, "web")
        events = [json.loads(await resp.content.readline()) for _ in range(3)]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "web"), ("MODIFIED", "web"), ("DELETED", "web")
    ]  # fmt: skip
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)


async def test_watch_without_a_resource_version_starts_with_the_current_objects(live: Live) -> None:
    api, session = live
    api.create(deployment("web"))
    started = asyncio.get_running_loop().time()
    async with session.get(DEPLOY_PATH, params={"watch": "true", "timeoutSeconds": "1"}) as resp:
        lines = [json.loads(line) async for line in resp.content]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "web")]
    assert asyncio.get_running_loop().time() - started >= 0.9  # the stream ended by timeoutSeconds


async def test_json_patch_with_test_and_merge_patch_of_finalizers(live: Live) -> None:
    api, session = live
    rv = api.create(deployment("web"))["metadata"]["resourceVersion"]
    headers = {"Content-Type": "application/json-patch+json"}
    marker = ["kopf.zalando.org/KopfFinalizerMarker"]
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv},
           {"op": "add", "path": "/metadata/finalizers", "value": marker}]  # fmt: skip
    async with session.patch(f"{DEPLOY_PATH}/web", data=json.dumps(ops), headers=headers) as resp:
        assert resp.status == 200
    async with session.patch(f"{DEPLOY_PATH}/web", data=json.dumps(ops), headers=headers) as resp:
        assert resp.status == 422  # the test op sees a newer resourceVersion
    merge = {"Content-Type": "application/merge-patch+json"}
    async with session.patch(f"{DEPLOY_PATH}/web", json={"spec": {"replicas": 2}}, headers=merge) as resp:
        assert (await _json(resp))["metadata"]["generation"] == 2


async def test_faults_answer_delay_and_hang(live: Live) -> None:
    api, session = live
    api.create(deployment("web"))
    fault = api.faults.add(method="GET", path=r"/deployments/web$", status=500, times=1)
    async with session.get(f"{DEPLOY_PATH}/web") as resp:
        assert resp.status == 500 and (await _json(resp))["kind"] == "Status"
    async with session.get(f"{DEPLOY_PATH}/web") as resp:
        assert resp.status == 200  # times=1: used up
    assert fault.hits == 1
    api.faults.add(method="PATCH", path="/deployments/", status=409, times=None)
    for _ in range(2):
        async with session.patch(
            f"{DEPLOY_PATH}/web", json={}, headers={"Content-Type": "application/merge-patch+json"}
        ) as resp:
            assert resp.status == 409
    api.faults.add(method="GET", path="/deployments/web$", hang=True)
    with pytest.raises(asyncio.TimeoutError):
        async with session.get(f"{DEPLOY_PATH}/web", timeout=aiohttp.ClientTimeout(total=0.3)):
            pass
    api.faults.add(method="GET", path="/deployments/web$", delay=0.2)
    started = asyncio.get_running_loop().time()
    async with session.get(f"{DEPLOY_PATH}/web") as resp:
        assert resp.status == 200
    assert asyncio.get_running_loop().time() - started >= 0.2


async def test_server_side_apply_over_http_and_the_request_log(live: Live) -> None:
    api, session = live
    start = len(api.requests)
    headers = {"Content-Type": "application/apply-patch+yaml"}
    url = f"{DEPLOY_PATH}/web?fieldManager=specserve&force=true"
    async with session.patch(url, data=json.dumps(deployment("web")), headers=headers) as resp:
        assert resp.status == 201
    async with session.patch(url, data=json.dumps(deployment("web")), headers=headers) as resp:
        assert resp.status == 200
    async with session.get(f"{DEPLOY_PATH}/web"):
        pass
    writes = api.writes_since(start)
    assert [(w.method, w.resource, w.name, w.status) for w in writes] == [
        ("PATCH", DEPLOYMENTS, "web", 201), ("PATCH", DEPLOYMENTS, "web", 200)
    ]  # fmt: skip
    assert writes[0].content_type == "application/apply-patch+yaml" and writes[0].query["fieldManager"] == "specserve"
    assert api.requests[-1].verb == "get"


async def test_watch_from_a_resource_version_older_than_the_history_is_gone() -> None:
    async with FakeApiServer(history=3) as api, aiohttp.ClientSession(base_url=api.url) as session:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for i in range(5):
            api.create(deployment(f"d{i}"))
        params = {"watch": "true", "resourceVersion": "1", "timeoutSeconds": "1"}
        async with session.get(DEPLOY_PATH, params=params) as resp:
            event = json.loads(await resp.content.readline())
    assert event["type"] == "ERROR" and event["object"]["code"] == 410


async def test_strategic_merge_patch_merges_containers_by_name(live: Live) -> None:
    api, session = live
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox:1"})
    api.create(body)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox:2"}]}}}}
    headers = {"Content-Type": "application/strategic-merge-patch+json"}
    async with session.patch(f"{DEPLOY_PATH}/web", json=patch, headers=headers) as resp:
        containers = (await _json(resp))["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("main", "nginx:1.27"), ("side", "busybox:2")]
    specserve = f"/apis/specserve.io/v1alpha1/namespaces/{NS}/specserves/x"
    async with session.patch(specserve, json={}, headers=headers) as resp:
        assert resp.status in (404, 415)  # custom resources take no strategic merge patch


async def test_auto_ready_marks_each_new_generation_ready() -> None:
    async with FakeApiServer(auto_ready=True) as api:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        api.create(deployment("web", replicas=2))
        status = (api.get(DEPLOYMENTS, NS, "web") or {})["status"]
        assert status["readyReplicas"] == 2 and status["observedGeneration"] == 1
        api.patch(DEPLOYMENTS, NS, "web", {"spec": {"replicas": 3}})
        status = (api.get(DEPLOYMENTS, NS, "web") or {})["status"]
        assert status["readyReplicas"] == 3 and status["observedGeneration"] == 2


def test_set_deployment_ready_reports_partial_readiness(server: FakeApiServer) -> None:
    server.create(deployment("web", replicas=2))
    status = server.set_deployment_ready(NS, "web", ready=0)["status"]
    assert status["observedGeneration"] == 1 and status["updatedReplicas"] == 2
    assert "readyReplicas" not in status and status["unavailableReplicas"] == 2  # zero counts are omitempty
    status = server.set_deployment_ready(NS, "web", ready=1)["status"]
    assert status["readyReplicas"] == 1 and status["availableReplicas"] == 1
    assert server.set_deployment_ready(NS, "web")["status"]["readyReplicas"] == 2


async def test_the_request_log_can_be_off() -> None:
    async with FakeApiServer(record_requests=False) as api, aiohttp.ClientSession(base_url=api.url) as session:
        async with session.get("/api/v1/namespaces") as resp:
            assert resp.status == 200
        assert api.requests == []


async def test_observed_rollouts_catch_up_on_generation_but_not_on_readiness() -> None:
    async with FakeApiServer(observe_rollouts=True) as api:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        api.create(deployment("web", strategy={"type": "RollingUpdate",
                                               "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}))  # fmt: skip
        api.set_deployment_ready(NS, "web")
        image = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:1.28"}]}}}}
        api.patch(DEPLOYMENTS, NS, "web", image)
        rolling = (api.get(DEPLOYMENTS, NS, "web") or {})["status"]
        assert rolling["observedGeneration"] == 2
        assert "updatedReplicas" not in rolling and "readyReplicas" not in rolling  # the one old pod went first
        assert rolling["unavailableReplicas"] == 1
        done = api.set_deployment_ready(NS, "web")["status"]
        assert done["updatedReplicas"] == 1 and done["readyReplicas"] == 1 and "unavailableReplicas" not in done

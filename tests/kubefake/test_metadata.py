"""uid, resourceVersion, generation and the status subresource, as the API server assigns them."""

from __future__ import annotations

import pytest

from specserve_kubefake import DEPLOYMENTS, SPECSERVES, ApiError, FakeApiServer
from tests.kubefake.conftest import NS, deployment, kimi


def test_create_assigns_uid_resource_version_and_generation(server: FakeApiServer) -> None:
    body = deployment()
    body["metadata"].update({"uid": "mine", "resourceVersion": "999", "generation": 7})
    created = server.create(body)
    meta = created["metadata"]
    assert meta["uid"] != "mine" and len(meta["uid"]) == 36  # the server's, not the client's
    assert meta["generation"] == 1
    assert int(meta["resourceVersion"]) > 0 and meta["resourceVersion"] != "999"
    assert meta["creationTimestamp"].endswith("Z")
    other = server.create(deployment("other"))
    assert int(other["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])  # one global counter


def test_generation_counts_spec_changes_only(server: FakeApiServer) -> None:
    server.create(deployment())
    after_labels = server.patch(DEPLOYMENTS, NS, "web", {"metadata": {"labels": {"team": "a"}}})
    assert after_labels["metadata"]["generation"] == 1
    after_spec = server.patch(DEPLOYMENTS, NS, "web", {"spec": {"replicas": 3}})
    assert after_spec["metadata"]["generation"] == 2
    after_status = server.set_deployment_ready(NS, "web")
    assert after_status["metadata"]["generation"] == 2
    assert after_status["status"]["observedGeneration"] == 2
    assert int(after_status["metadata"]["resourceVersion"]) > int(after_spec["metadata"]["resourceVersion"])


def test_a_write_that_changes_nothing_keeps_the_resource_version(server: FakeApiServer) -> None:
    before = server.create(deployment())
    again = server.patch(DEPLOYMENTS, NS, "web", {"spec": {"replicas": 1}})
    assert again["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_status_merge_patch_changes_only_status(server: FakeApiServer) -> None:
    created = server.create(kimi())
    assert "status" not in created  # a create does not set status through the main resource
    weights = {"speculative": 0, "baseline": 100}
    server.patch_status(SPECSERVES, NS, "kimi-k25", {"activeMode": "Baseline", "weights": weights})
    patched = server.patch_status(
        SPECSERVES, NS, "kimi-k25", {"weights": None, "conditions": [{"type": "Ready", "status": "False",
                                                                      "reason": "PoolsNotReady", "message": "",
                                                                      "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    )  # fmt: skip
    assert patched["spec"] == created["spec"]
    assert patched["metadata"]["generation"] == 1
    assert "weights" not in patched["status"]  # deleted only because it was sent as null
    assert patched["status"]["activeMode"] == "Baseline"  # kept: merge patch, not replace


def test_main_resource_patch_ignores_status(server: FakeApiServer) -> None:
    server.create(kimi())
    patched = server.patch(SPECSERVES, NS, "kimi-k25", {"status": {"activeMode": "Speculative"}})
    assert "status" not in patched


def test_status_patch_cannot_change_spec(server: FakeApiServer) -> None:
    created = server.create(deployment())
    rt = server.registry.get(DEPLOYMENTS)
    assert rt is not None
    result = server.store.patch(rt, NS, "web", "merge", {"spec": {"replicas": 5}, "status": {"replicas": 1}},
                                subresource="status")  # fmt: skip
    assert result["spec"]["replicas"] == created["spec"]["replicas"]
    assert result["status"]["replicas"] == 1


def test_create_conflicts_and_generate_name(server: FakeApiServer) -> None:
    server.create(deployment())
    with pytest.raises(ApiError) as exists:
        server.create(deployment())
    assert exists.value.status == 409 and exists.value.reason == "AlreadyExists"
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "kimi-k25.", "namespace": NS},
             "involvedObject": {"kind": "SpecServe", "name": "kimi-k25"}, "reason": "X", "message": "y"}  # fmt: skip
    first, second = server.create(event), server.create(event)
    assert first["metadata"]["name"].startswith("kimi-k25.") and len(first["metadata"]["name"]) == len("kimi-k25.") + 5
    assert first["metadata"]["name"] != second["metadata"]["name"]


def test_put_needs_the_current_resource_version(server: FakeApiServer) -> None:
    created = server.create(deployment())
    rt = server.registry.get(DEPLOYMENTS)
    assert rt is not None
    stale = {**created, "spec": {**created["spec"], "replicas": 2}}
    server.store.replace(rt, NS, "web", stale)
    with pytest.raises(ApiError) as conflict:
        server.store.replace(rt, NS, "web", stale)  # the same resourceVersion again: now stale
    assert conflict.value.status == 409 and conflict.value.reason == "Conflict"
    with pytest.raises(ApiError) as conflict_patch:
        server.patch(DEPLOYMENTS, NS, "web", {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 4}})
    assert conflict_patch.value.status == 409


def test_objects_need_their_namespace(server: FakeApiServer) -> None:
    body = deployment()
    body["metadata"]["namespace"] = "nowhere"
    with pytest.raises(ApiError) as missing:
        server.create(body)
    assert missing.value.status == 404 and 'namespaces "nowhere" not found' in missing.value.message


def test_empty_metadata_lists_and_maps_are_not_stored_for_custom_resources_either(server: FakeApiServer) -> None:
    body = kimi()
    body["metadata"].update({"finalizers": [], "annotations": {}, "labels": {"team": ""}})
    stored = server.create(body)["metadata"]
    assert "finalizers" not in stored and "annotations" not in stored
    assert stored["labels"] == {"team": ""}  # an empty label value is a value

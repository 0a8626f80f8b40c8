"""DELETE: finalizers hold objects, the garbage collector follows owner references, namespaces empty out."""

from __future__ import annotations

from typing import Any

import pytest

from specserve_kubefake import CONFIGMAPS, DEPLOYMENTS, NAMESPACES, SPECSERVES, ApiError, FakeApiServer
from tests.kubefake.conftest import NS, deployment, kimi, namespace


def owned_by(owner: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
         "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip
    return body


def test_finalizers_hold_the_object_until_removed(server: FakeApiServer) -> None:
    body = kimi()
    body["metadata"]["finalizers"] = ["specserve.io/cleanup"]
    server.create(body)
    server.delete(SPECSERVES, NS, "kimi-k25")
    held = server.get(SPECSERVES, NS, "kimi-k25")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    server.patch(SPECSERVES, NS, "kimi-k25", {"metadata": {"finalizers": None}})
    assert server.get(SPECSERVES, NS, "kimi-k25") is None


def test_dependents_are_garbage_collected_recursively(server: FakeApiServer) -> None:
    owner = server.create(kimi())
    child = server.create(owned_by(owner, deployment("child")))
    grandchild = server.create(
        owned_by(child, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gc", "namespace": NS}})
    )
    unrelated = server.create(deployment("unrelated"))
    assert grandchild and unrelated
    server.delete(SPECSERVES, NS, "kimi-k25")
    assert server.get(DEPLOYMENTS, NS, "child") is None
    assert server.get(CONFIGMAPS, NS, "gc") is None
    assert server.get(DEPLOYMENTS, NS, "unrelated") is not None


def test_foreground_deletion_waits_for_dependents(server: FakeApiServer) -> None:
    owner = server.create(kimi())
    child = owned_by(owner, deployment("child"))
    child["metadata"]["finalizers"] = ["example.com/hold"]
    server.create(child)
    server.delete(SPECSERVES, NS, "kimi-k25", propagation="Foreground")
    waiting = server.get(SPECSERVES, NS, "kimi-k25")
    assert waiting is not None and "foregroundDeletion" in waiting["metadata"]["finalizers"]
    server.patch(DEPLOYMENTS, NS, "child", {"metadata": {"finalizers": None}})
    assert server.get(DEPLOYMENTS, NS, "child") is None
    assert server.get(SPECSERVES, NS, "kimi-k25") is None


def test_deleting_a_namespace_deletes_what_is_inside(server: FakeApiServer) -> None:
    server.create(kimi())
    server.create(deployment())
    server.create(namespace("other"))
    server.delete(NAMESPACES, None, NS)
    assert server.get(NAMESPACES, None, NS) is None
    assert server.get(SPECSERVES, NS, "kimi-k25") is None and server.get(DEPLOYMENTS, NS, "web") is None
    assert server.get(NAMESPACES, None, "other") is not None


def test_a_dependent_whose_owner_is_gone_is_collected(server: FakeApiServer) -> None:
    orphan = owned_by({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "uid": "no-such-uid"}},
                      deployment("orphan"))  # fmt: skip
    server.create(orphan)  # no running loop here: the collector runs at once
    assert server.get(DEPLOYMENTS, NS, "orphan") is None


def test_block_owner_deletion_needs_finalizers_permission_where_enforced() -> None:
    api = FakeApiServer(block_owner_deletion=False)
    api.create(namespace())
    owner = api.create(kimi())
    refused = owned_by(owner, deployment("child"))
    with pytest.raises(ApiError) as forbidden:
        api.create(refused)
    assert forbidden.value.status == 403 and "specserves/finalizers" in forbidden.value.message
    allowed = owned_by(owner, deployment("child"))
    allowed["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = False
    assert api.create(allowed)["metadata"]["ownerReferences"]

"""A leader's first act against the fake API server: the SpecServes, pools and routes of every namespace listed at
once, then a route write for each SpecServe with weight on a pool that lost its Ready replicas while no leader
acted; nothing else written, no object read on its own, and nothing of another owner's touched."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from specserve.api.validation import parse_object
from specserve.kube.client import KubeClient
from specserve.reconcile.failover import fail_over_everywhere
from specserve.reconcile.rendered import remembered_render
from specserve.reconcile.target import rendered_spec, target
from specserve.status import read_status
from specserve_kubefake import DEPLOYMENTS, HTTPROUTES, FakeApiServer

JSON = dict[str, Any]
NAME = "kimi-k25"
SPEC, BASE = f"{NAME}-spec", f"{NAME}-base"


@pytest.fixture()
async def fake() -> AsyncIterator[FakeApiServer]:
    async with FakeApiServer() as api:
        yield api


def deploy(api: FakeApiServer, doc: JSON, namespace: str, *, conflict: bool = False) -> None:
    """A SpecServe as a previous leader left it: its pools both Ready, all the weight on the baseline pool.
    `conflict`: the route of its name belongs to another object."""
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    other = api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other", "namespace": namespace}})
    body = copy.deepcopy(doc)
    body["metadata"] = {"name": NAME, "namespace": namespace}
    owner = api.create(body)
    obj, old = parse_object(owner), read_status(owner)
    ref = {"apiVersion": owner["apiVersion"], "kind": "SpecServe", "name": NAME, "uid": owner["metadata"]["uid"]}
    for manifest in remembered_render(rendered_spec(obj, old), target(obj, old).mode):
        if manifest["kind"] not in ("Deployment", "HTTPRoute"):
            continue
        theirs = {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": other["metadata"]["uid"]}
        manifest["metadata"]["ownerReferences"] = [theirs if conflict and manifest["kind"] == "HTTPRoute" else ref]
        api.create(manifest)
    for pool in (SPEC, BASE):
        api.set_deployment_ready(namespace, pool)


def weights(api: FakeApiServer, namespace: str) -> dict[str, int]:
    route = api.get(HTTPROUTES, namespace, NAME) or {}
    return {b["name"]: b["weight"] for r in route["spec"]["rules"] for b in r["backendRefs"]}


async def test_weight_leaves_the_dead_pools_of_every_namespace_in_one_listing_and_one_write_each(
    fake: FakeApiServer, kube: KubeClient, kimi_doc: JSON
) -> None:
    for namespace in ("dead", "healthy", "conflict", "all-dead"):
        deploy(fake, kimi_doc, namespace, conflict=namespace == "conflict")
    for namespace in ("dead", "conflict"):
        fake.set_deployment_ready(namespace, BASE, 0)  # the pool holding the weight lost its pods
    for pool in (SPEC, BASE):
        fake.set_deployment_ready("all-dead", pool, 0)  # nowhere to move the weight: it stays
    start = len(fake.requests)

    assert await fail_over_everywhere(kube, (None,)) == 1

    assert weights(fake, "dead") == {SPEC: 100, BASE: 0}
    for namespace in ("healthy", "conflict", "all-dead"):
        assert weights(fake, namespace) == {SPEC: 0, BASE: 100}, namespace
    calls = [(r.verb, r.plural, r.namespace) for r in list(fake.requests)[start:]]
    listed = {("list", plural, None) for plural in ("specserves", "deployments", "httproutes")}
    assert set(calls[:3]) == listed and calls[3:] == [("patch", "httproutes", "dead")], calls
    assert fake.get(DEPLOYMENTS, "dead", BASE) is not None  # nothing else written, nothing pruned


async def test_a_failed_listing_moves_nothing_and_raises_nothing(fake: FakeApiServer, kube: KubeClient) -> None:
    fake.faults.refuse("Deployment", verb="list", status=503)  # one kind cannot be listed as the leader starts
    assert await fail_over_everywhere(kube, ("llm", None)) == 0

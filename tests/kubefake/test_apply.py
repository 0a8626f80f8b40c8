"""Server-side apply: create, managedFields, removal of fields the manager stopped applying, conflicts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from specserve_kubefake import DEPLOYMENTS, ApiError, FakeApiServer
from tests.kubefake.conftest import NS, deployment


def apply(server: FakeApiServer, body: dict[str, Any], manager: str = "specserve", force: bool = True) -> Any:
    rt = server.registry.get(DEPLOYMENTS)
    assert rt is not None
    return server.store.patch(rt, NS, body["metadata"]["name"], "apply", copy.deepcopy(body), manager=manager,
                              force=force)  # fmt: skip


def test_apply_creates_and_records_the_manager(server: FakeApiServer) -> None:
    created = apply(server, deployment())
    assert created["metadata"]["generation"] == 1
    (entry,) = created["metadata"]["managedFields"]
    assert entry["manager"] == "specserve" and entry["operation"] == "Apply"
    assert entry["fieldsType"] == "FieldsV1"
    spec = entry["fieldsV1"]["f:spec"]
    assert spec["f:replicas"] == {}
    container = spec["f:template"]["f:spec"]["f:containers"]['k:{"name":"main"}']
    assert container["."] == {} and container["f:image"] == {}
    assert "f:revisionHistoryLimit" not in spec  # a default the server filled in is nobody's


def test_a_field_the_manager_stops_applying_is_removed(server: FakeApiServer) -> None:
    body = deployment()
    pod = body["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"gpu": "h100", "zone": "a"}
    pod["priorityClassName"] = "llm"
    apply(server, body)
    del pod["nodeSelector"]["zone"]
    del pod["priorityClassName"]
    after = apply(server, body)
    stored = after["spec"]["template"]["spec"]
    assert stored["nodeSelector"] == {"gpu": "h100"}
    assert "priorityClassName" not in stored
    assert after["metadata"]["generation"] == 2


def test_a_removed_container_env_entry_goes_but_a_field_another_manager_owns_stays(server: FakeApiServer) -> None:
    body = deployment()
    container = body["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    apply(server, body)
    server.patch(DEPLOYMENTS, NS, "web", {"metadata": {"annotations": {"note": "kept"}}})  # manager kubectl-patch
    container["env"] = [{"name": "A", "value": "1"}]
    after = apply(server, body)
    assert after["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]
    assert after["metadata"]["annotations"] == {"note": "kept"}
    managers = {(e["manager"], e["operation"]) for e in after["metadata"]["managedFields"]}
    assert managers == {("specserve", "Apply"), ("kubectl-patch", "Update")}


def test_two_appliers_conflict_unless_forced(server: FakeApiServer) -> None:
    apply(server, deployment())
    theirs = deployment(replicas=3)
    with pytest.raises(ApiError) as conflict:
        apply(server, theirs, manager="hpa", force=False)
    assert conflict.value.status == 409 and 'conflict with "specserve"' in conflict.value.message
    assert ".spec.replicas" in conflict.value.message
    taken = apply(server, theirs, manager="hpa", force=True)
    assert taken["spec"]["replicas"] == 3
    # specserve lost spec.replicas to hpa: applying without it no longer removes it.
    ours = deployment()
    del ours["spec"]["replicas"]
    after = apply(server, ours)
    assert after["spec"]["replicas"] == 3


def test_an_update_takes_ownership_from_the_applier(server: FakeApiServer) -> None:
    apply(server, deployment())
    server.patch(DEPLOYMENTS, NS, "web", {"spec": {"replicas": 7}})
    with pytest.raises(ApiError) as conflict:
        apply(server, deployment(), force=False)
    assert 'conflict with "kubectl-patch"' in conflict.value.message
    assert apply(server, deployment())["spec"]["replicas"] == 1  # force takes it back


def test_reapplying_the_same_intent_is_a_no_op(server: FakeApiServer) -> None:
    first = apply(server, deployment())
    second = apply(server, deployment())
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert second["metadata"]["managedFields"] == first["metadata"]["managedFields"]


def test_ports_are_keyed_by_port_and_protocol_in_managed_fields(server: FakeApiServer) -> None:
    body = deployment()
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "http", "containerPort": 8080},
        {"name": "dns", "containerPort": 53, "protocol": "UDP"},
    ]
    stored = apply(server, body)
    (entry,) = stored["metadata"]["managedFields"]
    container = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"main"}']
    assert set(container["f:ports"]) == {'k:{"containerPort":8080,"protocol":"TCP"}',
                                         'k:{"containerPort":53,"protocol":"UDP"}'}  # fmt: skip
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8080}]
    ports = apply(server, body)["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert ports == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]

"""422 Invalid for what the API server refuses: official schemas, its own rules, CRD schemas and CEL."""

from __future__ import annotations

import pytest

from specserve_kubefake import DEPLOYMENTS, SPECSERVES, ApiError, FakeApiServer
from specserve_kubefake.schemas import CustomResourceSchema, fields_read
from tests.kubefake.conftest import NS, deployment, kimi


def _refused(server: FakeApiServer, body: dict[str, object]) -> ApiError:
    with pytest.raises(ApiError) as refused:
        server.create(body)
    assert refused.value.status == 422 and refused.value.reason == "Invalid"
    assert refused.value.body()["kind"] == "Status"
    return refused.value


def test_schema_refuses_a_wrong_type_and_an_unknown_field(server: FakeApiServer) -> None:
    error = _refused(server, deployment(replicas="2"))
    assert "spec.replicas" in error.message
    error = _refused(server, deployment(replica=2))
    assert "replica" in error.message


def test_api_server_rules_for_labels_tolerations_and_resources(server: FakeApiServer) -> None:
    bad_label = deployment()
    bad_label["metadata"]["labels"] = {"bad key!": "x"}
    assert "metadata.labels" in _refused(server, bad_label).message
    long_value = deployment()
    long_value["metadata"]["labels"] = {"a": "v" * 64}
    assert "63" in _refused(server, long_value).message
    tolerations = deployment()
    tolerations["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "gpu", "operator": "Exists", "value": "yes"},
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5},
    ]
    message = _refused(server, tolerations).message
    assert "tolerations[0].operator" in message and "tolerations[1].effect" in message
    resources = deployment()
    resources["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"memory": "2Gi", "nvidia.com/gpu": "8"},
        "limits": {"memory": "1Gi", "nvidia.com/gpu": "4"},
    }
    message = _refused(server, resources).message
    assert "requests[memory]" in message and "requests[nvidia.com/gpu]" in message
    selector = deployment()
    selector["spec"]["template"]["spec"]["nodeSelector"] = {"-bad": "x"}
    assert "nodeSelector" in _refused(server, selector).message


def test_the_deployment_selector_is_immutable(server: FakeApiServer) -> None:
    server.create(deployment())
    with pytest.raises(ApiError) as refused:
        server.patch("apps/v1/deployments", NS, "web", {"spec": {"selector": {"matchLabels": {"app": "other"}},
                     "template": {"metadata": {"labels": {"app": "other"}}}}})  # fmt: skip
    assert refused.value.status == 422 and "field is immutable" in refused.value.message


def test_a_specserve_failing_a_cel_rule_is_refused(server: FakeApiServer) -> None:
    body = kimi()
    body["spec"]["placement"]["gpusPerPod"] = 6  # tensorParallelSize 8 does not divide it
    error = _refused(server, body)
    assert "spec" in error.message and "gpusPerPod" in error.message


def test_a_specserve_failing_its_schema_is_refused(server: FakeApiServer) -> None:
    body = kimi()
    body["spec"]["placement"]["gpusPerPod"] = "eight"
    assert "spec.placement.gpusPerPod" in _refused(server, body).message


def test_cel_rules_run_on_spec_updates_but_not_on_status_writes(server: FakeApiServer) -> None:
    server.create(kimi())
    with pytest.raises(ApiError):
        server.patch(SPECSERVES, NS, "kimi-k25", {"spec": {"placement": {"gpusPerPod": 6}}})
    with pytest.raises(ApiError) as wrong_type:
        server.patch(SPECSERVES, NS, "kimi-k25", {"spec": {"placement": {"gpusPerPod": "six"}}})
    assert "spec.placement.gpusPerPod" in wrong_type.value.message
    server.patch_status(SPECSERVES, NS, "kimi-k25", {"activeMode": "Baseline"})
    with pytest.raises(ApiError) as bad_status:
        server.patch_status(SPECSERVES, NS, "kimi-k25", {"observedGeneration": "one"})
    assert "status.observedGeneration" in bad_status.value.message


def test_a_status_write_does_not_let_an_invalid_spec_through(server: FakeApiServer) -> None:
    server.create(deployment())
    server.patch_status(DEPLOYMENTS, NS, "web", {"readyReplicas": 1})
    with pytest.raises(ApiError) as refused:
        server.patch(DEPLOYMENTS, NS, "web", {"spec": {"replicas": "two"}})
    assert "spec.replicas" in refused.value.message


def test_a_cel_rule_sees_every_field_it_names() -> None:
    assert fields_read("self.a == self.b && has(self.c)") == frozenset({"a", "b", "c"})
    assert fields_read("self.all(k, k != 'x')") is None and fields_read("size(self) < 3") is None
    assert fields_read("self.a == oldSelf.a") is None
    rules = [{"rule": "self.a == self.b", "message": "a != b"}, {"rule": "size(self) <= 2", "message": "too big"}]
    spec = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "x-kubernetes-validations": rules}
    schema = CustomResourceSchema({"type": "object", "properties": {"spec": spec}})

    def messages(body: dict[str, int]) -> list[str]:
        return [m for _, m in schema.validate({"spec": body}, None)]

    assert messages({"a": 1, "b": 1}) == []
    assert messages({"a": 1, "b": 2}) == ['Invalid value: "object": a != b']
    assert messages({"a": 1, "b": 1, "c": 3}) == ['Invalid value: "object": too big']  # sees the whole object


def test_validation_can_be_turned_off() -> None:
    api = FakeApiServer(validate=False)
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    assert api.create(deployment(replicas="2"))["spec"]["replicas"] == "2"

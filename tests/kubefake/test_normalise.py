"""What the server stores: omitempty zero values dropped, defaults filled in, quantities canonical."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from specserve_kubefake import DEPLOYMENTS, HTTPROUTES, SERVICES, SPECSERVES, FakeApiServer
from specserve_kubefake.quantity import canonical
from tests.kubefake.conftest import NS, deployment, kimi, rendered


def _apply(server: FakeApiServer, resource: str, body: dict[str, Any]) -> Any:
    rt = server.registry.get(resource)
    assert rt is not None
    return server.store.patch(rt, NS, body["metadata"]["name"], "apply", copy.deepcopy(body), manager="specserve",
                              force=True)  # fmt: skip


@pytest.mark.parametrize(
    ("sent", "stored"),
    [("0.5", "500m"), ("1024Mi", "1Gi"), ("1536Mi", "1536Mi"), ("32", "32"), ("1000", "1k"), ("0.5Gi", "512Mi"),
     ("900Gi", "900Gi"), ("1.5", "1500m"), ("100m", "100m"), ("8", "8"), ("1e3", "1e3"), ("0", "0")],
)  # fmt: skip
def test_quantities_are_canonical(sent: str, stored: str) -> None:
    assert canonical(sent) == stored


def test_rendered_deployment_gains_defaults_and_loses_zero_values(server: FakeApiServer) -> None:
    owner = server.create(kimi())
    manifests = rendered(owner)
    sent = copy.deepcopy(manifests["Deployment/kimi-k25-spec"])
    pod = sent["spec"]["template"]["spec"]
    container = pod["containers"][0]
    container["env"] = [*(container.get("env") or []), {"name": "EMPTY", "value": ""}]
    container["volumeMounts"][0]["readOnly"] = False
    pod["nodeSelector"] = {}
    container["resources"]["requests"]["cpu"] = "0.5"
    stored = _apply(server, DEPLOYMENTS, sent)
    spec = stored["spec"]
    assert spec["revisionHistoryLimit"] == sent["spec"]["revisionHistoryLimit"]  # sent: kept
    template = spec["template"]
    assert template["metadata"]["creationTimestamp"] is None
    pod_stored = template["spec"]
    assert pod_stored["restartPolicy"] == "Always" and pod_stored["dnsPolicy"] == "ClusterFirst"
    assert pod_stored["schedulerName"] == "default-scheduler"
    assert "nodeSelector" not in pod_stored  # empty map dropped
    c = pod_stored["containers"][0]
    assert c["terminationMessagePath"] == "/dev/termination-log" and c["terminationMessagePolicy"] == "File"
    assert {"name": "EMPTY"} in c["env"]  # value "" is omitempty
    assert "readOnly" not in c["volumeMounts"][0]  # readOnly: false is omitempty
    assert c["resources"]["requests"]["cpu"] == "500m"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["successThreshold"] == 1 and c[probe]["httpGet"]["scheme"] == "HTTP"
    assert pod_stored["volumes"][0]["emptyDir"]["sizeLimit"] == "64Gi"


def test_deployment_defaults_when_absent(server: FakeApiServer) -> None:
    stored = server.create(deployment())
    spec = stored["spec"]
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    assert spec["revisionHistoryLimit"] == 10 and spec["progressDeadlineSeconds"] == 600
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 30 and pod["securityContext"] == {}
    container = pod["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent" and container["resources"] == {}
    latest = deployment("latest")
    latest["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx"
    assert server.create(latest)["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"


def test_rendered_service_and_route_gain_defaults(server: FakeApiServer) -> None:
    owner = server.create(kimi())
    manifests = rendered(owner)
    service = _apply(server, SERVICES, manifests["Service/kimi-k25-spec"])
    spec = service["spec"]
    assert spec["sessionAffinity"] == "None" and spec["ipFamilies"] == ["IPv4"]
    assert spec["ipFamilyPolicy"] == "SingleStack" and spec["internalTrafficPolicy"] == "Cluster"
    assert spec["clusterIP"] and spec["clusterIPs"] == [spec["clusterIP"]]
    again = _apply(server, SERVICES, manifests["Service/kimi-k25-spec"])
    assert again["spec"]["clusterIP"] == spec["clusterIP"]  # allocated once, kept on re-apply
    route_body = copy.deepcopy(manifests["HTTPRoute/kimi-k25"])
    for backend in route_body["spec"]["rules"][0]["backendRefs"]:
        del backend["group"], backend["kind"]
    del route_body["spec"]["rules"][0]["matches"]
    route = _apply(server, HTTPROUTES, route_body)
    rule = route["spec"]["rules"][0]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert all(b["group"] == "" and b["kind"] == "Service" for b in rule["backendRefs"])


def test_custom_resources_are_pruned_and_defaulted_by_their_schema(server: FakeApiServer) -> None:
    body = kimi()
    body["spec"]["unknownField"] = {"x": 1}
    stored = server.create(body)
    assert "unknownField" not in stored["spec"]
    assert stored["spec"]["switching"]["initialMode"]  # a schema default
    assert server.get(SPECSERVES, NS, "kimi-k25") == stored

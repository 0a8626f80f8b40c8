"""What a real API server returns for the objects we apply (hand-written from Kubernetes 1.30+ behaviour, not from
any emulator): omitempty zero values dropped, defaults filled in, quantities canonicalised, server metadata and
status added. Drift tests compare our rendered intent against these."""

from __future__ import annotations

import copy
from typing import Any

JSON = dict[str, Any]
# Quantities the renderer may emit and their canonical forms as the server stores them.
CANONICAL = {"0.5": "500m", "1024Mi": "1Gi", "1.5Gi": "1536Mi", "32": "32"}


def _drop_omitempty(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _drop_omitempty(v) for k, v in node.items()}
        return {k: v for k, v in out.items() if v not in (None, False, "", [], {}) or k in _KEEP_ZERO}
    if isinstance(node, list):
        return [_drop_omitempty(v) for v in node]
    return node


# Pointer fields a server keeps even when zero.
_KEEP_ZERO = frozenset({"replicas", "maxSurge", "maxUnavailable", "weight", "group"})


def _probe(probe: JSON) -> None:
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    if "httpGet" in probe:
        probe["httpGet"].setdefault("scheme", "HTTP")


def _meta(obj: JSON, generation: bool) -> None:
    meta = obj["metadata"]
    meta.update({"uid": "6d3f0c2e-uid", "resourceVersion": "48213", "creationTimestamp": "2026-01-01T00:00:00Z"})
    meta["managedFields"] = [{"manager": "specserve", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {}}]
    if generation:
        meta["generation"] = 4


def deployment(applied: JSON) -> JSON:
    obj: JSON = _drop_omitempty(copy.deepcopy(applied))
    _meta(obj, True)
    obj["metadata"].setdefault("annotations", {})["deployment.kubernetes.io/revision"] = "3"
    spec = obj["spec"]
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    spec.setdefault(
        "strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
    )
    template = spec["template"]
    template["metadata"]["creationTimestamp"] = None
    pod = template["spec"]
    pod.update({"restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler"})
    pod.setdefault("securityContext", {})
    for container in pod["containers"]:
        container.setdefault("terminationMessagePath", "/dev/termination-log")
        container.setdefault("terminationMessagePolicy", "File")
        container.setdefault("imagePullPolicy", "IfNotPresent")
        for key in ("startupProbe", "readinessProbe", "livenessProbe"):
            if key in container:
                _probe(container[key])
        for port in container.get("ports", []):
            port.setdefault("protocol", "TCP")
        for kind in ("requests", "limits"):
            values = container.get("resources", {}).get(kind, {})
            for name, value in values.items():
                values[name] = CANONICAL.get(value, value)
    for volume in pod.get("volumes", []):
        if "configMap" in volume:
            volume["configMap"].setdefault("defaultMode", 420)
    obj["status"] = {"observedGeneration": 4, "replicas": 1, "readyReplicas": 1, "updatedReplicas": 1}
    return obj


def service(applied: JSON) -> JSON:
    obj: JSON = _drop_omitempty(copy.deepcopy(applied))
    _meta(obj, False)
    spec = obj["spec"]
    spec.update({"clusterIP": "10.96.12.7", "clusterIPs": ["10.96.12.7"], "ipFamilies": ["IPv4"]})
    spec.update({"ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"})
    spec.setdefault("sessionAffinity", "None")
    for port in spec["ports"]:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port["port"])
    obj["status"] = {"loadBalancer": {}}
    return obj


def httproute(applied: JSON) -> JSON:
    obj = copy.deepcopy(applied)  # a custom resource: stored as sent, plus the CRD's defaults
    _meta(obj, True)
    for parent in obj["spec"]["parentRefs"]:
        parent.setdefault("group", "gateway.networking.k8s.io")
        parent.setdefault("kind", "Gateway")
    for rule in obj["spec"]["rules"]:
        rule.setdefault("matches", [{"path": {"type": "PathPrefix", "value": "/"}}])
        for backend in rule.get("backendRefs", []):
            backend.setdefault("group", "")
            backend.setdefault("kind", "Service")
            backend.setdefault("weight", 1)
    obj["status"] = {"parents": []}
    return obj


def stored(applied: JSON) -> JSON:
    return {"Deployment": deployment, "Service": service, "HTTPRoute": httproute}.get(
        applied["kind"], lambda o: _drop_omitempty(copy.deepcopy(o))
    )(applied)

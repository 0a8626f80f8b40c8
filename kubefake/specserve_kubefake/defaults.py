"""What the API server does to a built-in object before storing it: drop omitempty zero values, fill defaults.

Only the kinds and fields this project renders or reads are modelled, after the Go types and defaulters of
Kubernetes 1.35 (k8s.io/api/*/v1 `omitempty` tags, pkg/apis/*/v1/defaults.go) and the Gateway API CRDs.
"""

from __future__ import annotations

import contextlib
import copy
import ipaddress
import itertools
from collections.abc import Callable
from typing import Any

from specserve_kubefake import quantity

JSON = dict[str, Any]

# Go maps (map[string]string, ResourceList): user keys, dropped when empty; their values are kept as sent.
_USER_MAPS = frozenset(
    {"labels", "annotations", "nodeSelector", "matchLabels", "data", "binaryData", "stringData", "limits", "requests",
     "selector", "capacity", "allocatable"}
)  # fmt: skip
# Non-pointer bool fields tagged omitempty: false is not stored.
_FALSE_OMIT = frozenset({"readOnly", "stdin", "stdinOnce", "tty", "hostNetwork", "hostPID", "hostIPC", "paused",
                         "publishNotReadyAddresses"})  # fmt: skip
# Non-pointer int fields tagged omitempty: 0 is not stored.
_ZERO_OMIT = frozenset({"initialDelaySeconds", "minReadySeconds", "hostPort", "nodePort"})
# Sub-trees stored verbatim (free-form or another API's content).
_OPAQUE = frozenset({"managedFields", "status"})


def drop_omitempty(node: Any) -> Any:
    """A copy without the zero values Go's `omitempty` drops: null, "", [], empty maps, false/0 of the fields
    above. Empty structs (``resources: {}``, ``emptyDir: {}``, ``securityContext: {}``) are kept, as Go does."""
    if isinstance(node, list):
        return [drop_omitempty(i) for i in node]
    if not isinstance(node, dict):
        return node
    out: JSON = {}
    for key, value in node.items():
        if key in _OPAQUE:
            out[key] = copy.deepcopy(value) if key == "status" else value  # defaulters may add to status
            continue
        if key in _USER_MAPS and isinstance(value, dict):
            if value:
                out[key] = {k: v for k, v in value.items() if v is not None}
            continue
        cleaned = drop_omitempty(value)
        if cleaned is None or cleaned in ("", []):
            continue
        if cleaned is False and key in _FALSE_OMIT:
            continue
        if cleaned == 0 and not isinstance(cleaned, bool) and key in _ZERO_OMIT:
            continue
        out[key] = cleaned
    return out


# ------------------------------------------------------------------------------------------ pod template


def _probe(probe: JSON) -> None:
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    _handler(probe)


def _handler(handler: JSON) -> None:
    if isinstance(handler.get("httpGet"), dict):
        handler["httpGet"].setdefault("scheme", "HTTP")


def _pull_policy(image: str) -> str:
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _resources(resources: JSON) -> None:
    for part in ("limits", "requests"):
        values = resources.get(part)
        if isinstance(values, dict):
            for name, amount in list(values.items()):
                with contextlib.suppress(quantity.QuantityError, TypeError):  # validation names the field
                    values[name] = quantity.canonical(amount)


def _container(container: JSON) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    if isinstance(container.get("image"), str):
        container.setdefault("imagePullPolicy", _pull_policy(container["image"]))
    container.setdefault("resources", {})
    _resources(container["resources"])
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for name in ("livenessProbe", "readinessProbe", "startupProbe"):
        if isinstance(container.get(name), dict):
            _probe(container[name])
    for hook in ((container.get("lifecycle") or {}).get(k) for k in ("postStart", "preStop")):
        if isinstance(hook, dict):
            _handler(hook)
    for env in container.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")


def _volume(volume: JSON) -> None:
    for source in ("configMap", "secret", "downwardAPI", "projected"):
        if isinstance(volume.get(source), dict):
            volume[source].setdefault("defaultMode", 420)
    empty_dir = volume.get("emptyDir")
    if isinstance(empty_dir, dict) and "sizeLimit" in empty_dir:
        with contextlib.suppress(quantity.QuantityError, TypeError):
            empty_dir["sizeLimit"] = quantity.canonical(empty_dir["sizeLimit"])


def pod_spec(spec: JSON) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for container in itertools.chain(spec.get("initContainers") or [], spec.get("containers") or []):
        if isinstance(container, dict):
            _container(container)
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict):
            _volume(volume)


def pod_template(template: JSON) -> None:
    template.setdefault("metadata", {})
    # The real server serialises the template's zero creationTimestamp as null.
    template["metadata"].setdefault("creationTimestamp", None)
    if isinstance(template.get("spec"), dict):
        pod_spec(template["spec"])


# ------------------------------------------------------------------------------------------ kinds


def deployment(obj: JSON, old: JSON | None) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.setdefault("rollingUpdate", {})
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    if isinstance(spec.get("template"), dict):
        pod_template(spec["template"])


def pod(obj: JSON, old: JSON | None) -> None:
    spec = obj.setdefault("spec", {})
    pod_spec(spec)
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        if resources.get("limits") and not resources.get("requests"):
            resources["requests"] = dict(resources["limits"])  # requests default to limits on Pods
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", "BestEffort")


_cluster_ips = (str(ipaddress.IPv4Address("10.96.0.10") + i) for i in itertools.count())


def service(obj: JSON, old: JSON | None) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] in ("ClusterIP", "NodePort", "LoadBalancer"):
        old_spec = (old or {}).get("spec") or {}
        # The allocated address is immutable: an update that omits it keeps the old one.
        if "clusterIP" not in spec:
            spec["clusterIP"] = old_spec.get("clusterIP") or next(_cluster_ips)
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if "port" in port:
            port.setdefault("targetPort", port["port"])
    obj.setdefault("status", {}).setdefault("loadBalancer", {})


def configmap(obj: JSON, old: JSON | None) -> None:
    return None


def secret(obj: JSON, old: JSON | None) -> None:
    obj.setdefault("type", "Opaque")


def namespace(obj: JSON, old: JSON | None) -> None:
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")


def network_policy(obj: JSON, old: JSON | None) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("podSelector", {})
    if "policyTypes" not in spec:
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]
    for rule in itertools.chain(spec.get("ingress") or [], spec.get("egress") or []):
        for port in rule.get("ports") or []:
            port.setdefault("protocol", "TCP")


def pdb(obj: JSON, old: JSON | None) -> None:
    return None


def httproute(obj: JSON, old: JSON | None) -> None:
    """The Gateway API CRD's schema defaults (v1.2+)."""
    spec = obj.setdefault("spec", {})
    for ref in spec.get("parentRefs") or []:
        if isinstance(ref, dict):
            ref.setdefault("group", "gateway.networking.k8s.io")
            ref.setdefault("kind", "Gateway")
    if "rules" not in spec:
        spec["rules"] = [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}]
    for rule in spec["rules"]:
        if not isinstance(rule, dict):
            continue
        rule.setdefault("matches", [{"path": {"type": "PathPrefix", "value": "/"}}])
        for match in rule["matches"]:
            if isinstance(match, dict):
                match.setdefault("path", {"type": "PathPrefix", "value": "/"})
                if isinstance(match["path"], dict):
                    match["path"].setdefault("type", "PathPrefix")
                    match["path"].setdefault("value", "/")
                for header in match.get("headers") or []:
                    header.setdefault("type", "Exact")
        for backend in rule.get("backendRefs") or []:
            if isinstance(backend, dict):
                backend.setdefault("group", "")
                backend.setdefault("kind", "Service")
                backend.setdefault("weight", 1)


DEFAULTERS: dict[str, Callable[[JSON, JSON | None], None]] = {
    "apps/v1/deployments": deployment,
    "v1/pods": pod,
    "v1/services": service,
    "v1/configmaps": configmap,
    "v1/secrets": secret,
    "v1/namespaces": namespace,
    "networking.k8s.io/v1/networkpolicies": network_policy,
    "policy/v1/poddisruptionbudgets": pdb,
    "gateway.networking.k8s.io/v1/httproutes": httproute,
}


def normalise_builtin(key: str, obj: JSON, old: JSON | None) -> JSON:
    """The object as a built-in kind's storage would hold it (a new dict)."""
    out: JSON = drop_omitempty(obj)
    out.setdefault("metadata", {})
    defaulter = DEFAULTERS.get(key)
    if defaulter is not None:
        defaulter(out, old)
    return out


def normalise_extra(key: str, obj: JSON, old: JSON | None) -> JSON:
    """Custom resources keep zero values, except in metadata (ObjectMeta is a Go type for them too); only the
    defaults of their CRD schema apply (here: the Gateway API's)."""
    obj = {**obj, "metadata": drop_omitempty(obj.get("metadata") or {})}
    defaulter = DEFAULTERS.get(key)
    if defaulter is None:
        return obj
    out = copy.deepcopy(obj)
    defaulter(out, old)
    return out

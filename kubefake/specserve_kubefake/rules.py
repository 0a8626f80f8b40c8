"""API-server validation that the OpenAPI schemas do not express, for the built-in kinds this project renders.

After k8s.io/apimachinery validation (names, labels) and pkg/apis/core/validation (pod specs), pkg/apis/apps
(Deployments), and the Gateway API's CRD patterns for HTTPRoutes. Each check returns (field, message) causes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from specserve_kubefake import quantity

JSON = dict[str, Any]
Causes = list[tuple[str, str]]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_QUALIFIED = re.compile(rf"^{_NAME}$")
_LABEL_VALUE = re.compile(rf"^({_NAME})?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_IANA_SVC = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_HOSTNAME = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NATIVE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "storage")


def qualified_name(value: Any, field: str) -> Causes:
    """A label or annotation key: optional DNS-subdomain prefix and '/', then a name of at most 63 characters."""
    if not isinstance(value, str) or not value:
        return [(field, f"Invalid value: {value!r}: name part must be non-empty")]
    prefix, _, name = value.rpartition("/")
    out: Causes = []
    if "/" in value and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        out.append((field, f"Invalid value: {value!r}: prefix part must be a lowercase RFC 1123 subdomain"))
    if len(name) > 63:
        out.append((field, f"Invalid value: {value!r}: name part must be no more than 63 characters"))
    elif not _QUALIFIED.match(name):
        out.append(
            (
                field,
                f"Invalid value: {value!r}: name part must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character",
            )
        )
    return out


def label_value(value: Any, field: str) -> Causes:
    if not isinstance(value, str):
        return [(field, f"Invalid value: {value!r}: a label value must be a string")]
    if len(value) > 63:
        return [(field, f"Invalid value: {value!r}: must be no more than 63 characters")]
    if not _LABEL_VALUE.match(value):
        return [
            (
                field,
                f"Invalid value: {value!r}: a valid label must be an empty string or consist of alphanumeric "
                "characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            )
        ]
    return []


def labels(values: Any, field: str) -> Causes:
    out: Causes = []
    for key, value in (values or {}).items():
        out += qualified_name(key, f"{field}[{key}]") or label_value(value, f"{field}[{key}]")
    return out


def _name(value: Any, field: str, pattern: re.Pattern[str], limit: int, what: str) -> Causes:
    if not isinstance(value, str) or len(value) > limit or not pattern.match(value):
        return [(field, f"Invalid value: {value!r}: a lowercase {what} of at most {limit} characters is required")]
    return []


def metadata(obj: JSON, key: str) -> Causes:
    meta = obj.get("metadata") or {}
    out: Causes = []
    name = meta.get("name")
    if key in ("v1/namespaces",):
        out += _name(name, "metadata.name", _DNS_LABEL, 63, "RFC 1123 label")
    elif key == "v1/services":
        out += _name(name, "metadata.name", _DNS_1035, 63, "RFC 1035 label")
    elif key not in ("v1/events", "events.k8s.io/v1/events"):
        out += _name(name, "metadata.name", _DNS_SUBDOMAIN, 253, "RFC 1123 subdomain")
    out += labels(meta.get("labels"), "metadata.labels")
    for annotation in meta.get("annotations") or {}:
        out += qualified_name(annotation, f"metadata.annotations[{annotation}]")
    return out


def _quantity(value: Any, field: str) -> Causes:
    try:
        quantity.parse(str(value))
    except quantity.QuantityError as exc:
        return [(field, f"Invalid value: {value!r}: {exc}")]
    return []


def resources(res: Any, field: str) -> Causes:
    res = res or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    out: Causes = []
    for part, values in (("limits", limits), ("requests", requests)):
        for name, amount in values.items():
            out += qualified_name(name, f"{field}.{part}[{name}]") or _quantity(amount, f"{field}.{part}[{name}]")
    if out:
        return out
    for name, amount in requests.items():
        extended = name not in _NATIVE_RESOURCES and not name.startswith("hugepages-")
        if name in limits and quantity.value(amount) > quantity.value(limits[name]):
            out.append((f"{field}.requests[{name}]", f"Invalid value: {amount!r}: must be less than or equal to "
                        f"{name} limit of {limits[name]}"))  # fmt: skip
        elif extended and name not in limits:
            out.append(
                (f"{field}.limits[{name}]", "Required value: Limit must be set for non overcommitable resources")
            )
        elif extended and quantity.value(amount) != quantity.value(limits[name]):
            out.append((f"{field}.requests[{name}]", f"Invalid value: {amount!r}: must be equal to {name} limit of "
                        f"{limits[name]}"))  # fmt: skip
    return out


def tolerations(items: Any, field: str) -> Causes:
    out: Causes = []
    for i, tol in enumerate(items or []):
        path = f"{field}[{i}]"
        operator, value, effect = tol.get("operator", "Equal"), tol.get("value", ""), tol.get("effect", "")
        if tol.get("key"):
            out += qualified_name(tol["key"], f"{path}.key")
        elif operator != "Exists":
            out.append((f"{path}.operator", f"Invalid value: {operator!r}: must be Exists when `key` is empty"))
        if operator == "Exists" and value:
            out.append((f"{path}.operator", f"Invalid value: {value!r}: must be empty when `operator` is 'Exists'"))
        elif operator not in ("Exists", "Equal"):
            out.append((f"{path}.operator", f'Unsupported value: {operator!r}: supported: "Equal", "Exists"'))
        elif operator == "Equal" and value:
            out += label_value(value, f"{path}.value")
        if "tolerationSeconds" in tol and effect != "NoExecute":
            out.append((f"{path}.effect", f"Invalid value: {effect!r}: effect must be 'NoExecute' when "
                        "`tolerationSeconds` is set"))  # fmt: skip
        if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            out.append((f"{path}.effect", f"Unsupported value: {effect!r}"))
    return out


def _port_name(name: Any, field: str) -> Causes:
    if not isinstance(name, str) or len(name) > 15 or not _IANA_SVC.match(name) or not re.search("[a-z]", name):
        return [(field, f"Invalid value: {name!r}: must be an IANA_SVC_NAME (at most 15 characters, lowercase "
                 "alphanumerics and '-', at least one letter)")]  # fmt: skip
    return []


def pod_spec(spec: JSON, field: str) -> Causes:
    out: Causes = []
    for key, value in (spec.get("nodeSelector") or {}).items():
        out += qualified_name(key, f"{field}.nodeSelector[{key}]") or label_value(value, f"{field}.nodeSelector[{key}]")
    out += tolerations(spec.get("tolerations"), f"{field}.tolerations")
    volumes = {v.get("name") for v in spec.get("volumes") or []}
    for i, volume in enumerate(spec.get("volumes") or []):
        out += _name(volume.get("name"), f"{field}.volumes[{i}].name", _DNS_LABEL, 63, "RFC 1123 label")
    containers = spec.get("containers") or []
    if not containers:
        out.append((f"{field}.containers", "Required value"))
    names: set[str] = set()
    for i, container in enumerate(containers):
        path = f"{field}.containers[{i}]"
        out += _name(container.get("name"), f"{path}.name", _DNS_LABEL, 63, "RFC 1123 label")
        if container.get("name") in names:
            out.append((f"{path}.name", f"Duplicate value: {container.get('name')!r}"))
        names.add(container.get("name", ""))
        if not container.get("image"):
            out.append((f"{path}.image", "Required value"))
        out += resources(container.get("resources"), f"{path}.resources")
        for j, port in enumerate(container.get("ports") or []):
            if "name" in port:
                out += _port_name(port["name"], f"{path}.ports[{j}].name")
        for j, mount in enumerate(container.get("volumeMounts") or []):
            if mount.get("name") not in volumes:
                out.append((f"{path}.volumeMounts[{j}].name", f"Not found: {mount.get('name')!r}"))
        for j, env in enumerate(container.get("env") or []):
            env_name = env.get("name")
            if not isinstance(env_name, str) or not env_name or "=" in env_name or not env_name.isprintable():
                out.append((f"{path}.env[{j}].name", f"Invalid value: {env_name!r}: a valid environment variable "
                            "name must consist only of printable ASCII characters other than '='"))  # fmt: skip
    return out


def _selector_matches(selector: JSON, labels_: JSON) -> bool:
    return all(labels_.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def deployment(obj: JSON, old: JSON | None) -> Causes:
    spec = obj.get("spec") or {}
    out: Causes = []
    selector = spec.get("selector")
    template = spec.get("template") or {}
    if not selector:
        out.append(("spec.selector", "Required value"))
    else:
        out += labels(selector.get("matchLabels"), "spec.selector.matchLabels")
        if not (selector.get("matchLabels") or selector.get("matchExpressions")):
            out.append(("spec.selector", "Invalid value: empty selector is invalid for deployment"))
        elif not _selector_matches(selector, (template.get("metadata") or {}).get("labels") or {}):
            out.append(("spec.template.metadata.labels", "Invalid value: `selector` does not match template `labels`"))
    if old is not None and (old.get("spec") or {}).get("selector") != selector:
        out.append(("spec.selector", "Invalid value: field is immutable"))
    out += labels((template.get("metadata") or {}).get("labels"), "spec.template.metadata.labels")
    if isinstance(template.get("spec"), dict):
        out += pod_spec(template["spec"], "spec.template.spec")
    strategy = spec.get("strategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    if rolling.get("maxSurge") in (0, "0%") and rolling.get("maxUnavailable") in (0, "0%"):
        out.append(("spec.strategy.rollingUpdate.maxUnavailable", "Invalid value: 0: may not be 0 when maxSurge is 0"))
    return out


def pod(obj: JSON, old: JSON | None) -> Causes:
    return pod_spec(obj.get("spec") or {}, "spec")


def service(obj: JSON, old: JSON | None) -> Causes:
    spec = obj.get("spec") or {}
    out = labels(spec.get("selector"), "spec.selector")
    ports = spec.get("ports") or []
    for i, port in enumerate(ports):
        if len(ports) > 1 and not port.get("name"):
            out.append((f"spec.ports[{i}].name", "Required value"))
        if isinstance(port.get("targetPort"), str):
            out += _port_name(port["targetPort"], f"spec.ports[{i}].targetPort")
    old_ip = ((old or {}).get("spec") or {}).get("clusterIP")
    if old_ip and spec.get("clusterIP") not in (None, old_ip):
        out.append(("spec.clusterIP", "Invalid value: field is immutable"))
    return out


def pdb(obj: JSON, old: JSON | None) -> Causes:
    spec = obj.get("spec") or {}
    out = labels((spec.get("selector") or {}).get("matchLabels"), "spec.selector.matchLabels")
    if "minAvailable" in spec and "maxUnavailable" in spec:
        out.append(("spec", "Invalid value: minAvailable and maxUnavailable cannot be both set"))
    return out


def httproute(obj: JSON, old: JSON | None) -> Causes:
    """The Gateway API CRD's validation (patterns, ranges, CEL) for the fields this project renders."""
    spec = obj.get("spec") or {}
    out: Causes = []
    for i, host in enumerate(spec.get("hostnames") or []):
        if not isinstance(host, str) or len(host) > 253 or not _HOSTNAME.match(host):
            out.append((f"spec.hostnames[{i}]", f"Invalid value: {host!r}: should match '{_HOSTNAME.pattern}'"))
    if len(spec.get("parentRefs") or []) > 32:
        out.append(("spec.parentRefs", "Too many: must have at most 32 items"))
    rules = spec.get("rules") or []
    if len(rules) > 16:
        out.append(("spec.rules", "Too many: must have at most 16 items"))
    for i, rule in enumerate(rules):
        for j, match in enumerate(rule.get("matches") or []):
            path = match.get("path") or {}
            value = path.get("value", "/")
            if path.get("type", "PathPrefix") in ("PathPrefix", "Exact") and (
                not isinstance(value, str) or not value.startswith("/") or len(value) > 1024 or "//" in value
            ):
                out.append((f"spec.rules[{i}].matches[{j}].path", "Invalid value: value must be an absolute path"))
        for j, backend in enumerate(rule.get("backendRefs") or []):
            weight = backend.get("weight", 1)
            if not isinstance(weight, int) or isinstance(weight, bool) or not 0 <= weight <= 1000000:
                out.append((f"spec.rules[{i}].backendRefs[{j}].weight", f"Invalid value: {weight!r}: 0 to 1000000"))
            if backend.get("kind", "Service") == "Service" and backend.get("group", "") == "" and "port" not in backend:
                out.append((f"spec.rules[{i}].backendRefs[{j}]", "Invalid value: Must have port for Service reference"))
    return out


CHECKS: dict[str, Callable[[JSON, JSON | None], Causes]] = {
    "apps/v1/deployments": deployment,
    "v1/pods": pod,
    "v1/services": service,
    "policy/v1/poddisruptionbudgets": pdb,
    "gateway.networking.k8s.io/v1/httproutes": httproute,
}


def check(key: str, obj: JSON, old: JSON | None) -> Causes:
    out = metadata(obj, key)
    rule = CHECKS.get(key)
    if rule is not None:
        out += rule(obj, old)
    return out

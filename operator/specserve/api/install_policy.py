"""What the operator's installation allows a SpecServe to do on the nodes and the network (pure).

A hostPath volume reads (or writes) the node's filesystem, so it is the cluster admin's call, not the
SpecServe author's: the chart's `modelCache.hostPathPrefixes` (`specserve run --allow-host-path PREFIX`) lists
the directories SpecServes may mount, and `modelCache.hostPathWritable` (`--allow-host-path-write`) whether
they may mount them read-write. The reconcile and `specserve render` both call `check_install_policy`; the
render itself stays free of installation settings.

Likewise `spec.switching.metrics.prometheusUrl`: the operator sends its queries with its own network reach (a
cloud metadata address, a service in another namespace), so only the Prometheus URLs the installation lists
(chart value `allowedPrometheusUrls`, `specserve run --allow-prometheus-url URL`, plus the operator's own
`--prometheus-url`) may be named; the switching loop sends nothing elsewhere (switching.sources).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import unquote, urlsplit

from specserve.api.models import SpecServeSpec
from specserve.api.rules import FieldError

FIELD = "spec.model.cache.hostPath"
URL_FIELD = "spec.switching.metrics.prometheusUrl"
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class InstallPolicy:
    host_path_prefixes: tuple[str, ...] = ()  # empty: no hostPath at all (the default)
    host_path_writable: bool = False
    # Prometheus URLs (origin and path prefix) SpecServes may name; empty: only the operator's own.
    prometheus_urls: tuple[str, ...] = ()

    def with_prometheus(self, url: str | None) -> InstallPolicy:
        """This policy with the operator's own --prometheus-url allowed too (the default every SpecServe uses)."""
        if url is None or url in self.prometheus_urls:
            return self
        return replace(self, prometheus_urls=(*self.prometheus_urls, url))


def _origin_and_path(url: str) -> tuple[str, str, int | None, str] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port, parts.path or "/"


def url_allowed(url: str, allowed: tuple[str, ...]) -> bool:
    """True when `url` has the scheme, host and port of an allowed URL and its path is under that URL's path
    (segment by segment). A URL with credentials, a query or a fragment is never allowed."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        return False
    # A dot segment (also percent-encoded) would climb out of an allowed path prefix once a server normalises it.
    if any(unquote(segment) in (".", "..") for segment in parts.path.split("/")):
        return False
    mine = _origin_and_path(url)
    for entry in allowed:
        theirs = _origin_and_path(entry)
        if mine is not None and theirs is not None and mine[:3] == theirs[:3] and under_prefix(mine[3], theirs[3]):
            return True
    return False


def prometheus_url_problem(url: str, policy: InstallPolicy) -> str | None:
    """Why the operator may not query `url` for a SpecServe, worded for its author; None when it may."""
    if url_allowed(url, policy.prometheus_urls):
        return None
    allowed = ", ".join(policy.prometheus_urls) or "none"
    return (
        f"{url} is not a Prometheus this installation allows (allowed: {allowed}); remove prometheusUrl to use "
        "the operator's, or ask the cluster admin to allow it (chart value allowedPrometheusUrls, "
        "`specserve run --allow-prometheus-url`)"
    )


def under_prefix(path: str, prefix: str) -> bool:
    """True when `path` is `prefix` or below it, segment by segment (/models does not allow /models-x)."""
    base = prefix.rstrip("/")
    return base in ("", path) or path.startswith(base + "/")


def check_install_policy(spec: SpecServeSpec, policy: InstallPolicy) -> list[FieldError]:
    """The install-policy violations of `spec` (empty when the installation allows it)."""
    url = spec.switching.metrics.prometheus_url
    if url is not None and (problem := prometheus_url_problem(url, policy)) is not None:
        return [FieldError(URL_FIELD, problem), *_host_path_problems(spec, policy)]
    return _host_path_problems(spec, policy)


def _host_path_problems(spec: SpecServeSpec, policy: InstallPolicy) -> list[FieldError]:
    cache = spec.model.cache
    if cache is None or cache.host_path is None:
        return []
    path = cache.host_path
    if not any(under_prefix(path, p) for p in policy.host_path_prefixes):
        allowed = ", ".join(policy.host_path_prefixes) or "none"
        return [
            FieldError(
                FIELD,
                f"{path} is not under a host path this installation allows (allowed: {allowed}); use "
                "model.cache.pvcName, or ask the cluster admin to allow the directory (chart value "
                "modelCache.hostPathPrefixes, `specserve run --allow-host-path`)",
            )
        ]
    if not cache.mount_read_only() and not policy.host_path_writable:
        return [
            FieldError(
                "spec.model.cache.readOnly",
                f"false mounts the node's {path} writable, which this installation does not allow; remove "
                "readOnly (host paths mount read-only) or ask the cluster admin for modelCache.hostPathWritable",
            )
        ]
    return []

"""What the operator's installation allows a SpecServe to do on the nodes (pure).

A hostPath volume reads (or writes) the node's filesystem, so it is the cluster admin's call, not the
SpecServe author's: the chart's `modelCache.hostPathPrefixes` (`specserve run --allow-host-path PREFIX`) lists
the directories SpecServes may mount, and `modelCache.hostPathWritable` (`--allow-host-path-write`) whether
they may mount them read-write. The reconcile and `specserve render` both call `check_install_policy`; the
render itself stays free of installation settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from specserve.api.models import SpecServeSpec
from specserve.api.rules import FieldError

FIELD = "spec.model.cache.hostPath"


@dataclass(frozen=True)
class InstallPolicy:
    host_path_prefixes: tuple[str, ...] = ()  # empty: no hostPath at all (the default)
    host_path_writable: bool = False


def under_prefix(path: str, prefix: str) -> bool:
    """True when `path` is `prefix` or below it, segment by segment (/models does not allow /models-x)."""
    base = prefix.rstrip("/")
    return base in ("", path) or path.startswith(base + "/")


def check_install_policy(spec: SpecServeSpec, policy: InstallPolicy) -> list[FieldError]:
    """The install-policy violations of `spec` (empty when the installation allows it)."""
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

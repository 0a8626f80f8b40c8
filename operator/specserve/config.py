"""Operator configuration (from `specserve run` flags) and the kopf settings derived from it (pure)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import kopf
from kopf._cogs.structs import dicts as kopf_dicts

from specserve.api.install_policy import InstallPolicy

ANNOTATIONS_PREFIX = "specserve.io"
# Older versions put this finalizer on every SpecServe (kopf adds one for timers). The operator no longer needs
# one (children go by ownerReference GC); the name stays so that kopf removes it from existing objects.
FINALIZER = "specserve.io/finalizer"


@dataclass(frozen=True)
class LeaderElection:
    """A coordination.k8s.io/v1 Lease that one replica holds while it acts (client-go's defaults)."""

    namespace: str
    identity: str  # the pod name
    name: str = "specserve-operator"
    lease_seconds: float = 15.0  # a standby takes over this long after the last renewal it saw
    renew_deadline_seconds: float = 10.0  # the leader stops acting when it could not renew for this long
    retry_seconds: float = 2.0  # renew and acquire attempts


@dataclass(frozen=True)
class OperatorConfig:
    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    resync_seconds: float = 30.0  # drift repair and readiness refresh
    # A clean, unchanged SpecServe is still reconciled by every this-many-th resync round (1: every round).
    full_resync_every: int = 4
    liveness_endpoint: str | None = None
    metrics_port: int | None = None
    prometheus_url: str | None = None  # default for spec.switching.metrics.prometheusUrl
    # The installation's bearer token for its Prometheus (a mounted Secret): sent to every allowed Prometheus.
    prometheus_token_file: str | None = None
    post_events: bool = True
    extra_labels: dict[str, str] = field(default_factory=dict)
    # At most this many SpecServes reconcile at once (the rest wait their turn), whatever fires them.
    max_concurrent_reconciles: int = 8
    # At most this many pools roll their pod template at once across the cluster (None: no limit).
    max_concurrent_rolls: int | None = None
    api_timeout_seconds: float = 30.0  # one Kubernetes API request, per attempt
    read_timeout_seconds: float = 10.0  # a whole read (GET or LIST), its retries included
    # Which host paths SpecServes may mount (check_install_policy; `--allow-host-path`): none by default; which
    # Prometheus URLs they may name (`--allow-prometheus-url`): see `installation`.
    install_policy: InstallPolicy = field(default_factory=InstallPolicy)
    api_connect_timeout_seconds: float = 5.0
    leader_election: LeaderElection | None = None  # None: act at once (one replica, local runs, tests)
    # Without leader election: the Lease held while acting, so that a second operator is found and refuses to act
    # (specserve.kube.lease.PresenceGuard); None: no check (tests that run one operator in-process).
    presence: LeaderElection | None = None

    @property
    def installation(self) -> InstallPolicy:
        """What SpecServes may do here: the install policy, with the operator's own Prometheus allowed."""
        return self.install_policy.with_prometheus(self.prometheus_url)

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces

    def __post_init__(self) -> None:
        if self.max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be at least 1")
        if self.full_resync_every < 1:
            raise ValueError("--full-resync-every must be at least 1")
        if self.max_concurrent_rolls is not None and self.max_concurrent_rolls < 1:
            raise ValueError("--max-concurrent-rolls must be at least 1 (leave it out for no limit)")
        if min(self.api_timeout_seconds, self.api_connect_timeout_seconds, self.read_timeout_seconds) <= 0:
            raise ValueError("API timeouts must be positive")


class LeanDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base (the essence it compares to decide on.update), built from a view of the body that has only
    what the essence keeps: kopf deep-copies the whole body, status and managedFields included (most of a
    SpecServe's bytes), and then drops them, on every event of every SpecServe: about 4 ms an event. The
    essence is the same (kopf keeps of metadata only labels and annotations, of status only extra fields)."""

    def build(self, *, body: kopf.Body, extra_fields: Iterable[kopf_dicts.FieldSpec] | None = None) -> kopf.BodyEssence:
        extra = [kopf_dicts.parse_field(f) for f in extra_fields or ()]
        if any(not path for path in extra):  # the whole body is an extra field: nothing to leave out
            return super().build(body=body, extra_fields=extra)
        tops = {path[0] for path in extra}
        lean: dict[str, Any] = {k: v for k, v in body.items() if k not in ("metadata", "status") or k in tops}
        meta = body.get("metadata") or {}
        if "metadata" not in tops:  # kopf reads the owner references and the annotations; never managedFields
            lean["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
        return super().build(body=kopf.Body(cast(kopf.RawBody, lean)), extra_fields=extra)


def kopf_settings(config: OperatorConfig) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # kopf's own bookkeeping lives in annotations under our prefix, never in .status (which we own).
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATIONS_PREFIX)
    settings.persistence.diffbase_storage = LeanDiffBaseStorage(
        prefix=ANNOTATIONS_PREFIX, key="last-handled-configuration"
    )
    settings.posting.enabled = config.post_events
    settings.posting.level = logging.WARNING
    # Namespaced mode does not list namespaces (no cluster-wide RBAC needed for that).
    settings.scanning.disabled = not config.clusterwide
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = config.api_connect_timeout_seconds
    # kopf's own calls (its annotations, events, finalizer removal): the same bounds as ours, not 5 minutes.
    settings.networking.request_timeout = config.api_timeout_seconds
    settings.networking.connect_timeout = config.api_connect_timeout_seconds
    # The reconcile bound is specserve.slots (a semaphore over the handlers), not queueing.worker_limit: a kopf
    # worker stays alive (holding its slot) for idle_timeout after each event, which would serialise start-up.
    settings.queueing.worker_limit = None
    # Only the sync login handler uses threads; no pool of (CPU count + 4) threads.
    settings.execution.max_workers = 2
    return settings

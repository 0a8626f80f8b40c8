"""Operator configuration (from `specserve run` flags) and the kopf settings derived from it (pure)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import kopf

ANNOTATIONS_PREFIX = "specserve.io"
FINALIZER = "specserve.io/finalizer"


@dataclass(frozen=True)
class OperatorConfig:
    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    resync_seconds: float = 30.0  # drift repair and readiness refresh
    liveness_endpoint: str | None = None
    metrics_port: int | None = None
    prometheus_url: str | None = None  # default for spec.switching.metrics.prometheusUrl
    post_events: bool = True
    extra_labels: dict[str, str] = field(default_factory=dict)

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


def kopf_settings(config: OperatorConfig) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    # kopf's own bookkeeping lives in annotations under our prefix, never in .status (which we own).
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATIONS_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=ANNOTATIONS_PREFIX, key="last-handled-configuration"
    )
    settings.posting.enabled = config.post_events
    settings.posting.level = logging.WARNING
    # Namespaced mode does not list namespaces (no cluster-wide RBAC needed for that).
    settings.scanning.disabled = not config.clusterwide
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    return settings

"""The one reader of a pool's Deployment (pure): counts, and what they mean, with one meaning of "settled".

The reconcile's planner, the status and the switching loop all read a pool through `read_pool`:

- `rolling`: a pod template roll is in flight: pods of an older template still run, or the Deployment controller
  has not yet observed a change that may be a template change. An unobserved change that only moved
  `spec.replicas` (an HPA or a hand scale: the count differs from the observed one while no old pod runs) is
  a scale, not a roll: read as a roll, it would drain the pool for a moment (route 40/60 -> 0/100 -> 40/60).
- `settled`: not rolling, and at least one Ready pod when any is wanted. Pods still Pending or loading
  after a scale-up do not unsettle a pool that serves: it is "scaling", not "rolling".
- `complete`: settled with every wanted pod Ready and of the current template (a pool is ready to replace
  another, in make-before-break, only when complete).
- `deadline_exceeded`: the Deployment controller reports `Progressing=False, reason=ProgressDeadlineExceeded`
  for the generation it has observed (the real controller sets it when a roll or scale-up makes no progress for
  `progressDeadlineSeconds`; nothing here re-times it).
- `create_failure`: the Deployment controller reports `ReplicaFailure=True` (reason `FailedCreate`), copied from
  its ReplicaSet: pods that are never created (a ResourceQuota on `nvidia.com/gpu`, PodSecurity, a LimitRange, a
  pod webhook). No pod exists to say why, and the pool would otherwise read "loading" until the progress deadline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specserve.api import reasons
from specserve.layout import MANAGED_BY  # every field manager of this operator starts with it

# On the Deployment (not its pod template, which would roll the pods again): which template we applied.
TEMPLATE_HASH = "specserve.io/template-hash"
REPLICA_FAILURE = "ReplicaFailure"  # the condition type; its reason is FailedCreate (or FailedDelete)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class Progress:
    """One of the Deployment's own conditions (`Progressing`, `ReplicaFailure`)."""

    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class PoolCounts:
    """A pool's Deployment as the API server reports it."""

    name: str
    generation: int | None = None
    observed_generation: int | None = None
    spec_replicas: int | None = None  # None: absent (the server defaults it to 1)
    replicas: int = 0  # pods of every ReplicaSet
    ready: int = 0
    updated: int = 0  # pods of the current template
    template_hash: str | None = None  # the TEMPLATE_HASH annotation: the template we last applied
    progress: Progress | None = None
    replica_failure: Progress | None = None  # the ReplicaFailure condition, when True
    foreign_template: bool = False  # another field manager owns fields of the pod template (a hand edit)

    @property
    def seen(self) -> bool:
        """The Deployment controller has observed the current spec (no generation tracking: trust the counts)."""
        return self.generation is None or (
            self.observed_generation is not None and self.observed_generation >= self.generation
        )

    @property
    def scale_only(self) -> bool:
        """An unobserved change that moved the replica count and nothing visible besides (a template change
        alone keeps the count; both at once read as a scale until the controller observes them)."""
        return (
            not self.seen
            and self.observed_generation is not None
            and self.spec_replicas is not None
            and self.spec_replicas != self.replicas
            and self.replicas <= self.updated
        )

    @property
    def rolling(self) -> bool:
        return (not self.seen and not self.scale_only) or self.replicas > self.updated

    @property
    def serving(self) -> bool:
        return self.ready > 0

    def wanted(self, rendered: int | None) -> int:
        """The count to reach: the rendered one, or the live one when an autoscaler owns it."""
        if rendered is not None:
            return rendered
        return self.spec_replicas if self.spec_replicas is not None else 1

    def is_settled(self, rendered: int | None) -> bool:
        return not self.rolling and (self.wanted(rendered) == 0 or self.ready >= 1)

    def is_complete(self, rendered: int | None) -> bool:
        want = self.wanted(rendered)
        return not self.rolling and self.ready >= want and self.updated >= want

    def is_scaling(self, rendered: int | None) -> bool:
        """Settled and serving, with pods of a scale-up still on their way."""
        return self.is_settled(rendered) and not self.is_complete(rendered)

    @property
    def deadline_exceeded(self) -> bool:
        p = self.progress
        return self.seen and p is not None and p.status == "False" and p.reason == reasons.PROGRESS_DEADLINE_EXCEEDED

    @property
    def create_failure(self) -> Progress | None:
        """The controller's word that pods of the observed generation could not be created (None: none known)."""
        return self.replica_failure if self.seen else None


def _condition(status: Mapping[str, Any], type_: str) -> Progress | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return Progress(str(cond.get("status", "")), str(cond.get("reason", "")), str(cond.get("message", "")))
    return None


def _owns_template(fields: Any) -> bool:
    """Owns pod template fields beyond annotations (`kubectl rollout restart` stamps one: no edit of ours)."""
    spec = fields.get("f:spec") if isinstance(fields, Mapping) else None
    template = spec.get("f:template") if isinstance(spec, Mapping) else None
    if not isinstance(template, Mapping):
        return False
    meta = template.get("f:metadata")
    only_annotations = isinstance(meta, Mapping) and set(meta) <= {".", "f:annotations"}
    return any(k != "." for k in template if k != "f:metadata") or (meta is not None and not only_annotations)


def foreign_template_owner(live: Mapping[str, Any]) -> bool:
    """Whether a field manager other than ours owns fields of the pod template (kubectl edit, another
    controller). A mutating webhook's additions come with our own request and are no foreign edit."""
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, Mapping) or str(entry.get("manager", "")).startswith(MANAGED_BY):
            continue
        if entry.get("subresource"):
            continue
        if _owns_template(entry.get("fieldsV1")):
            return True
    return False


def foreign_replicas_owner(live: Mapping[str, Any]) -> str | None:
    """The field manager other than ours that last wrote `spec.replicas` (an autoscaler through the scale
    subresource, a hand scale), if any."""
    for entry in (live.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, Mapping) or str(entry.get("manager", "")).startswith(MANAGED_BY):
            continue
        fields = entry.get("fieldsV1")
        spec = fields.get("f:spec") if isinstance(fields, Mapping) else None
        if isinstance(spec, Mapping) and "f:replicas" in spec:
            return str(entry.get("manager", "")) or "unknown"
    return None


def read_pool(live: Mapping[str, Any], name: str | None = None) -> PoolCounts:
    """The one reading of a live Deployment."""
    meta, spec, status = live.get("metadata") or {}, live.get("spec") or {}, live.get("status") or {}
    replicas = spec.get("replicas")
    generation = meta.get("generation")
    observed = status.get("observedGeneration")
    hash_ = (meta.get("annotations") or {}).get(TEMPLATE_HASH)
    failure = _condition(status, REPLICA_FAILURE)
    return PoolCounts(
        name=str(meta.get("name", name or "")),
        generation=None if generation is None else _int(generation),
        observed_generation=None if observed is None else _int(observed),
        spec_replicas=None if replicas is None else _int(replicas),
        replicas=_int(status.get("replicas")),
        ready=_int(status.get("readyReplicas")),
        updated=_int(status.get("updatedReplicas")),
        template_hash=None if hash_ is None else str(hash_),
        progress=_condition(status, "Progressing"),
        replica_failure=failure if failure is not None and failure.status == "True" else None,
        foreign_template=foreign_template_owner(live),
    )

"""Why a pool's pods do not come up: the Deployment's progress deadline and the pods' own reasons.

The pure part reads what kubectl describe shows: a container waiting in ImagePullBackOff, ErrImagePull,
CrashLoopBackOff or CreateContainerConfigError, a container last terminated OOMKilled, a pod the scheduler
marked Unschedulable (with its message). The I/O part lists a SpecServe's pods once per reconcile, and only when
some pool is not complete: a steady state costs no LIST.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from specserve.api import reasons
from specserve.kube.client import KubeError
from specserve.kube.kinds import DEPLOYMENT, POD, Ref
from specserve.layout import LABEL_INSTANCE
from specserve.pool_state import PoolCounts, read_pool
from specserve.reconcile.apply import Kube
from specserve.reconcile.observe import Cause

log = logging.getLogger(__name__)
JSON = dict[str, Any]

# Container waiting reasons that do not resolve by waiting, most specific first.
WAITING_REASONS = (
    reasons.CREATE_CONTAINER_CONFIG_ERROR,
    reasons.INVALID_IMAGE_NAME,
    reasons.ERR_IMAGE_PULL,
    reasons.IMAGE_PULL_BACK_OFF,
    reasons.CREATE_CONTAINER_ERROR,
    reasons.RUN_CONTAINER_ERROR,
    reasons.CRASH_LOOP_BACK_OFF,
)
_RANK = {
    r: i for i, r in enumerate((*WAITING_REASONS[:-1], reasons.OOM_KILLED, WAITING_REASONS[-1], reasons.UNSCHEDULABLE))
}


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, Mapping))


def _container_causes(pod_name: str, statuses: Iterable[Any]) -> list[Cause]:
    out = []
    for cs in statuses:
        if not isinstance(cs, Mapping):
            continue
        who = f"pod {pod_name} container {cs.get('name', '?')}"
        waiting = (cs.get("state") or {}).get("waiting") or {}
        terminated = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated") or {}
        if terminated.get("reason") == reasons.OOM_KILLED:
            # An OOM loop waits in CrashLoopBackOff: the OOM is the cause worth naming.
            code = terminated.get("exitCode", 137)
            limit = " (restarting: CrashLoopBackOff)" if waiting.get("reason") == reasons.CRASH_LOOP_BACK_OFF else ""
            out.append(Cause(reasons.OOM_KILLED, f"{who} was OOMKilled (exit code {code}){limit}"))
        elif waiting.get("reason") in WAITING_REASONS:
            message = waiting.get("message") or ""
            out.append(Cause(str(waiting["reason"]), f"{who}: {message}" if message else who))
    return out


def pod_causes(pods: Iterable[Mapping[str, Any]]) -> list[Cause]:
    """Every cause the not-Ready pods report, most telling first (one per reason)."""
    found: dict[str, Cause] = {}
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if meta.get("deletionTimestamp") or _ready(pod):
            continue
        name = str(meta.get("name", "?"))
        causes = _container_causes(
            name, [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
        )
        for cond in status.get("conditions") or []:
            if isinstance(cond, Mapping) and (cond.get("type"), cond.get("status"), cond.get("reason")) == (
                "PodScheduled", "False", reasons.UNSCHEDULABLE,
            ):  # fmt: skip
                causes.append(Cause(reasons.UNSCHEDULABLE, f"pod {name}: {cond.get('message') or 'no node fits'}"))
        for cause in causes:
            found.setdefault(cause.reason, cause)
    return sorted(found.values(), key=lambda c: _RANK.get(c.reason, len(_RANK)))


def pool_cause(counts: PoolCounts, pods: Iterable[Mapping[str, Any]]) -> Cause | None:
    """The pool's failure: the progress deadline when the controller reports it (with the reason that says why),
    else pods that could not be created (ReplicaFailure: no pod exists to say why), else the pods' most telling
    reason; None when nothing is known to be wrong."""
    causes = pod_causes(pods)
    if (failure := counts.create_failure) is not None:
        reason = failure.reason or reasons.FAILED_CREATE
        causes.insert(0, Cause(reason, failure.message or "the ReplicaSet could not create pods"))
    if counts.deadline_exceeded:
        deployment = counts.progress.message if counts.progress is not None else ""
        why = f"{causes[0].reason}: {causes[0].message}" if causes else ""
        message = "; ".join(m for m in (deployment, why) if m) or "the roll made no progress within its deadline"
        return Cause(reasons.PROGRESS_DEADLINE_EXCEEDED, message, deadline_exceeded=True)
    return causes[0] if causes else None


def selects(deployment: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether the Deployment's selector (matchLabels) selects the pod."""
    match = (((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels")) or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return bool(match) and all(labels.get(k) == v for k, v in match.items())


def needs_pods(counts: PoolCounts, rendered: int | None) -> bool:
    """Only a pool that is not complete (or whose deadline passed) has pods worth reading."""
    return counts.deadline_exceeded or not counts.is_complete(rendered)


async def pool_causes(
    kube: Kube, namespace: str, instance: str, owned: Mapping[str, JSON], rendered: Mapping[str, int | None],
    previous: Mapping[str, Cause] | None = None,
) -> dict[str, Cause]:  # fmt: skip
    """Deployment name -> its failure, for this SpecServe's owned Deployments. `rendered`: the rendered replica
    count per desired pool (None: an autoscaler owns it; absent: a pool no longer rendered). `previous`: the
    causes the last status reported, kept while the pods cannot be read (unknown is not "healthy": dropping
    them would also post their event again when the read succeeds)."""
    deployments = [v for k, v in owned.items() if Ref(k).is_a(DEPLOYMENT)]
    counts = {d["metadata"]["name"]: read_pool(d) for d in deployments}
    out: dict[str, Cause] = {}
    if not any(needs_pods(c, rendered.get(n)) for n, c in counts.items()):
        return out  # the steady state: no LIST
    pods: list[JSON] | None
    try:
        pods = await kube.list(POD, namespace, {LABEL_INSTANCE: instance})
    except KubeError as exc:  # the causes are a report: the reconcile goes on without them
        log.warning("pods of %s/%s not read: %s", namespace, instance, exc)
        pods = None
    for d in deployments:
        name = d["metadata"]["name"]
        if not needs_pods(counts[name], rendered.get(name)):
            continue
        cause = pool_cause(counts[name], [p for p in pods or [] if selects(d, p)])
        if cause is None and pods is None and (kept := (previous or {}).get(name)) is not None:
            cause = None if kept.deadline_exceeded else kept  # the deadline is the Deployment's word, read now
        if cause is not None:
            out[name] = cause
    return out

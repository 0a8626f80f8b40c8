"""Stand-ins for the controllers that write status in a real cluster (Deployment controller + kubelet, Gateway).

They write through the status subresource like the real ones, so each is a separate write with its own
resourceVersion and watch event.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specserve_kubefake import pods
from specserve_kubefake.pods import PodState
from specserve_kubefake.resources import DEPLOYMENTS, HTTPROUTES, PODS, ResourceType
from specserve_kubefake.store import Store, now

JSON = dict[str, Any]
MANAGER = "kube-controller-manager"


Progressing = tuple[str, str, str]  # the Progressing condition's status, reason and message


def deployment_status(
    deployment: JSON, ready: int | None, updated: int | None = None, *, total: int | None = None,
    progressing: Progressing | None = None,
) -> JSON:  # fmt: skip
    """The status the Deployment controller writes: ``total`` pods (default ``spec.replicas``; more during a
    surge), ``updated`` of them on the current template, ``ready`` Ready; ``progressing`` overrides the
    Progressing condition (e.g. ``("False", "ProgressDeadlineExceeded", ...)``)."""
    spec = deployment.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    total_count = replicas if total is None else max(0, int(total))
    ready_count = replicas if ready is None else max(0, min(int(ready), total_count))
    updated_count = replicas if updated is None else max(0, min(int(updated), total_count))
    stamp = now()
    available = ready_count >= max(0, replicas - 1) if replicas else True
    name = deployment["metadata"]["name"]
    if progressing is None:
        done = ready_count == updated_count == replicas == total_count
        progressing = ("True", "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                       f'ReplicaSet "{name}" has successfully progressed.' if done else
                       f'ReplicaSet "{name}" is progressing.')  # fmt: skip
    status: JSON = {
        "observedGeneration": deployment["metadata"].get("generation", 1),
        "replicas": total_count,
        "updatedReplicas": updated_count,
        "readyReplicas": ready_count,
        "availableReplicas": ready_count,
        "conditions": [
            {"type": "Available", "status": "True" if available else "False",
             "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
             "message": "Deployment has minimum availability." if available else
             "Deployment does not have minimum availability.", "lastUpdateTime": stamp,
             "lastTransitionTime": stamp},
            {"type": "Progressing", "status": progressing[0], "reason": progressing[1], "message": progressing[2],
             "lastUpdateTime": stamp, "lastTransitionTime": stamp},
        ],
    }  # fmt: skip
    if ready_count < replicas:
        status["unavailableReplicas"] = replicas - ready_count
    if not total_count:
        del status["replicas"]
    if not ready_count:
        del status["readyReplicas"], status["availableReplicas"]  # zero counts are omitempty
    if not updated_count:
        del status["updatedReplicas"]
    return status


def _deployments(store: Store) -> ResourceType:
    rt = store.registry.get(DEPLOYMENTS)
    assert rt is not None
    return rt


def _write_status(store: Store, deployment: JSON, status: JSON) -> JSON:
    old = deployment.get("status") or {}
    # Keep transition times when nothing changed, as the controller does.
    for new_cond in status["conditions"]:
        for old_cond in old.get("conditions") or []:
            if old_cond.get("type") == new_cond["type"] and old_cond.get("status") == new_cond["status"]:
                new_cond["lastTransitionTime"] = old_cond.get("lastTransitionTime", new_cond["lastTransitionTime"])
                if old_cond.get("reason") == new_cond["reason"]:
                    new_cond["lastUpdateTime"] = old_cond.get("lastUpdateTime", new_cond["lastUpdateTime"])
    body = {"status": {**{k: None for k in old}, **status}}  # absent counts are removed, not kept stale
    meta = deployment["metadata"]
    return store.patch(_deployments(store), meta["namespace"], meta["name"], "merge", body, subresource="status",
                       manager=MANAGER)  # fmt: skip


def set_deployment_ready(
    store: Store, namespace: str, name: str, ready: int | None = None, updated: int | None = None, *,
    total: int | None = None, progressing: Progressing | None = None,
) -> JSON:  # fmt: skip
    deployment = store.must_get(_deployments(store), namespace, name)
    return _write_status(store, deployment, deployment_status(deployment, ready, updated, total=total,
                                                              progressing=progressing))  # fmt: skip


def deadline_exceeded(name: str, template: str) -> Progressing:
    return ("False", "ProgressDeadlineExceeded", f'ReplicaSet "{name}-{template}" has timed out progressing.')


def set_progress_deadline_exceeded(store: Store, namespace: str, name: str) -> JSON:
    """The controller gave up on the current rollout: ``Progressing=False, reason=ProgressDeadlineExceeded``;
    the counts stay as they are."""
    deployment = store.must_get(_deployments(store), namespace, name)
    status = dict(deployment.get("status") or {})
    progressing = deadline_exceeded(name, pods.template_hash(deployment))
    stamp = now()
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Progressing"]
    conditions.append({"type": "Progressing", "status": progressing[0], "reason": progressing[1],
                       "message": progressing[2], "lastUpdateTime": stamp, "lastTransitionTime": stamp})  # fmt: skip
    status["conditions"] = conditions
    status["observedGeneration"] = deployment["metadata"].get("generation", 1)
    return _write_status(store, deployment, status)


def _owned_pods(store: Store, namespace: str, name: str) -> list[JSON]:
    rt = store.registry.get(PODS)
    if rt is None:
        return []
    items, _ = store.select(rt, namespace)
    return [p for p in items if (p["metadata"].get("annotations") or {}).get(pods.DEPLOYMENT_ANNOTATION) == name]


def clear_pods(store: Store, namespace: str, name: str) -> None:
    rt = store.registry.get(PODS)
    assert rt is not None
    for pod in _owned_pods(store, namespace, name):
        if store.get(rt, namespace, pod["metadata"]["name"]) is not None:
            store.delete(rt, namespace, pod["metadata"]["name"])


def set_pods(
    store: Store, namespace: str, name: str, states: Sequence[PodState | str], *,
    progressing: Progressing | None = None,
) -> list[JSON]:  # fmt: skip
    """Replace the pods of a Deployment by ``states`` (PodState, or a state name for a pod on the current
    template) and write the Deployment's status to match: replicas = pods, updatedReplicas = pods on the current
    template, readyReplicas = Ready pods; Progressing True while the rollout goes on (or ``progressing``)."""
    deployment = store.must_get(_deployments(store), namespace, name)
    rt = store.registry.get(PODS)
    assert rt is not None
    wanted = [s if isinstance(s, PodState) else PodState(s) for s in states]
    clear_pods(store, namespace, name)
    current = pods.template_hash(deployment)
    previous = pods.previous_hash(current)
    stamp = now()
    out = []
    for index, state in enumerate(wanted):
        doc = pods.pod(deployment, index, state, current if state.updated else previous, stamp)
        status = doc.pop("status")
        store.create(doc, rt=rt, manager=MANAGER)
        out.append(store.patch(rt, namespace, doc["metadata"]["name"], "merge", {"status": status},
                               subresource="status", manager="kubelet"))  # fmt: skip
    ready = sum(1 for s in wanted if s.ready)
    updated = sum(1 for s in wanted if s.updated)
    if progressing is None:
        waiting = [s for s in wanted if s.updated and not s.ready]
        if waiting:
            progressing = ("True", "ReplicaSetUpdated", f'ReplicaSet "{name}-{current}" is progressing.')
    set_deployment_ready(store, namespace, name, ready=ready, updated=updated, total=len(wanted),
                         progressing=progressing)  # fmt: skip
    return out


def _resolve(value: Any, replicas: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = replicas * int(value[:-1])
        return -(-share // 100) if round_up else share // 100
    return int(value)


def _max_unavailable(deployment: JSON, replicas: int) -> int:
    rolling = ((deployment.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    if ((deployment.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate":
        return replicas
    value = rolling.get("maxUnavailable", "25%")
    count = replicas * int(value[:-1]) // 100 if isinstance(value, str) and value.endswith("%") else int(value)
    surge = rolling.get("maxSurge", "25%")
    no_surge = surge in (0, "0%", "0")
    return max(count, 1) if no_surge else count  # both 0 is refused; with no surge one pod must go first


def _max_surge(deployment: JSON, replicas: int) -> int:
    strategy = (deployment.get("spec") or {}).get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0
    return _resolve((strategy.get("rollingUpdate") or {}).get("maxSurge", "25%"), replicas, round_up=True)


@dataclass
class Stall:
    """Rollouts of one Deployment that never finish: the new pods stay in ``state``; after ``deadline`` seconds
    (None: the Deployment's progressDeadlineSeconds) the controller reports ProgressDeadlineExceeded."""

    state: str
    message: str = ""
    deadline: float | None = None
    template: str = ""  # the template hash of the rollout being stalled ("" before one starts)
    old_ready: int | None = None  # Ready pods of the previous template when the stalled rollout began


class DeploymentController:
    """The Deployment controller and kubelet stand-in behind ``auto_ready`` / ``observe_rollouts``, with rollouts
    that can be made to stall (``stall``) and pods that report why."""

    def __init__(self, mode: str | None) -> None:
        self.mode = mode  # "auto", "observe" or None (the test writes every status)
        self.stalls: dict[tuple[str, str], Stall] = {}

    def hook(self, store: Store, rt: ResourceType, new: JSON, old: JSON | None) -> None:
        if rt.key != DEPLOYMENTS or new["metadata"].get("deletionTimestamp"):
            return
        meta = new["metadata"]
        generation = meta.get("generation")
        observed = (new.get("status") or {}).get("observedGeneration")
        if observed == generation and old is not None:
            return
        stall = self.stalls.get((meta["namespace"], meta["name"]))
        if stall is not None and self._rolls(new, old, stall):
            self._stall(store, new, old, stall)
        elif self.mode == "auto":
            set_deployment_ready(store, meta["namespace"], meta["name"])
        elif self.mode == "observe":
            observe_rollout_hook(store, rt, new, old)

    @staticmethod
    def _rolls(new: JSON, old: JSON | None, stall: Stall) -> bool:
        """Whether this write starts (or changes the size of) a stalled rollout: a new template, or any change
        while a stalled rollout is in progress. A replica-only change otherwise scales without a rollout."""
        template = pods.template_hash(new)
        return old is None or template != pods.template_hash(old) or template == stall.template

    def stall(self, store: Store, namespace: str, name: str, stall: Stall) -> None:
        """Stall the next rollouts of this Deployment (and the one in progress, when its pods are not all Ready)."""
        self.stalls[(namespace, name)] = stall
        deployment = store.get(_deployments(store), namespace, name)
        if deployment is None:
            return
        status = deployment.get("status") or {}
        replicas = int((deployment.get("spec") or {}).get("replicas", 1))
        in_progress = (
            status.get("observedGeneration") != deployment["metadata"].get("generation")
            or int(status.get("updatedReplicas") or 0) < replicas
            or int(status.get("readyReplicas") or 0) < replicas
        )
        if in_progress:
            self._stall(store, deployment, None, stall)

    def unstall(self, store: Store, namespace: str, name: str) -> None:
        """The cause is gone (image pushed, node added): the rollout completes now under ``auto_ready``; otherwise
        the test writes the status."""
        self.stalls.pop((namespace, name), None)
        if store.get(_deployments(store), namespace, name) is None:
            return
        clear_pods(store, namespace, name)
        if self.mode == "auto":
            set_deployment_ready(store, namespace, name)

    def _stall(self, store: Store, deployment: JSON, old: JSON | None, stall: Stall) -> None:
        meta = deployment["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        replicas = int((deployment.get("spec") or {}).get("replicas", 1))
        template = pods.template_hash(deployment)
        if stall.template != template:  # a new stalled rollout: the previous template's Ready pods are the base
            previous = (old or deployment).get("status") or {}
            stall.old_ready = int(previous.get("readyReplicas") or 0)
            stall.template = template
        unavailable = _max_unavailable(deployment, replicas)
        old_kept = max(0, min(stall.old_ready or 0, replicas - unavailable))
        new_count = max(1, min(replicas, _max_surge(deployment, replicas) + unavailable)) if replicas else 0
        stuck = PodState(stall.state, True, stall.message)
        states = [PodState("Ready", updated=False)] * old_kept + [stuck] * new_count
        set_pods(store, namespace, name, states)
        deadline = stall.deadline
        if deadline is None:
            deadline = float((deployment.get("spec") or {}).get("progressDeadlineSeconds", 600))
        generation = meta.get("generation")

        def expire() -> None:
            current = store.get(_deployments(store), namespace, name)
            if current is None or self.stalls.get((namespace, name)) is not stall:
                return
            if current["metadata"].get("generation") == generation:
                set_progress_deadline_exceeded(store, namespace, name)

        if deadline <= 0:
            expire()
            return
        # Without a running loop (a synchronous test) the test calls set_progress_deadline_exceeded itself.
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().call_later(deadline, expire)


def auto_ready_hook(store: Store, rt: ResourceType, new: JSON, old: JSON | None) -> None:
    """After each change of a Deployment's generation: fully ready at once."""
    if rt.key != DEPLOYMENTS:
        return
    observed = (new.get("status") or {}).get("observedGeneration")
    if observed == new["metadata"].get("generation") and old is not None:
        return
    if new["metadata"].get("deletionTimestamp"):
        return
    set_deployment_ready(store, new["metadata"]["namespace"], new["metadata"]["name"])


def observe_rollout_hook(store: Store, rt: ResourceType, new: JSON, old: JSON | None) -> None:
    """The Deployment controller at the start of a rollout: it has seen the new generation at once, no pod runs
    the new template yet, and up to maxUnavailable old pods are already going. Readiness comes when the test
    calls set_deployment_ready."""
    if rt.key != DEPLOYMENTS or old is None or new["metadata"].get("deletionTimestamp"):
        return
    generation = new["metadata"].get("generation")
    observed = (new.get("status") or {}).get("observedGeneration")
    if generation in (old["metadata"].get("generation"), observed):
        return
    replicas = int((new.get("spec") or {}).get("replicas", 1))
    was_ready = int((old.get("status") or {}).get("readyReplicas") or 0)
    ready = max(0, min(was_ready, replicas) - _max_unavailable(new, replicas))
    set_deployment_ready(store, new["metadata"]["namespace"], new["metadata"]["name"], ready=ready, updated=0)


def set_route_accepted(store: Store, namespace: str, name: str, accepted: bool = True) -> JSON:
    rt = store.registry.get(HTTPROUTES)
    assert rt is not None
    route = store.must_get(rt, namespace, name)
    stamp = now()
    parents = []
    for ref in (route.get("spec") or {}).get("parentRefs") or []:
        parents.append(
            {
                "parentRef": {k: ref[k] for k in ("group", "kind", "name", "namespace", "sectionName") if k in ref},
                "controllerName": "kubefake.specserve.io/gateway",
                "conditions": [
                    {"type": "Accepted", "status": "True" if accepted else "False",
                     "reason": "Accepted" if accepted else "NotAllowedByListeners", "message": "",
                     "observedGeneration": route["metadata"].get("generation", 1), "lastTransitionTime": stamp},
                    {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs", "message": "",
                     "observedGeneration": route["metadata"].get("generation", 1), "lastTransitionTime": stamp},
                ],
            }
        )  # fmt: skip
    return store.patch(rt, namespace, name, "merge", {"status": {"parents": parents}}, subresource="status",
                       manager="gateway-controller")  # fmt: skip


class GatewayController:
    """A Gateway implementation's stand-in: it accepts each new generation of every HTTPRoute (status.parents with
    observedGeneration), ``delay`` seconds after the write (0: at once, in the same write's aftermath)."""

    def __init__(self, delay: float = 0.0, accepted: bool = True) -> None:
        self.delay, self.accepted = delay, accepted

    def hook(self, store: Store, rt: ResourceType, new: JSON, old: JSON | None) -> None:
        if rt.key != HTTPROUTES or new["metadata"].get("deletionTimestamp"):
            return
        if not (new.get("spec") or {}).get("parentRefs"):
            return  # attached to no Gateway: nobody reports on it
        generation = new["metadata"].get("generation")
        parents = (new.get("status") or {}).get("parents") or []
        seen = {c.get("observedGeneration") for p in parents for c in p.get("conditions") or []}
        if seen == {generation}:
            return
        namespace, name = new["metadata"]["namespace"], new["metadata"]["name"]

        def accept() -> None:
            current = store.get(rt, namespace, name)
            if current is not None and current["metadata"].get("generation") == generation:
                set_route_accepted(store, namespace, name, self.accepted)

        if self.delay <= 0:
            accept()
            return
        try:
            asyncio.get_running_loop().call_later(self.delay, accept)
        except RuntimeError:
            accept()

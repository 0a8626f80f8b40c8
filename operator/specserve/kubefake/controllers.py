"""Stand-ins for the controllers that write status in a real cluster (Deployment controller + kubelet, Gateway).

They write through the status subresource like the real ones, so each is a separate write with its own
resourceVersion and watch event.
"""

from __future__ import annotations

from typing import Any

from specserve.kubefake.resources import DEPLOYMENTS, HTTPROUTES, ResourceType
from specserve.kubefake.store import Store, now

JSON = dict[str, Any]
MANAGER = "kube-controller-manager"


def deployment_status(deployment: JSON, ready: int | None, updated: int | None = None) -> JSON:
    spec = deployment.get("spec") or {}
    replicas = int(spec.get("replicas", 1))
    ready_count = replicas if ready is None else max(0, min(int(ready), replicas))
    updated_count = replicas if updated is None else max(0, min(int(updated), replicas))
    stamp = now()
    available = ready_count >= max(0, replicas - 1) if replicas else True
    status: JSON = {
        "observedGeneration": deployment["metadata"].get("generation", 1),
        "replicas": replicas,
        "updatedReplicas": updated_count,
        "readyReplicas": ready_count,
        "availableReplicas": ready_count,
        "conditions": [
            {"type": "Available", "status": "True" if available else "False",
             "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
             "message": "Deployment has minimum availability." if available else
             "Deployment does not have minimum availability.", "lastUpdateTime": stamp,
             "lastTransitionTime": stamp},
            {"type": "Progressing", "status": "True",
             "reason": "NewReplicaSetAvailable" if ready_count == updated_count == replicas else "ReplicaSetUpdated",
             "message": f'ReplicaSet "{deployment["metadata"]["name"]}" has successfully progressed.',
             "lastUpdateTime": stamp, "lastTransitionTime": stamp},
        ],
    }  # fmt: skip
    if ready_count < replicas:
        status["unavailableReplicas"] = replicas - ready_count
    if not ready_count:
        del status["readyReplicas"], status["availableReplicas"]  # zero counts are omitempty
    if not updated_count:
        del status["updatedReplicas"]
    return status


def _deployments(store: Store) -> ResourceType:
    rt = store.registry.get(DEPLOYMENTS)
    assert rt is not None
    return rt


def set_deployment_ready(
    store: Store, namespace: str, name: str, ready: int | None = None, updated: int | None = None
) -> JSON:
    rt = _deployments(store)
    deployment = store.must_get(rt, namespace, name)
    status = deployment_status(deployment, ready, updated)
    old = deployment.get("status") or {}
    # Keep transition times when nothing changed, as the controller does.
    for new_cond in status["conditions"]:
        for old_cond in old.get("conditions") or []:
            if old_cond.get("type") == new_cond["type"] and old_cond.get("status") == new_cond["status"]:
                new_cond["lastTransitionTime"] = old_cond.get("lastTransitionTime", new_cond["lastTransitionTime"])
                if old_cond.get("reason") == new_cond["reason"]:
                    new_cond["lastUpdateTime"] = old_cond.get("lastUpdateTime", new_cond["lastUpdateTime"])
    body = {"status": {**{k: None for k in old}, **status}}  # absent counts are removed, not kept stale
    return store.patch(rt, namespace, name, "merge", body, subresource="status", manager=MANAGER)


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


def _max_unavailable(deployment: JSON, replicas: int) -> int:
    rolling = ((deployment.get("spec") or {}).get("strategy") or {}).get("rollingUpdate") or {}
    if ((deployment.get("spec") or {}).get("strategy") or {}).get("type") == "Recreate":
        return replicas
    value = rolling.get("maxUnavailable", "25%")
    count = replicas * int(value[:-1]) // 100 if isinstance(value, str) and value.endswith("%") else int(value)
    surge = rolling.get("maxSurge", "25%")
    no_surge = surge in (0, "0%", "0")
    return max(count, 1) if no_surge else count  # both 0 is refused; with no surge one pod must go first


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

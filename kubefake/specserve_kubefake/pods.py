"""Pods as the kubelet and the scheduler report them: the documents for each state a pod of a Deployment can be
in (Ready, starting, unschedulable, image pull back-off, crash loop, OOM-killed), worded as Kubernetes words them.
Pure: building the documents; controllers.py stores them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

JSON = dict[str, Any]
# Which Deployment a pod stands for (the fake has no ReplicaSets; ownerReferences point at the Deployment).
DEPLOYMENT_ANNOTATION = "kubefake.specserve.io/deployment"

# The states a pod can be put in, with whether it counts as Ready.
STATES = {
    "Ready": True,
    "Running": False,  # running, readiness probe not passing yet
    "Pending": False,  # scheduled, containers being created
    "ContainerCreating": False,
    "Unschedulable": False,
    "ImagePullBackOff": False,
    "ErrImagePull": False,
    "CrashLoopBackOff": False,
    "OOMKilled": False,
}


@dataclass(frozen=True)
class PodState:
    """One pod: its state (a key of STATES), whether it runs the Deployment's current template (``updated``),
    and an optional message (the default is the one Kubernetes would write)."""

    state: str = "Ready"
    updated: bool = True
    message: str = ""

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"pod state {self.state!r}: use one of {sorted(STATES)}")

    @property
    def ready(self) -> bool:
        return STATES[self.state]


def template_hash(deployment: JSON) -> str:
    """A stand-in for the ReplicaSet's pod-template-hash: stable for one template, different for another."""
    template = (deployment.get("spec") or {}).get("template") or {}
    digest = hashlib.sha256(json.dumps(template, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return digest[:10]


def previous_hash(current: str) -> str:
    """The hash standing for "the template before this one" (pods not yet updated)."""
    return hashlib.sha256(f"previous/{current}".encode()).hexdigest()[:10]


def _condition(kind: str, ok: bool, stamp: str, reason: str = "", message: str = "") -> JSON:
    cond: JSON = {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None,
                  "lastTransitionTime": stamp}  # fmt: skip
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _container_status(container: JSON, state: PodState, stamp: str) -> JSON:
    image = container.get("image", "")
    status: JSON = {"name": container.get("name", "main"), "image": image, "imageID": "", "ready": state.ready,
                    "restartCount": 0, "started": state.state in ("Ready", "Running")}  # fmt: skip
    if state.state in ("Ready", "Running"):
        status["state"] = {"running": {"startedAt": stamp}}
        status["imageID"] = f"{image}@sha256:{'0' * 64}"
    elif state.state in ("Pending", "ContainerCreating"):
        status["state"] = {"waiting": {"reason": "ContainerCreating"}}
    elif state.state in ("ImagePullBackOff", "ErrImagePull"):
        text = state.message or f'Back-off pulling image "{image}": ErrImagePull: failed to pull and unpack image'
        status["state"] = {"waiting": {"reason": state.state, "message": text}}
    elif state.state == "CrashLoopBackOff":
        status["restartCount"] = 5
        text = state.message or "back-off 5m0s restarting failed container"
        status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": text}}
        status["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": stamp,
                                              "finishedAt": stamp}}  # fmt: skip
    elif state.state == "OOMKilled":
        status["restartCount"] = 3
        text = state.message or "back-off 2m40s restarting failed container"
        status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": text}}
        status["lastState"] = {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": stamp,
                                              "finishedAt": stamp}}  # fmt: skip
    return status


def pod_status(deployment: JSON, state: PodState, stamp: str) -> JSON:
    """The status the scheduler and kubelet would report for a pod of ``deployment`` in ``state``."""
    if state.state == "Unschedulable":
        replicas = int((deployment.get("spec") or {}).get("replicas", 1))
        text = state.message or (f"0/{max(replicas, 1)} nodes are available: {max(replicas, 1)} Insufficient "
                                 "nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims "
                                 "found for incoming pod.")  # fmt: skip
        return {"phase": "Pending", "qosClass": "Burstable",
                "conditions": [_condition("PodScheduled", False, stamp, "Unschedulable", text)]}  # fmt: skip
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    ready = state.ready
    starting = ("Pending", "ContainerCreating", "ImagePullBackOff", "ErrImagePull")
    phase = "Pending" if state.state in starting else "Running"
    not_ready = "" if ready else "ContainersNotReady"
    waiting = [c.get("name", "main") for c in containers]
    text = "" if ready else f"containers with unready status: [{' '.join(waiting)}]"
    return {
        "phase": phase,
        "qosClass": "Burstable",
        "hostIP": "10.0.0.1",
        "podIP": "10.244.0.10",
        "startTime": stamp,
        "conditions": [
            _condition("PodReadyToStartContainers", phase == "Running" or ready, stamp),
            _condition("Initialized", True, stamp),
            _condition("Ready", ready, stamp, not_ready, text),
            _condition("ContainersReady", ready, stamp, not_ready, text),
            _condition("PodScheduled", True, stamp),
        ],
        "containerStatuses": [_container_status(c, state, stamp) for c in containers],
    }


def pod(deployment: JSON, index: int, state: PodState, template: str, stamp: str) -> JSON:
    """A Pod of ``deployment`` (its template's labels plus ``pod-template-hash``) named as a ReplicaSet names
    them; ``template`` is the hash of the template it runs."""
    meta = deployment["metadata"]
    spec = deployment.get("spec") or {}
    tmpl = spec.get("template") or {}
    labels = {**((tmpl.get("metadata") or {}).get("labels") or {}), "pod-template-hash": template}
    spec_of_pod = dict(tmpl.get("spec") or {})
    if state.state != "Unschedulable":
        spec_of_pod["nodeName"] = "gpu-node-1"
    suffix = hashlib.sha256(f"{meta['name']}/{template}/{index}".encode()).hexdigest()[:5]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{template}-{suffix}",
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": {DEPLOYMENT_ANNOTATION: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": spec_of_pod,
        "status": pod_status(deployment, state, stamp),
    }

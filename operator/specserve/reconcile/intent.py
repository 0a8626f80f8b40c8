"""Rendered manifests as the planner sees them, and the planner's decisions folded back into them (pure)."""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from specserve.kube.drift import contains
from specserve.pool_state import TEMPLATE_HASH, read_pool
from specserve.reconcile.rollout import DesiredPool, LivePool

JSON = dict[str, Any]
__all__ = ["TEMPLATE_HASH"]  # re-exported: the annotation is read by specserve.pool_state


def template_hash(deployment: Mapping[str, Any]) -> str:
    template = deployment["spec"]["template"]
    return hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).hexdigest()[:16]


def with_template_hash(deployment: Mapping[str, Any]) -> JSON:
    out = copy.deepcopy(dict(deployment))
    meta = out["metadata"]
    meta["annotations"] = {**(meta.get("annotations") or {}), TEMPLATE_HASH: template_hash(deployment)}
    return out


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _max_surge(deployment: Mapping[str, Any], replicas: int) -> int:
    surge = ((deployment["spec"].get("strategy") or {}).get("rollingUpdate") or {}).get("maxSurge", 0)
    if isinstance(surge, str) and surge.endswith("%"):
        return math.ceil(replicas * _int(surge[:-1]) / 100)
    return _int(surge)


def desired_pool(deployment: Mapping[str, Any]) -> DesiredPool:
    replicas = deployment["spec"].get("replicas")  # absent: an autoscaler owns it
    return DesiredPool(
        name=deployment["metadata"]["name"],
        replicas=None if replicas is None else int(replicas),
        template_hash=template_hash(deployment),
        max_surge=_max_surge(deployment, int(replicas) if replicas is not None else 1),
    )


def live_pool(live: Mapping[str, Any], desired: Mapping[str, Any] | None, failure: str | None = None) -> LivePool:
    """What the Deployment controller reports (through the one reader, `specserve.pool_state`), and whether the
    live pod template is the one we want now.

    Current means our template hash is on the Deployment (the intent we applied), and no other field manager
    has edited the template since. The live template's content is not compared when nobody else wrote it: a
    mutating webhook (a sidecar, an injected env or volume, an image rewritten to a mirror) changes the stored
    template in our own request, and comparing content made such a pool "never current", drained forever."""
    counts = read_pool(live)
    current = False
    if desired is not None and counts.template_hash == template_hash(desired):
        spec = live.get("spec") or {}
        current = not counts.foreign_template or contains(spec.get("template"), desired["spec"]["template"])
    return LivePool(**vars(counts), template_current=current, failure=failure)


def route_backends(route: Mapping[str, Any] | None) -> dict[str, int] | None:
    """Backend Service -> weight on an HTTPRoute (a backendRef without weight has weight 1)."""
    if route is None:
        return None
    out: dict[str, int] = {}
    for rule in (route.get("spec") or {}).get("rules") or []:
        for backend in rule.get("backendRefs") or []:
            out[backend["name"]] = out.get(backend["name"], 0) + _int(backend.get("weight", 1))
    return out


def with_route_weights(route: Mapping[str, Any], weights: tuple[tuple[str, int], ...]) -> JSON:
    """The rendered HTTPRoute with the planner's backends and weights (a replaced pool keeps its backend
    until its traffic has moved)."""
    out = copy.deepcopy(dict(route))
    for rule in out["spec"]["rules"]:
        rendered = rule.get("backendRefs") or []
        template = rendered[0] if rendered else {"group": "", "kind": "Service", "port": 30000}
        by_name = {b["name"]: b for b in rendered}
        rule["backendRefs"] = [{**by_name.get(name, template), "name": name, "weight": w} for name, w in weights]
    return out

"""Traffic first (pure): which route backends may carry weight now, and when the route goes before everything else.

A weighted backend whose Service does not exist answers 500 for its share on every Gateway implementation, and
a pool with no Ready replica answers nothing: the route is applied before any other object when its change moves
traffic off such a pool, so no refused or slow apply of another object can hold a failover back.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Set
from datetime import datetime
from typing import Any

JSON = dict[str, Any]
# An HTTPRoute rule's backends, (Service, weight) in order; api.models.Weights is the pools' split.
BackendWeights = tuple[tuple[str, int], ...]


def apportion(total: int, base: Mapping[str, int]) -> dict[str, int]:
    """`total` split over the names of `base` in proportion to their weights (equally when all are 0), in whole
    numbers: each gets the floor of its exact share, and what the floors leave goes one each to the largest
    weights first (ties: in `base`'s order). The one way route weight is divided (the rollout's weights, a
    failover's moved share, the last line of defence)."""
    if not base:
        return {}
    share = dict(base) if sum(base.values()) > 0 else dict.fromkeys(base, 1)
    whole = sum(share.values())
    out = {n: w * total // whole for n, w in share.items()}
    for n in sorted(share, key=lambda k: -share[k])[: total - sum(out.values())]:
        out[n] += 1
    return out


def servable(weights: BackendWeights, services: Set[str]) -> BackendWeights:
    """The weights with no share on a backend whose Service does not exist: its share goes to the backends that
    have one, in proportion to their weights. Unchanged when no backend with a Service has weight (nothing can
    take it: the planner's aim stands until a Service appears)."""
    missing = [n for n, w in weights if w > 0 and n not in services]
    keep = {n: w for n, w in weights if w > 0 and n in services}
    if not missing or not keep:
        return weights
    total = sum(w for _, w in weights)
    scale = total / sum(keep.values())
    out = {n: int(w * scale) for n, w in keep.items()}
    for n in sorted(keep, key=lambda k: (-keep[k], k))[: total - sum(out.values())]:  # largest first
        out[n] += 1
    return tuple((n, out.get(n, 0)) for n, _ in weights)


def moves_off_dead(live: Mapping[str, int] | None, weights: BackendWeights, serving: Set[str]) -> bool:
    """Does the new route take weight off a backend that has no Ready replica, onto one that has?"""
    if not live:
        return False
    new = dict(weights)
    relieved = any(w > 0 and n not in serving and new.get(n, 0) < w for n, w in live.items())
    return relieved and any(w > 0 and n in serving for n, w in new.items())


def with_live_backends(route: Mapping[str, Any], live: Mapping[str, Any] | None, names: Set[str]) -> JSON:
    """The rendered route, but the backends named keep their live backendRef (port...): their Service's change
    was refused, so the route must keep addressing the Service as it is."""
    if not names or live is None:
        return dict(route)
    out = copy.deepcopy(dict(route))
    live_rules = (live.get("spec") or {}).get("rules") or []
    for index, rule in enumerate(out["spec"].get("rules") or []):
        kept = {b["name"]: b for b in (live_rules[index] if index < len(live_rules) else {}).get("backendRefs") or []}
        rule["backendRefs"] = [
            {**kept[b["name"]], "weight": b.get("weight", 1)} if b["name"] in names and b["name"] in kept else b
            for b in rule.get("backendRefs") or []
        ]
    return out


def gateway_pending(
    route: Mapping[str, Any] | None, moved: datetime | None, now: datetime, settle: float
) -> str | None:
    """Why a roll or prune that follows a weight change must wait for the Gateway (None: it need not).

    A Gateway that reports status must have observed the route's current generation (every parent's Accepted
    condition; one without observedGeneration cannot tell and counts as current). One that reports nothing gets
    `settle` seconds after the last weight change, as Argo Rollouts' scaleDownDelaySeconds."""
    if route is None:
        return None
    generation = (route.get("metadata") or {}).get("generation")
    accepted = [
        c
        for parent in (route.get("status") or {}).get("parents") or []
        for c in parent.get("conditions") or []
        if c.get("type") == "Accepted"
    ]
    if accepted:
        stale = [
            c for c in accepted if generation is not None and (c.get("observedGeneration") or generation) < generation
        ]
        if stale:
            return (
                f"waiting for the Gateway to accept generation {generation} of the HTTPRoute before rolling or pruning"
            )
        return None
    if moved is None:
        return None
    left = settle - (now - moved).total_seconds()
    if left <= 0:
        return None
    return (
        f"the Gateway reports no HTTPRoute status: waiting {left:.0f} s more (spec.routing.settleSeconds) after the "
        "weight change before rolling or pruning"
    )


def keep_serving(weights: BackendWeights, serving: Set[str]) -> BackendWeights:
    """The last line of defence: never all the weight on backends that cannot serve (nor 0/0) while one can. The
    planner never asks for that; if it ever did, the Ready backends share the total equally."""
    ready = [n for n, _ in weights if n in serving]
    if not ready or any(w > 0 and n in serving for n, w in weights):
        return weights
    share = apportion(sum(w for _, w in weights) or 100, dict.fromkeys(ready, 0))
    return tuple((n, share.get(n, 0)) for n, _ in weights)


def relieve(live: Mapping[str, int] | None, serving: Set[str], known: Set[str]) -> BackendWeights | None:
    """The failover fast path's weights: the live route with every share on a backend the watch reports without a
    Ready replica (`known` but not `serving`) moved onto the backends that have one, in proportion to their
    weights (equally when none has weight yet). Backends the watch knows nothing of keep their share. None when
    nothing is to move, or nowhere to move it: the weight never leaves every backend, never lands on one that is
    not Ready."""
    if not live:
        return None
    dead = {n for n, w in live.items() if w > 0 and n in known and n not in serving}
    takers = [n for n in live if n in serving and n in known]
    if not dead or not takers:
        return None
    # In name order: of equal weights, the first name takes a remainder.
    share = apportion(sum(live[n] for n in dead), {n: live[n] for n in sorted(takers)})
    return tuple((n, 0 if n in dead else w + share.get(n, 0)) for n, w in live.items())

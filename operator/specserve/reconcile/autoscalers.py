"""An autoscaler fighting the operator over a pool's replicas: found and named, so it is reported, not fought
silently.

Cost: no request in a steady state. The signal is on the Deployments the reconcile already read: another field
manager wrote `spec.replicas` of a pool whose count the operator owns (an HPA writes it through the scale
subresource). Only then, or while the last status still reports such a conflict (our forced re-apply takes the
field back, so the signal alone comes and goes with each HPA sync), are the namespace's HPAs listed to name the
one that targets the pool. A namespace-wide HPA LIST on every reconcile was the alternative: one more LIST per
SpecServe per resync for a conflict that is rare.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from specserve.kube.client import KubeError
from specserve.kube.kinds import DEPLOYMENT, HORIZONTALPODAUTOSCALER, Ref
from specserve.pool_state import foreign_replicas_owner
from specserve.reconcile.apply import Kube

log = logging.getLogger(__name__)
JSON = dict[str, Any]


def hpa_targets(hpas: list[JSON]) -> dict[str, str]:
    """Deployment name -> the name of an HPA that scales it."""
    out: dict[str, str] = {}
    for hpa in hpas:
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        if ref.get("kind") == DEPLOYMENT.kind and ref.get("name"):
            out.setdefault(str(ref["name"]), str((hpa.get("metadata") or {}).get("name", "?")))
    return out


def conflicts(owned_pools: Mapping[str, JSON], writers: Mapping[str, str], targets: Mapping[str, str]) -> list[str]:
    """One message per pool whose replicas the operator owns and something else scales (pure)."""
    out = []
    for name in sorted(owned_pools):
        if name in targets:
            who = f"HorizontalPodAutoscaler {targets[name]} scales {name}"
        elif name in writers:
            who = f"field manager {writers[name]!r} wrote spec.replicas of {name}"
        else:
            continue
        out.append(
            f"{who}, whose replica count the SpecServe sets: the operator sets it back on every reconcile; set "
            f"autoscaling: External on that pool in spec.pools to hand the count to the autoscaler"
        )
    return out


async def autoscaler_conflicts(
    kube: Kube, namespace: str, owned: Mapping[str, JSON], rendered: Mapping[str, int | None], reported: bool
) -> tuple[str, ...]:
    """`rendered`: desired pool -> its rendered replica count (None: an autoscaler owns it by spec).
    `reported`: the last status reports a conflict (look again, so it clears only when the HPA is gone)."""
    deployments = {d["metadata"]["name"]: d for k, d in owned.items() if Ref(k).is_a(DEPLOYMENT)}
    ours = {n: d for n, d in deployments.items() if rendered.get(n) is not None}
    writers = {n: w for n, d in ours.items() if (w := foreign_replicas_owner(d)) is not None}
    if not ours or (not writers and not reported):
        return ()
    try:
        hpas = await kube.list(HORIZONTALPODAUTOSCALER, namespace, {})
    except KubeError as exc:  # a report only: say what the Deployments show
        log.warning("HorizontalPodAutoscalers in %s not read: %s", namespace, exc)
        hpas = []
    return tuple(conflicts(ours, writers, hpa_targets(hpas)))

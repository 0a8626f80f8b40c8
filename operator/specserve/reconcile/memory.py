"""What the reconcile remembers between passes (pure): `status.rollout` and the reconcile's own conditions.

The reconcile is level-based, but a few things cannot be observed again: that a downtime was announced, when the
route's weights last moved (the Gateway's settle time counts from it), which objects the server refused, which
causes and conflicts were already reported (each Warning once), and that the PodMonitor API was found missing.
"""

from __future__ import annotations

from specserve.api import reasons
from specserve.api.conditions import DEGRADED, POD_MONITOR_READY, find_condition
from specserve.api.models import RolloutState, SpecServe, SpecServeStatus
from specserve.kube.kinds import PODMONITOR, Ref
from specserve.reconcile.observe import Cause, Pass
from specserve.reconcile.rollout import World


def reported_causes(old: SpecServeStatus) -> dict[str, Cause]:
    """The causes the last status reported, per pool (a pod that is gone may have been the only witness)."""
    return {
        p.name: Cause(p.failure.reason, p.failure.message, p.failure.deadline_exceeded)
        for p in old.pools
        if p.failure is not None
    }


def conflict_reported(old: SpecServeStatus) -> bool:
    return any(c.type == DEGRADED and c.reason == reasons.AUTOSCALER_CONFLICT for c in old.conditions)


def known_absent(obj: SpecServe, old: SpecServeStatus) -> set[str]:
    """The PodMonitor API was found missing for this very generation: do not try again every resync (a spec
    edit, or an operator restart with the condition cleared, tries again)."""
    cond = find_condition(old.conditions, POD_MONITOR_READY)
    if (
        cond is not None
        and cond.reason == reasons.NOT_INSTALLED
        and cond.observed_generation == obj.metadata.generation
    ):
        return {Ref.of(PODMONITOR, obj.metadata.name)}
    return set()


def refused(p: Pass) -> list[str]:
    """Objects refused and not applied since: those refused now, and those refused before and not tried again
    (held) that are still wanted."""
    wanted = {Ref.of_object(m) for m in p.desired}
    before = set(p.old.rollout.refused) if p.old.rollout is not None else set()
    kept = {k for k in before if k in wanted and k not in p.applied.applied}
    return sorted(kept | set(p.applied.failed))


def rollout_state(p: Pass, world: World, moved_at: str | None) -> RolloutState | None:
    """Announcements stay until their pool's template is current (a refused roll is not announced twice); the
    time of the last weight change moves when this pass changed the route's weights (`moved_at`)."""
    pending = {
        d.announcement for d in world.desired if (lp := world.live.get(d.name)) is not None and not lp.template_current
    }
    announced = (world.announced & pending) | ({p.plan.announcement} if p.plan.announcement else set())
    previous = p.old.rollout or RolloutState()
    state = RolloutState(
        announced=sorted(announced), weights_changed=moved_at or previous.weights_changed, refused=refused(p)
    )
    return None if state == RolloutState() else state


def warnings(p: Pass) -> tuple[tuple[str, str], ...]:
    """Warning events, each once: the downtime announcement (the pass that first makes it; the next one acts),
    and each object whose apply newly failed (one that already failed on the previous pass is not repeated)."""
    out: list[tuple[str, str]] = []
    rollout = p.old.rollout
    announced = rollout.announced if rollout is not None else []
    if p.plan.downtime is not None and p.plan.announcement not in announced:
        out.append((reasons.DOWNTIME_AHEAD, p.plan.downtime))
    refused_before = set(rollout.refused) if rollout is not None else set()
    out += [
        (reasons.APPLY_FAILED, f"{key}: {message}")
        for key, message in p.applied.failed.items()
        if key not in refused_before
    ]
    return tuple(out)

"""No kopf finalizer on SpecServes: a SpecServe (or its namespace) deletes even while the operator is down.

Nothing needs cleaning up on deletion (children carry ownerReferences, the garbage collector removes them), but
kopf puts its finalizer on every object a timer or daemon serves, to be sure it can stop them. Here the handlers
are registered without that requirement, and the resync timer stops itself on the object's DELETED event
instead (an object without finalizers vanishes at once: kopf never sees a deletionTimestamp). kopf then also
removes the finalizer older versions added, the first time it sees such an object.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import kopf

GONE = "specserve.gone"  # per-object memo key: set by the DELETED event, read by the timers' filter


def _not_gone(memo: kopf.Memo, **_: Any) -> bool:
    return not memo.get(GONE, False)


def _and(first: Any, second: Any) -> Any:
    if first is None:
        return second

    def both(**kwargs: Any) -> bool:
        return bool(first(**kwargs)) and bool(second(**kwargs))

    return both


def drop_finalizers(registry: kopf.OperatorRegistry, *resource: str) -> None:
    """Make `registry` (already filled) never require kopf's finalizer for `resource` (group, version, plural)."""

    @kopf.on.event(*resource, registry=registry)
    async def note_deletion(type: str, memo: kopf.Memo, **_: Any) -> None:  # async: sync ones go to threads
        if type == "DELETED":
            memo[GONE] = True  # the timers' filter no longer matches: kopf stops them (match_daemons)

    # kopf's registries expose no public way to change a registered handler; its handlers are frozen dataclasses.
    spawning = registry._spawning
    spawning._handlers = [
        dataclasses.replace(h, requires_finalizer=False, when=_and(h.when, _not_gone)) for h in spawning._handlers
    ]
    changing = registry._changing
    changing._handlers = [dataclasses.replace(h, requires_finalizer=False) for h in changing._handlers]

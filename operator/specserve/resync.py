"""Drift repair: every resync interval, reconcile every SpecServe the watch has delivered.

One task for all SpecServes, not a kopf timer per object: a kopf timer keeps a live copy of its object's body and
a task per object for as long as the object exists (about 12 MB of the operator's memory at 200 SpecServes), and
it makes kopf put its finalizer on the object. The reconciles of a round queue for the reconcile slots
(specserve.slots) like any other trigger, so a round of hundreds never runs them all at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from specserve.kube.client import KubeError
from specserve.switching.loop import Registry, Tracked

log = logging.getLogger(__name__)

Reconcile = Callable[[Tracked], Awaitable[None]]


async def resync_round(registry: Registry, reconcile: Reconcile) -> int:
    """Reconcile every tracked SpecServe once; returns how many failed. A failure is logged and retried next
    round: one SpecServe's error never stops the others' repair. An API error is one line (it names the call);
    anything else is a bug and keeps its traceback."""
    items = list(registry.items.values())
    results = await asyncio.gather(*(reconcile(item) for item in items), return_exceptions=True)
    failed = 0
    for item, result in zip(items, results, strict=True):
        if isinstance(result, asyncio.CancelledError):
            raise result
        if isinstance(result, BaseException):
            failed += 1
            meta = item.body.get("metadata") or {}
            log.warning(
                "resync of %s/%s failed: %s", meta.get("namespace"), meta.get("name"), result,
                exc_info=None if isinstance(result, KubeError) else result,
            )  # fmt: skip
    return failed


async def resync_forever(registry: Registry, reconcile: Reconcile, interval: float, stop: asyncio.Event) -> None:
    """A round every `interval` seconds (the first one interval after the start: the start-up already reconciled
    everything) until `stop` is set."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)
        if not stop.is_set():
            await resync_round(registry, reconcile)

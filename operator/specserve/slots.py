"""A bound on concurrent reconciles, in two lanes: every reconcile, whatever fires it, takes one of N slots while
it runs; background work (resync rounds, the start-up's resume of every object) can never take them all.

kopf runs one task per object event, unbounded; with hundreds of SpecServes a start-up or a resync round would
fire hundreds of reconciles at once. The slots queue them instead (the HTTP pool bounds the calls). Triggers that
move traffic (a pool lost or gained a Ready replica, a pool Deployment was deleted, the switching loop's decision,
a spec change) are urgent: they are served before any waiting background reconcile, and `reserved` slots are
theirs alone, so a failover waits for at most one reconcile, never for a resync round of 500 SpecServes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

MEMO_KEY = "reconcile_slots"  # the Slots serve() puts in kopf's memo (shared by every object's copy)


def reserved_for(total: int) -> int:
    """Slots kept for urgent reconciles: a quarter, at least one when there are two or more."""
    return 0 if total < 2 else max(1, total // 4)


class Slots:
    def __init__(self, total: int, reserved: int | None = None) -> None:
        if total < 1:
            raise ValueError("at least one reconcile slot is needed")
        self.total = total
        self.background_limit = total - (reserved_for(total) if reserved is None else min(reserved, total - 1))
        self.busy = 0
        self.background_busy = 0
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._background: deque[asyncio.Future[None]] = deque()

    def _free(self, urgent: bool) -> bool:
        if self.busy >= self.total:
            return False
        return urgent or self.background_busy < self.background_limit

    def _take(self, urgent: bool) -> None:
        self.busy += 1
        if not urgent:
            self.background_busy += 1

    def _release(self, urgent: bool) -> None:
        self.busy -= 1
        if not urgent:
            self.background_busy -= 1
        self._wake()

    def _wake(self) -> None:
        # Urgent waiters first, in arrival order; then background ones while their lane has room.
        for urgent, queue in ((True, self._urgent), (False, self._background)):
            while queue and self._free(urgent):
                waiter = queue.popleft()
                if not waiter.done():  # a cancelled waiter holds nothing
                    self._take(urgent)
                    waiter.set_result(None)

    async def _acquire(self, urgent: bool) -> None:
        queue = self._urgent if urgent else self._background
        # No overtaking within a lane (and background never overtakes a waiting urgent reconcile).
        if self._free(urgent) and not queue and (urgent or not self._urgent):
            self._take(urgent)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(urgent)  # granted, then cancelled before it could run: hand the slot on
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
            raise

    @contextlib.asynccontextmanager
    async def hold(self, urgent: bool) -> AsyncIterator[None]:
        await self._acquire(urgent)
        try:
            yield
        finally:
            self._release(urgent)


def slot(memo: Mapping[str, Any], urgent: bool = True) -> AbstractAsyncContextManager[Any]:
    """The slot to hold while reconciling; no bound when the memo has none (tests that call handlers directly)."""
    slots = memo.get(MEMO_KEY)
    if isinstance(slots, Slots):
        return slots.hold(urgent)
    return slots if isinstance(slots, asyncio.Semaphore) else contextlib.nullcontext()

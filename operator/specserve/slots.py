"""A bound on concurrent reconciles: every reconcile, whatever fires it (a kopf handler, the resync loop, a pool's
readiness event, the switching loop), takes one of N slots while it runs.

kopf runs one task per object event, unbounded; with hundreds of SpecServes a start-up or a resync
round would fire hundreds of reconciles at once. The slots queue them instead (the HTTP pool bounds the calls).
The slot is taken inside the per-object lock, so triggers queued behind one object's reconcile hold no slot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

MEMO_KEY = "reconcile_slots"  # the semaphore serve() puts in kopf's memo (shared by every object's copy)


def slot(memo: Mapping[str, Any]) -> AbstractAsyncContextManager[Any]:
    """The slot to hold while reconciling; no bound when the memo has none (tests that call handlers directly)."""
    slots = memo.get(MEMO_KEY)
    return slots if isinstance(slots, asyncio.Semaphore) else contextlib.nullcontext()

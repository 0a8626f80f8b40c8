"""API failures reach kopf as one-line temporary errors, never as tracebacks.

Every failed Kubernetes call is a KubeError (specserve.kube.client) that already carries the method, the path and
the server's message; the client has retried what was worth retrying. A KubeError that escapes a handler is
turned into kopf.TemporaryError: kopf logs its message on one line and runs the handler again after `delay`
(the resync loop logs it and tries again next round). Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from typing import Any

import kopf

from specserve.kube.client import KubeError


def _temporary(fn: Any, delay: float) -> Any:
    @functools.wraps(fn)
    async def handler(**kwargs: Any) -> Any:
        try:
            return await fn(**kwargs)
        except KubeError as exc:
            raise kopf.TemporaryError(str(exc), delay=delay) from None

    return handler


def kube_errors_are_temporary(registry: kopf.OperatorRegistry, delay: float) -> None:
    """Wrap the async handlers already in `registry` (change, event, timer and daemon handlers)."""
    # kopf's registries expose no public way to change a registered handler; its handlers are frozen dataclasses.
    subs: tuple[Any, ...] = (registry._changing, registry._watching, registry._spawning)
    for sub in subs:
        sub._handlers = [
            dataclasses.replace(h, fn=_temporary(h.fn, delay)) if asyncio.iscoroutinefunction(h.fn) else h
            for h in sub._handlers
        ]

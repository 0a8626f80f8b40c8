"""API failures reach kopf as one-line temporary errors, never as tracebacks.

Every failed Kubernetes call is a KubeError (specserve.kube.client) that already carries the method, the path and
the server's message; the client has retried what was worth retrying. A handler wrapped by
`kube_errors_are_temporary` turns a KubeError that escapes it into kopf.TemporaryError: kopf logs its message on
one line and runs the handler again after `delay` (the resync loop logs it and tries again next round). Anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from specserve.kube.client import KubeError

Handler = Callable[..., Awaitable[Any]]


def kube_errors_are_temporary(delay: float) -> Callable[[Handler], Handler]:
    """A decorator for async kopf handlers (change, event, timer and daemon handlers)."""

    def wrap(fn: Handler) -> Handler:
        # functools.wraps keeps `__wrapped__`: kopf derives the handler's id from the wrapped function.
        @functools.wraps(fn)
        async def handler(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except KubeError as exc:
                raise kopf.TemporaryError(str(exc), delay=delay) from None

        return handler

    return wrap

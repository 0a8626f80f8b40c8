"""Fault injection: make matching requests fail, slow down, or hang, a number of times or forever."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Fault:
    """One rule. ``path`` is a regular expression searched in the request path (``re.search``)."""

    method: str | None
    path: re.Pattern[str]
    status: int | None = None
    delay: float = 0.0
    hang: bool = False
    times: int | None = 1  # None: forever
    message: str = "injected fault"
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        return (self.method is None or self.method == method) and self.path.search(path) is not None


@dataclass
class Faults:
    """The rules of one server, in the order they were added; the first live match applies."""

    rules: list[Fault] = field(default_factory=list)

    def add(
        self,
        method: str | None = None,
        path: str = "",
        status: int | None = None,
        *,
        times: int | None = 1,
        delay: float = 0.0,
        hang: bool = False,
        timeout: bool = False,
        message: str = "injected fault",
    ) -> Fault:
        """Add a rule: answer ``status`` (409, 422, 500, 503, ... with a Status body) and/or wait ``delay`` seconds
        first, or ``hang`` (alias ``timeout``): never answer until the client gives up. ``times=None``: forever.
        A rule with only a delay passes the request on to the server after the delay."""
        fault = Fault(
            method=method.upper() if method else None,
            path=re.compile(path),
            status=status,
            delay=delay,
            hang=hang or timeout,
            times=times,
            message=message,
        )
        self.rules.append(fault)
        return fault

    def clear(self) -> None:
        self.rules.clear()

    def take(self, method: str, path: str) -> Fault | None:
        """The first live rule matching this request, counted as hit."""
        for fault in self.rules:
            if fault.matches(method, path):
                fault.hits += 1
                return fault
        return None

"""Fault injection: make matching requests fail, slow down, or hang, a number of times or forever.

A rule matches by method and path (``add``) or by object (``refuse``/``slow``/``hang``: kind, namespace, name,
verb, subresource), as an admission policy or a flaky API server would single out a request.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# The verbs a rule can name. ``apply`` is a server-side apply (PATCH with application/apply-patch+yaml); ``patch``
# is any other PATCH; ``update`` is a PUT.
VERBS = frozenset({"apply", "patch", "update", "create", "delete", "get", "list", "watch"})
WRITE_VERBS = frozenset({"apply", "patch", "update", "create", "delete"})
REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 410: "Expired", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}  # fmt: skip


@dataclass(frozen=True)
class Request:
    """What a rule sees of one request. ``kinds`` holds the names a rule may use for its resource: the kind
    (``Deployment``), the plural (``deployments``) and the resource key (``apps/v1/deployments``)."""

    method: str
    path: str
    verb: str = ""
    kinds: frozenset[str] = frozenset()
    namespace: str | None = None
    name: str | None = None
    subresource: str = ""


@dataclass
class Fault:
    """One rule. ``path`` is a regular expression searched in the request path (``re.search``); the object
    filters (``kind``, ``namespace``, ``name``, ``verbs``, ``subresource``) match when None or equal."""

    method: str | None
    path: re.Pattern[str]
    status: int | None = None
    delay: float = 0.0
    hang: bool = False
    times: int | None = 1  # None: forever
    message: str = "injected fault"
    hits: int = 0
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    verbs: frozenset[str] | None = None
    subresource: str | None = None  # None: any; "": the main resource only; "status"
    active: bool = True

    @property
    def spent(self) -> bool:
        return not self.active or (self.times is not None and self.hits >= self.times)

    def matches(self, request: Request | str, path: str | None = None) -> bool:
        if isinstance(request, str):  # the old (method, path) form
            request = Request(request, path or "")
        if self.spent:
            return False
        if self.method is not None and self.method != request.method:
            return False
        if self.verbs is not None and request.verb not in self.verbs:
            return False
        if self.kind is not None and self.kind not in request.kinds:
            return False
        if self.namespace is not None and self.namespace != request.namespace:
            return False
        if self.name is not None and self.name != request.name:
            return False
        if self.subresource is not None and self.subresource != request.subresource:
            return False
        return self.path.search(request.path) is not None

    def cancel(self) -> None:
        """Stop applying this rule (the injected fault is over)."""
        self.active = False


def _verbs(verb: str | Iterable[str] | None) -> frozenset[str] | None:
    if verb is None:
        return None
    verbs = frozenset([verb] if isinstance(verb, str) else verb)
    unknown = verbs - VERBS
    if unknown:
        raise ValueError(f"unknown verb(s) {sorted(unknown)}: use {sorted(VERBS)}")
    return verbs


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
        kind: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        verb: str | Iterable[str] | None = None,
        subresource: str | None = None,
    ) -> Fault:
        """Add a rule: answer ``status`` (409, 422, 500, 503, ... with a Status body) and/or wait ``delay`` seconds
        first, or ``hang`` (alias ``timeout``): never answer until the client gives up. ``times=None``: forever.
        A rule with only a delay passes the request on to the server after the delay. ``kind`` (Deployment,
        deployments or apps/v1/deployments), ``namespace``, ``name``, ``verb`` (one or several of apply, patch,
        update, create, delete, get, list, watch) and ``subresource`` ("" main resource, "status") narrow it."""
        if status is not None and status not in REASONS and not 400 <= status <= 599:
            raise ValueError(f"status {status}: an injected fault answers an error code (400-599)")
        fault = Fault(
            method=method.upper() if method else None,
            path=re.compile(path),
            status=status,
            delay=delay,
            hang=hang or timeout,
            times=times,
            message=message,
            kind=kind,
            namespace=namespace,
            name=name,
            verbs=_verbs(verb),
            subresource=subresource,
        )
        self.rules.append(fault)
        return fault

    def refuse(
        self,
        kind: str,
        *,
        verb: str | Iterable[str] | None = WRITE_VERBS - {"delete"},
        status: int = 422,
        message: str = "",
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = "",
        times: int | None = None,
    ) -> Fault:
        """Refuse writes of one object (or of every object of a kind) as an admission policy would: answer
        ``status`` (403 Forbidden, 409 Conflict, 422 Invalid, 500, ...) with ``message``; by default every
        apply/patch/update/create of the main resource, forever (``times=N``: the next N only)."""
        text = message or f'admission webhook "policy.kubefake.specserve.io" denied the request: {kind} refused'
        return self.add(status=status, message=text, kind=kind, namespace=namespace, name=name, verb=verb,
                        subresource=subresource, times=times)  # fmt: skip

    def slow(
        self,
        kind: str | None = None,
        delay: float = 1.0,
        *,
        verb: str | Iterable[str] | None = None,
        namespace: str | None = None,
        name: str | None = None,
        times: int | None = None,
    ) -> Fault:
        """Answer matching calls ``delay`` seconds late (then normally), forever unless ``times``."""
        return self.add(delay=delay, kind=kind, verb=verb, namespace=namespace, name=name, times=times)

    def hang(
        self,
        kind: str | None = None,
        *,
        verb: str | Iterable[str] | None = None,
        namespace: str | None = None,
        name: str | None = None,
        times: int | None = None,
    ) -> Fault:
        """Never answer matching calls (the client's timeout ends them), forever unless ``times``."""
        return self.add(hang=True, kind=kind, verb=verb, namespace=namespace, name=name, times=times)

    def remove(self, fault: Fault) -> None:
        fault.cancel()
        if fault in self.rules:
            self.rules.remove(fault)

    def clear(self) -> None:
        for fault in self.rules:
            fault.cancel()
        self.rules.clear()

    def take(self, request: Request | str, path: str | None = None) -> Fault | None:
        """The first live rule matching this request, counted as hit."""
        if not self.rules:
            return None
        if isinstance(request, str):
            request = Request(request, path or "")
        for fault in self.rules:
            if fault.matches(request):
                fault.hits += 1
                return fault
        return None

"""The API server's `Warning` response headers (RFC 7234 form, `299 - "text"`): a deprecated API, PodSecurity's
"would violate" on a workload apply (the early signal that its pods will be refused), an unknown field. Each is
logged once per (object, text) at WARNING and counted in specserve_api_warnings every time."""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Iterable

from specserve.telemetry import API_WARNINGS

log = logging.getLogger("specserve.kube.client")

# code SP agent SP quoted-text [SP date]; the text may hold escaped quotes and commas (k8s.io/apiserver/pkg/warning).
_WARNING = re.compile(r'(\d{3}) +(\S+) +"((?:[^"\\]|\\.)*)"')
_UNESCAPE = re.compile(r"\\(.)")
MEMORY = 4096  # (object, text) pairs remembered; the oldest is forgotten first


def parse(values: Iterable[str]) -> list[str]:
    """The texts of `Warning` header values (several headers, or several warnings comma-joined in one); values that
    are not warnings are skipped."""
    return [_UNESCAPE.sub(r"\1", m.group(3)) for value in values for m in _WARNING.finditer(value)]


def resource(path: str) -> str:
    """The resource (plural, with subresource) a request path names: a bounded metric label, not the object."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if "namespaces" in parts and len(parts) > parts.index("namespaces") + 2:
        parts = parts[parts.index("namespaces") + 2 :]
    else:  # cluster-scoped: /api/v1/X or /apis/group/version/X
        parts = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if not parts:
        return "unknown"
    return parts[0] + (f"/{parts[2]}" if len(parts) > 2 else "")


class WarningLog:
    """What was already logged, so a warning repeated on every apply of an object (PodSecurity's, each resync) is
    logged once; shared by a client and its lane(), as one memory per process."""

    def __init__(self, memory: int = MEMORY) -> None:
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._memory = memory

    def first(self, obj: str, text: str) -> bool:
        """True the first time (obj, text) is seen (again after it was forgotten)."""
        key = (obj, text)
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        if len(self._seen) > self._memory:
            self._seen.popitem(last=False)
        return True

    def record(self, method: str, path: str, texts: Iterable[str]) -> None:
        obj = path.split("?", 1)[0]
        for text in texts:
            API_WARNINGS.labels(method, resource(path)).inc()
            if self.first(obj, text):
                log.warning("the API server warns on %s %s: %s", method, obj, text)

"""The request log tests read: every request with what it asked and how it was answered."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass
class RecordedRequest:
    """One request. ``resource`` is the resource key (``apps/v1/deployments``) or None for discovery."""

    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any
    headers: dict[str, str] = field(repr=False, default_factory=dict)
    status: int = 0
    resource: str | None = None
    group: str = ""
    plural: str = ""
    namespace: str | None = None
    name: str | None = None
    subresource: str = ""
    started: float = field(default_factory=time.monotonic)  # when it arrived (time.monotonic())
    finished: float | None = None  # when it was answered (a watch: when its stream ended)

    @property
    def is_write(self) -> bool:
        return self.method in WRITE_METHODS

    @property
    def verb(self) -> str:
        """The RBAC verb of the request (get/list/watch/create/update/patch/delete)."""
        if self.method == "GET":
            if self.name:
                return "get"
            return "watch" if self.query.get("watch") in ("true", "1") else "list"
        return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(self.method, "")

    def __str__(self) -> str:
        return f"{self.method} {self.path} -> {self.status}"

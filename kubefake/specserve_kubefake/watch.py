"""Watch plumbing: the event history that watches resume from, and live fan-out to open watches."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from specserve_kubefake.errors import ApiError

JSON = dict[str, Any]


@dataclass
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    key: str
    namespace: str
    obj: JSON
    _line: bytes | None = None

    def line(self) -> bytes:
        """The newline-terminated JSON watch event (serialised once, shared by every watcher)."""
        if self._line is None:
            self._line = json.dumps({"type": self.type, "object": self.obj}, separators=(",", ":")).encode() + b"\n"
        return self._line


@dataclass(eq=False)
class Watch:
    key: str
    namespace: str | None
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)

    def put(self, event: Event | None) -> None:
        """Deliver from any thread: a test may write through the store from outside the server's loop."""
        try:
            same = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            same = False
        if same:
            self.queue.put_nowait(event)
        elif not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.queue.put_nowait, event)


class WatchHub:
    """Every write's event, kept (``history`` of them) and delivered to the watches of its resource."""

    def __init__(self, history: int) -> None:
        self.history: deque[Event] = deque(maxlen=history)
        self.watches: dict[str, set[Watch]] = {}
        self.closed = asyncio.Event()

    def emit(self, event: Event) -> None:
        self.history.append(event)
        for watch in self.watches.get(event.key, ()):
            if watch.namespace is None or watch.namespace == event.namespace:
                watch.put(event)

    def since(self, key: str, namespace: str | None, rv: int) -> list[Event]:
        """The events after ``rv``; 410 Expired when some of them already left the history."""
        if self.history and rv < self.history[0].rv - 1:
            raise ApiError(410, "Expired", f"too old resource version: {rv} ({self.history[0].rv - 1})")
        return [e for e in self.history
                if e.rv > rv and e.key == key and (namespace is None or e.namespace == namespace)]  # fmt: skip

    def subscribe(self, key: str, namespace: str | None) -> Watch:
        watch = Watch(key, namespace, asyncio.get_running_loop())
        self.watches.setdefault(key, set()).add(watch)
        return watch

    def unsubscribe(self, watch: Watch) -> None:
        self.watches.get(watch.key, set()).discard(watch)

    def close(self) -> None:
        self.closed.set()
        for watches in self.watches.values():
            for watch in watches:
                watch.put(None)

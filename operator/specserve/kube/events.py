"""Event correlation as client-go's recorder does it (EventCorrelator), pure: an Event that repeats within the
window bumps the existing Event's count instead of creating another, and once one object has had MAX_SIMILAR
Events of the same type and reason with different messages within the window (the switching loop's weight steps:
"... (weights 90/10)", "... (weights 80/20)", ...), the rest are combined into one Event whose message is the
latest, prefixed as client-go prefixes it. Every step is still in status.history and specserve_switches_total."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

WINDOW_SECONDS = 600.0  # client-go: defaultAggregateIntervalInSeconds
MAX_SIMILAR = 10  # client-go: defaultAggregateMaxEvents
CACHE_SIZE = 4096  # client-go: maxLruCacheEntries
COMBINED = "(combined from similar events): "  # client-go's prefix of an aggregated Event's message

Key = tuple[str, ...]
V = TypeVar("V")


@dataclass(frozen=True)
class Posting:
    """What to write: a new Event (count 1) or the existing Event `name` with this count and message."""

    name: str
    message: str
    count: int
    first: float  # when the Event was first posted (its firstTimestamp)
    last: float  # now (its lastTimestamp)

    @property
    def new(self) -> bool:
        return self.count == 1


class Correlator:
    """Remembers the Events posted (at most CACHE_SIZE keys of each kind, least recently used dropped)."""

    def __init__(self, window: float = WINDOW_SECONDS, max_similar: int = MAX_SIMILAR, size: int = CACHE_SIZE) -> None:
        self.window = window
        self.max_similar = max_similar
        self.size = size
        self._similar: OrderedDict[Key, tuple[float, set[str]]] = OrderedDict()  # -> (window start, messages)
        self._posted: OrderedDict[Key, Posting] = OrderedDict()

    def correlate(
        self, involved: Key, type_: str, reason: str, message: str, now: float, name: Callable[[], str]
    ) -> Posting:
        """The Posting for this Event; `name()` names a new Event object. Call posted() once it is written."""
        similar = (*involved, type_, reason)
        start, messages = self._similar.get(similar, (now, set()))
        if now - start > self.window:
            start, messages = now, set()
        messages.add(message)
        _put(self._similar, similar, (start, messages), self.size)
        if len(messages) >= self.max_similar:
            key, message = (*similar, COMBINED), COMBINED + message
        else:
            key = (*similar, message)
        last = self._posted.get(key)
        if last is not None and now - last.last <= self.window:
            return Posting(last.name, message, last.count + 1, last.first, now)
        return Posting(name(), message, 1, now, now)

    def posted(self, involved: Key, type_: str, reason: str, posting: Posting) -> None:
        """The Posting was written: the next repeat bumps it."""
        combined = posting.message.startswith(COMBINED)
        key = (*involved, type_, reason, COMBINED if combined else posting.message)
        _put(self._posted, key, posting, self.size)

    def forget(self, involved: Key, type_: str, reason: str, posting: Posting) -> None:
        """The Event is gone from the server (expired): the next one is created afresh."""
        combined = posting.message.startswith(COMBINED)
        self._posted.pop((*involved, type_, reason, COMBINED if combined else posting.message), None)


def _put(cache: OrderedDict[Key, V], key: Key, value: V, size: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > size:
        cache.popitem(last=False)

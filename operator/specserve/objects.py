"""What the operator holds of each SpecServe between events: one `ObjectState` per object, keyed by uid, in one
`Objects` registry (as kopf's ResourceMemory is to kopf). The latest body and everything the handlers, the
reconcile's lanes, the failover and both loops remember about the object live here, and nowhere else: kopf's memo
carries only the shared objects injected at start (the client, the reconcile slots).

The body changes only through `ObjectState.observe`, which refuses a body older than the one held (the staleness
guard): the watch, the reconcile's own write and the switching loop's own write may arrive in any order.
Deletion is one `Objects.forget`: the object's state goes, and so does what the cluster-wide tables keyed by the
object's name hold (the roll budget, the render cache, the per-object metrics), through the hooks given at
construction.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from specserve.policy.curves import ModeCurves
from specserve.policy.learning import Learning
from specserve.policy.types import PolicyState

JSON = dict[str, Any]
Key = tuple[str, str]  # namespace, name
Forget = Callable[[str, str], None]  # a table keyed by (namespace, name) dropping a deleted SpecServe


def key_of(body: Mapping[str, Any]) -> Key:
    meta = body.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


def uid_of(body: Mapping[str, Any]) -> str:
    """The object's uid; bodies without one (unit tests' hand-made objects) go by namespace/name."""
    meta = body.get("metadata") or {}
    return str(meta.get("uid") or "{}/{}".format(*key_of(body)))


def older(body: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    """Whether a body predates one we hold (e.g. a watch event queued before the answer to our own write).
    resourceVersions are opaque in general, but the API server's are etcd revisions: compared only when both are
    integers."""
    new = str((body.get("metadata") or {}).get("resourceVersion", ""))
    held = str((than.get("metadata") or {}).get("resourceVersion", ""))
    return new.isdigit() and held.isdigit() and int(new) < int(held)


def plain(body: Mapping[str, Any]) -> JSON:
    """A plain copy: kopf hands out read-only views and the API models want plain data. managedFields are a third
    of a SpecServe's body and nothing here reads them: the copy the registry keeps of every SpecServe goes without."""
    data: JSON = json.loads(json.dumps(dict(body), default=dict))
    (data.get("metadata") or {}).pop("managedFields", None)
    return data


@dataclass
class Memory:
    """Between rounds, in memory: the state as status has it and the latest one (volatile fields: evaluation
    time, unknown streak, regret not yet worth a write)."""

    persisted: PolicyState | None  # None: status.switching not written yet (see switching.evaluate.first_write)
    live: PolicyState


@dataclass(frozen=True)
class Remembered:
    """The loop's memory of one SpecServe's learning: the state, and the lastUpdate of what it last wrote."""

    learning: Learning
    stamp: str | None


@dataclass
class LoopMemory:
    """What the switching loop keeps of one SpecServe between rounds (switching.loop)."""

    due: float = -math.inf  # the next evaluation, on the clock
    policy: Memory | None = None
    learning: Remembered | None = None
    # The curves built from spec.switching (pure but not free: once per spec change), with the spec they came from.
    curves: tuple[object, ModeCurves | None] | None = None


@dataclass(eq=False)
class ObjectState:
    """One SpecServe as the operator holds it: its latest body and what every part of the operator remembers."""

    uid: str
    key: Key
    _body: JSON
    # One reconcile per object at a time: change handlers, the resync loop and the switching loop.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    failover: asyncio.Lock = field(default_factory=asyncio.Lock)  # one failover fast path at a time
    queued: bool = False  # an urgent reconcile is waiting for the lock
    background_queued: bool = False  # a background reconcile waits for a slot
    running: asyncio.Future[Any] | None = None  # the reconcile pass holding the lock (a failover may cancel it)
    # Deleted: reconciles already queued behind the lock must not re-create its children. Set by `forget`; whoever
    # still holds this state (a queued reconcile) sees it.
    gone: bool = False
    # Pool Deployment -> has a Ready replica, as the Deployment watch last delivered it (the failover reads this
    # instead of listing).
    pools: dict[str, bool] = field(default_factory=dict)
    clean: tuple[tuple[str, str], int] | None = None  # resync: (fingerprint, rounds skipped) after a clean pass
    loop: LoopMemory = field(default_factory=LoopMemory)

    @property
    def body(self) -> JSON:
        """The latest body seen (the watch, or the server's answer to one of our writes); changed by `observe`."""
        return self._body

    def observe(self, body: Mapping[str, Any]) -> bool:
        """Hold `body` unless it is older than the one held (the staleness guard). True when held."""
        if older(body, self._body):
            return False
        self._body = plain(body)
        return True


class Objects:
    """Every SpecServe the watch delivered, by uid (and by namespace/name for the tables that go by name)."""

    def __init__(self, forgetting: Iterable[Forget] = ()) -> None:
        self._by_uid: dict[str, ObjectState] = {}
        self._by_key: dict[Key, str] = {}
        # Pools of SpecServes not seen yet (a leader that just started may list the Deployments first), by owner
        # uid: the owner's state takes them at its first sight.
        self._early_pools: dict[str, dict[str, bool]] = {}
        self._forgetting = tuple(forgetting)

    def __iter__(self) -> Iterator[ObjectState]:
        return iter(list(self._by_uid.values()))

    def __len__(self) -> int:
        return len(self._by_uid)

    def bodies(self) -> list[JSON]:
        """The latest body of every SpecServe (what the metrics endpoint serves per SpecServe, at each scrape)."""
        return [state.body for state in list(self._by_uid.values())]

    def get(self, uid: str) -> ObjectState | None:
        return self._by_uid.get(uid)

    def named(self, key: Key) -> ObjectState | None:
        uid = self._by_key.get(key)
        return self._by_uid.get(uid) if uid is not None else None

    def knows(self, uid: str) -> bool:
        """Whether anything is held for this uid (its state, or pools seen before it)."""
        return uid in self._by_uid or uid in self._early_pools

    def observe(self, body: Mapping[str, Any]) -> ObjectState:
        """A body of a SpecServe, from the watch: its state, created at first sight; the body held unless older."""
        uid, key = uid_of(body), key_of(body)
        state = self._by_uid.get(uid)
        if state is not None:
            state.observe(body)
            return state
        previous = self._by_key.get(key)
        if previous is not None:  # deleted and re-created under the same name, its DELETED event missed
            self.forget(previous)
        state = self._by_uid[uid] = ObjectState(uid, key, plain(body), pools=self._early_pools.pop(uid, {}))
        self._by_key[key] = uid
        return state

    def entry(self, body: Mapping[str, Any]) -> ObjectState:
        """The state of the object a handler was called for (the watch has normally observed it already)."""
        return self._by_uid.get(uid_of(body)) or self.observe(body)

    def early_pools(self, owner_uid: str) -> dict[str, bool]:
        """Pools seen for an owner not seen yet (mutable: the Deployment watch records them here)."""
        return self._early_pools.setdefault(owner_uid, {})

    def drop_early_pools(self, owner_uid: str) -> None:
        self._early_pools.pop(owner_uid, None)

    def forget(self, uid: str) -> None:
        """A SpecServe is gone: its state (marked gone for whoever still holds it) and every table's entry."""
        self._early_pools.pop(uid, None)
        state = self._by_uid.pop(uid, None)
        if state is None:
            return
        state.gone = True
        if self._by_key.get(state.key) == uid:
            del self._by_key[state.key]
        for forget in self._forgetting:
            forget(*state.key)

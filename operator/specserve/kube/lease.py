"""Leader election over a coordination.k8s.io/v1 Lease, as client-go does it: one replica acts, the others wait.

The holder renews `spec.renewTime` every retry period. A standby takes the lease over only after it has seen
the same renewal for a whole `leaseDurationSeconds` by its own monotonic clock (no trust in clock agreement),
or at once when the holder released it. Writes are PUTs guarded by `resourceVersion`, so of two replicas
taking over together exactly one wins (the other gets a 409). The leader gives up (and must stop acting) when
it could not renew for `renew_deadline_seconds`, which is shorter than the lease: it stops before anyone can
take over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from specserve.api import reasons
from specserve.clock import rfc3339
from specserve.config import LeaderElection
from specserve.kube.client import KubeError
from specserve.kube.kinds import Kind

LEASE = Kind("coordination.k8s.io/v1", "Lease", "leases")
JSON = dict[str, Any]
log = logging.getLogger(__name__)
_sleep = asyncio.sleep  # the renewal pause, on its own name so tests can step a fake clock instead


class LeaseApi(Protocol):
    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None: ...
    async def create(self, kind: Kind, namespace: str, body: JSON, *, attempts: int | None = None) -> JSON | None: ...
    async def replace(self, kind: Kind, namespace: str, name: str, body: JSON) -> JSON | None: ...


class LeaseElector:
    def __init__(self, kube: LeaseApi, election: LeaderElection, clock: Callable[[], float] = time.monotonic) -> None:
        self._kube = kube
        self._election = election
        self._clock = clock
        self._observed: tuple[str, str, str] | None = None  # holder, renewTime, resourceVersion
        self._observed_at = 0.0
        self._last_renewal: float | None = None  # when we last wrote the lease as its holder
        self.holder = ""  # the holder last seen ("" when released or unknown)

    @property
    def identity(self) -> str:
        return self._election.identity

    @property
    def election(self) -> LeaderElection:
        return self._election

    @property
    def leading(self) -> bool:
        """This replica holds the lease now: it won the last attempt and its last renewal is younger than the renew
        deadline (shorter than the lease, so no standby can have taken over yet). The write fence reads this before
        every write: it turns False by itself when renewals stop succeeding, without waiting for hold() to notice."""
        if self.holder != self.identity or self._last_renewal is None:
            return False
        return self._clock() - self._last_renewal < self._election.renew_deadline_seconds

    def _spec(self, previous: JSON, now: str) -> JSON:
        spec = dict(previous)
        if previous.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(previous.get("leaseTransitions") or 0) + (1 if previous else 0)
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, round(self._election.lease_seconds)),
            renewTime=now,
        )
        return spec

    def _observe(self, lease: JSON) -> None:
        spec = lease.get("spec") or {}
        key = (
            str(spec.get("holderIdentity") or ""),
            str(spec.get("renewTime") or ""),
            str((lease.get("metadata") or {}).get("resourceVersion") or ""),
        )
        if key != self._observed:
            self._observed, self._observed_at = key, self._clock()
        self.holder = key[0]

    def _won(self, lease: JSON, started: float) -> bool:
        self._observe(lease)
        # The renewal counts from when the attempt started, not when its answer came: the server may have written
        # renewTime at any moment in between, and a standby measures the lease from the renewal it saw.
        self._last_renewal = started
        return True

    async def try_acquire_or_renew(self) -> bool:
        """One attempt: True when this replica holds the lease afterwards. API errors count as not holding."""
        e = self._election
        started = self._clock()
        try:
            lease = await self._kube.get(LEASE, e.namespace, e.name)
            now = rfc3339(digits=6)
            if lease is None:
                body = {
                    "apiVersion": LEASE.api_version,
                    "kind": LEASE.kind,
                    "metadata": {"name": e.name, "namespace": e.namespace},
                    "spec": self._spec({}, now),
                }
                created = await self._kube.create(LEASE, e.namespace, body)
                return self._won(created, started) if created is not None else False
            self._observe(lease)
            spec = lease.get("spec") or {}
            duration = float(spec.get("leaseDurationSeconds") or e.lease_seconds)
            if self.holder not in ("", self.identity) and self._clock() - self._observed_at < duration:
                return False  # held by another replica, renewed within the lease: wait
            body = {
                "apiVersion": LEASE.api_version,
                "kind": LEASE.kind,
                "metadata": {
                    "name": e.name,
                    "namespace": e.namespace,
                    "resourceVersion": (lease.get("metadata") or {}).get("resourceVersion"),
                },
                "spec": self._spec(spec, now),
            }
            replaced = await self._kube.replace(LEASE, e.namespace, e.name, body)
            return self._won(replaced, started) if replaced is not None else False  # None: another replica wrote first
        except KubeError as exc:
            log.warning("lease %s/%s: %s", e.namespace, e.name, exc)
            return False

    async def attempt(self, timeout: float) -> bool:
        try:
            return await asyncio.wait_for(self.try_acquire_or_renew(), timeout=max(0.05, timeout))
        except TimeoutError:
            log.warning("lease %s/%s: no answer within %.1f s", self._election.namespace, self._election.name, timeout)
            return False

    async def acquire(self, stop: asyncio.Event | None = None) -> bool:
        """Wait (as a standby) until this replica leads; False when `stop` was set first."""
        stop = stop or asyncio.Event()
        announced = ""
        while not stop.is_set():
            if await self.attempt(self._election.renew_deadline_seconds):
                log.info("leading as %s (lease %s/%s)", self.identity, self._election.namespace, self._election.name)
                return True
            if self.holder and self.holder != announced:
                log.info("standing by: %s holds the lease", self.holder)
                announced = self.holder
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self._election.retry_seconds)
        return False

    async def hold(self) -> None:
        """Renew until the lease is lost (another holder, or no renewal within the renew deadline); then return."""
        e = self._election
        while True:
            await _sleep(e.retry_seconds)
            since = self._clock() - (self._last_renewal or 0.0)
            if await self.attempt(e.renew_deadline_seconds - since):
                continue
            if self.holder not in ("", self.identity):
                log.error("lost the lease to %s", self.holder)
                return
            if self._clock() - (self._last_renewal or 0.0) >= e.renew_deadline_seconds:
                log.error("could not renew the lease for %.0f s", e.renew_deadline_seconds)
                return

    async def release(self) -> None:
        """Hand the lease over at once (a clean shutdown): standbys need not wait for it to expire."""
        if not self.leading:
            return
        e = self._election
        self._last_renewal = None
        try:
            lease = await asyncio.wait_for(self._kube.get(LEASE, e.namespace, e.name), timeout=e.renew_deadline_seconds)
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != self.identity:
                return
            body = {
                "apiVersion": LEASE.api_version,
                "kind": LEASE.kind,
                "metadata": {**lease["metadata"]},
                "spec": {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": rfc3339(digits=6)},
            }
            replaced = await asyncio.wait_for(
                self._kube.replace(LEASE, e.namespace, e.name, body), timeout=e.renew_deadline_seconds
            )
        except (KubeError, TimeoutError) as exc:
            log.warning("could not release the lease %s/%s (it expires by itself): %r", e.namespace, e.name, exc)
            return
        if replaced is not None:
            self.holder = ""
            log.info("released the lease %s/%s", e.namespace, e.name)


class EventPoster(Protocol):
    async def post_event(self, involved: JSON, *, reason: str, message: str, type_: str = "Normal") -> None: ...


class PresenceGuard:
    """Without leader election: the same Lease, held while this process acts, so that a second operator over the
    same objects is found instead of fighting unnoticed (both applied the same status fields under the same field
    managers; each round undid the other's pending wish and the route froze). A process that finds the Lease held
    by another operator, renewed within its duration, refuses to act: `conflict` is True (the caller closes the
    write fence on it), it says so loudly (an error log, a Warning event on the Lease, `on_change` for the
    metric) and takes the Lease once it is free or lapsed (a standby with --leader-elect never takes it while we
    renew). A Lease that cannot be read or written is no conflict: unknown holds what runs (serving is never
    stopped for the Lease API's sake)."""

    def __init__(
        self, elector: LeaseElector, events: EventPoster, on_change: Callable[[bool, str], None] | None = None
    ) -> None:
        self.elector = elector
        self._events = events
        self._on_change = on_change
        self.conflict = False
        self.other = ""  # the other operator's identity while in conflict
        self._warned_unknown = False

    @property
    def _where(self) -> str:
        e = self.elector.election
        return f"Lease {e.namespace}/{e.name}"

    async def check(self) -> bool:
        """One attempt to take or renew the Lease; True while another operator holds it (and then we must not act)."""
        e = self.elector.election
        held = await self.elector.attempt(e.renew_deadline_seconds)
        holder = self.elector.holder
        if held:
            self._warned_unknown = False
            if self.conflict:
                log.warning("%s is ours again (%s is gone): acting", self._where, self.other)
                self._set(False, "")
        elif holder not in ("", self.identity):
            if not self.conflict or holder != self.other:
                await self._report(holder)
                self._set(True, holder)
        elif not self._warned_unknown and not self.conflict:
            self._warned_unknown = True
            log.warning(
                "cannot hold %s (see above): another operator over the same objects would go unnoticed; acting",
                self._where,
            )
        return self.conflict

    @property
    def identity(self) -> str:
        return self.elector.identity

    def _set(self, conflict: bool, other: str) -> None:
        self.conflict, self.other = conflict, other
        if self._on_change is not None:
            self._on_change(conflict, other)

    async def _report(self, holder: str) -> None:
        message = (
            f"another SpecServe operator ({holder}) holds {self._where}: {self.identity} refuses to act (no writes) "
            "while it does. Run one operator, or every replica with --leader-elect"
        )
        log.error("%s", message)
        e = self.elector.election
        lease = {"apiVersion": LEASE.api_version, "kind": LEASE.kind,
                 "metadata": {"name": e.name, "namespace": e.namespace}}  # fmt: skip
        await self._events.post_event(lease, reason=reasons.OPERATOR_CONFLICT, message=message, type_="Warning")

    async def wait_clear(self, stop: asyncio.Event) -> bool:
        """Before acting: wait while another operator holds the Lease; False when `stop` was set first."""
        while not stop.is_set():
            if not await self.check():
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.elector.election.retry_seconds)
        return False

    async def watch(self) -> None:
        """While acting: renew every retry period (a later operator finds us), and notice a taker. Never returns
        (the caller reads a return as a lost Lease)."""
        while True:
            await _sleep(self.elector.election.retry_seconds)
            try:
                await self.check()
            except Exception:  # the presence check must never stop an operator that serves
                log.exception("checking %s failed", self._where)

    async def release(self) -> None:
        if not self.conflict:
            await self.elector.release()

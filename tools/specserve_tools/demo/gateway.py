"""The gateway: Debian's HAProxy, programmed from the operator's HTTPRoute over its runtime API (admin socket).

In a cluster this is your Gateway API implementation's job (Envoy Gateway, Istio, kgateway, ...): it watches
the HTTPRoute and the Services' endpoints and splits traffic by the backendRefs' weights. Here one backend
("route") holds one server per Ready pod of each pool; a server's weight is its pool's route weight divided
over the pool's Ready pods. Weights change with `set weight` (no reload, no dropped connection); a new pod is
`add server` + `enable server`; a pod leaving is `disable server` (no new requests, in-flight ones finish) and,
once the kubelet has stopped it, `del server`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from specserve_tools.demo.procs import Child, Supervisor

BACKEND = "route"
SERVED_BY = "X-Specserve-Server"  # response header naming the server (pod) that answered
WEIGHT_SCALE = 2  # HAProxy weights are 0-256; a route weight of 100 over one pod becomes 200


@dataclass(frozen=True)
class Endpoint:
    pod: str  # also the HAProxy server name
    pool: str  # the Service (pool) name
    port: int
    host: str = "127.0.0.1"  # real engines on one machine each get a loopback address of their own (a pod IP)


def server_weights(route_weights: Mapping[str, int], endpoints: list[Endpoint]) -> dict[str, int]:
    """HAProxy weight per pod: the pool's route weight split over its Ready pods (pure)."""
    per_pool: dict[str, int] = {}
    for ep in endpoints:
        per_pool[ep.pool] = per_pool.get(ep.pool, 0) + 1
    out = {}
    for ep in endpoints:
        weight = route_weights.get(ep.pool, 0) * WEIGHT_SCALE
        out[ep.pod] = min(256, round(weight / per_pool[ep.pool]))
    return out


def weight_steps(current: Mapping[str, int], wanted: Mapping[str, int]) -> list[tuple[str, int]]:
    """The `set weight` commands that take HAProxy from `current` to `wanted`, raises first (pure): each command
    applies on its own, and cutting the serving pool before raising the other left every server at weight 0 for an
    instant, in which HAProxy answered 503 (one request of a flip in the emulator's loop test)."""
    changed = [(pod, weight) for pod, weight in wanted.items() if current.get(pod) != weight]
    return sorted(changed, key=lambda step: step[1] < current.get(step[0], 0))


def route_weights(route: Mapping[str, object] | None) -> dict[str, int]:
    """Service name -> weight from an HTTPRoute's first rule (Gateway API default weight: 1)."""
    if not route:
        return {}
    spec = route.get("spec")
    rules = spec.get("rules") if isinstance(spec, dict) else None
    out: dict[str, int] = {}
    for rule in rules or []:
        for ref in rule.get("backendRefs") or []:
            out[str(ref["name"])] = int(ref.get("weight", 1))
        break  # the operator renders one rule
    return out


CONTROLLER = "specserve.io/demo-haproxy"


def accepted(route: Mapping[str, Any]) -> bool:
    """True when this gateway already reported the route's current generation as Accepted."""
    generation = (route.get("metadata") or {}).get("generation")
    for parent in (route.get("status") or {}).get("parents") or []:
        if parent.get("controllerName") != CONTROLLER:
            continue
        for cond in parent.get("conditions") or []:
            if cond.get("type") == "Accepted" and cond.get("observedGeneration") == generation:
                return bool(cond.get("status") == "True")
    return False


def route_status(route: Mapping[str, Any]) -> dict[str, Any]:
    """The status a Gateway API controller writes on an HTTPRoute it serves: one entry per parent."""
    generation = (route.get("metadata") or {}).get("generation")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def condition(kind: str, reason: str, message: str) -> dict[str, Any]:
        out = {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}
        return out | ({"observedGeneration": generation} if generation is not None else {})

    parents = []
    for ref in (route.get("spec") or {}).get("parentRefs") or []:
        parents.append(
            {
                "parentRef": ref,
                "controllerName": CONTROLLER,
                "conditions": [
                    condition("Accepted", "Accepted", "programmed into the demo's HAProxy"),
                    condition("ResolvedRefs", "ResolvedRefs", "every backendRef resolved"),
                ],
            }
        )
    return {"parents": parents}


def haproxy_config(socket: Path, port: int, exporter_port: int) -> str:
    return f"""global
    stats socket {socket} mode 600 level admin
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 300s
    timeout server 300s
    # A connection refused by a pod that just went away is retried on another server, never shown to clients.
    retries 3
    option redispatch 1
frontend gateway
    bind 127.0.0.1:{port}
    default_backend {BACKEND}
    http-response set-header {SERVED_BY} %s
frontend exporter
    bind 127.0.0.1:{exporter_port}
    http-request use-service prometheus-exporter if {{ path /metrics }}
backend {BACKEND}
    balance roundrobin
"""


class AdminSocket:
    def __init__(self, path: Path) -> None:
        self.path = path

    async def command(self, line: str) -> str:
        reader, writer = await asyncio.open_unix_connection(str(self.path))
        try:
            writer.write(line.encode() + b"\n")
            await writer.drain()
            data = await asyncio.wait_for(reader.read(), timeout=5)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        return data.decode(errors="replace").strip()

    async def servers(self) -> dict[str, tuple[int, bool]]:
        """Server name -> (weight, enabled), from `show servers state`."""
        out: dict[str, tuple[int, bool]] = {}
        for line in (await self.command(f"show servers state {BACKEND}")).splitlines():
            parts = line.split()
            if len(parts) < 8 or line.startswith("#") or parts[1] != BACKEND:
                continue
            admin_state = int(parts[6])
            out[parts[3]] = (int(parts[7]), admin_state & 0x1 == 0)  # bit 0: forced maintenance
        return out


@dataclass
class Gateway:
    """HAProxy plus the state it was last programmed with."""

    socket: AdminSocket
    port: int
    exporter_port: int
    child: Child
    servers: dict[str, Endpoint] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    draining: set[str] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    changes: int = 0  # weight changes applied (for the summary)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def sync(self, route: Mapping[str, int], endpoints: list[Endpoint]) -> None:
        """Make HAProxy serve `endpoints` with the route's weights. Pods that left are disabled (drained), not
        deleted: `forget` deletes them once the kubelet has stopped them."""
        async with self.lock:
            wanted = server_weights(route, endpoints)
            for ep in endpoints:
                if ep.pod not in self.servers:
                    await self._check(f"add server {BACKEND}/{ep.pod} {ep.host}:{ep.port} weight {wanted[ep.pod]}")
                    await self._check(f"enable server {BACKEND}/{ep.pod}")
                    self.servers[ep.pod] = ep
                    self.weights[ep.pod] = wanted[ep.pod]
                elif ep.pod in self.draining:
                    await self._check(f"enable server {BACKEND}/{ep.pod}")
                    self.draining.discard(ep.pod)
            for pod, weight in weight_steps(self.weights, wanted):
                await self._check(f"set weight {BACKEND}/{pod} {weight}")
                self.weights[pod] = weight
                self.changes += 1
            for pod in set(self.servers) - set(wanted) - self.draining:
                await self._check(f"disable server {BACKEND}/{pod}")  # in-flight requests finish
                self.draining.add(pod)

    async def forget(self, pod: str) -> None:
        async with self.lock:
            if pod not in self.servers:
                return
            if pod not in self.draining:
                await self._check(f"disable server {BACKEND}/{pod}")
            # HAProxy refuses `del server` while connections remain; the pod is gone, so shut them down.
            await self.socket.command(f"shutdown sessions server {BACKEND}/{pod}")
            await self._check(f"del server {BACKEND}/{pod}")
            self.servers.pop(pod, None)
            self.weights.pop(pod, None)
            self.draining.discard(pod)

    async def _check(self, line: str) -> None:
        reply = await self.socket.command(line)
        lowered = reply.lower()
        if any(word in lowered for word in ("unknown", "error", "not found", "invalid", "require", "no such")):
            raise RuntimeError(f"HAProxy refused {line!r}: {reply}")


async def start_gateway(sup: Supervisor, workdir: Path, port: int, exporter_port: int) -> Gateway:
    socket_path = workdir / "haproxy.sock"
    config = workdir / "haproxy.cfg"
    config.write_text(haproxy_config(socket_path, port, exporter_port), encoding="utf-8")
    # -db: stay in the foreground, in the process group the supervisor kills (-D would setsid away from it).
    child = sup.start("haproxy", ["haproxy", "-db", "-f", str(config)])
    admin = AdminSocket(socket_path)
    for _ in range(100):
        if not child.alive():
            raise RuntimeError(f"haproxy exited: {child.tail()}")
        with contextlib.suppress(OSError):
            await admin.command("show info")
            return Gateway(admin, port, exporter_port, child)
        await asyncio.sleep(0.05)
    raise RuntimeError(f"haproxy's admin socket did not answer within 5 s: {child.tail()}")

"""What the benchmarks (scripts/scale_startup.py --cluster, scripts/chaos_soak.py --cluster) and the demo need on top
of the control plane (controlplane.py): an admin client over TLS (aiohttp, the admin client certificate), caches kept
by list and watch (the benchmarks sample hundreds of objects several times a second: kubectl per read would be the
load), the Gateway controller's stand-in (accepts each HTTPRoute generation), GPU capacity for N SpecServes, and a
namespace with what the examples reference.

Nothing here is a test; tests/cluster/test_demo_cluster.py runs the demo on it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import ssl
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp

from tests.cluster.controlplane import GPU_PRODUCTS, ControlPlane, node

JSON = dict[str, Any]
# A resource's collection path, with {ns} for the namespace.
DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments"
PODS = "/api/v1/namespaces/{ns}/pods"
HTTPROUTES = "/apis/gateway.networking.k8s.io/v1/namespaces/{ns}/httproutes"
SPECSERVES = "/apis/specserve.io/v1alpha1/namespaces/{ns}/specserves"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
PODS_PER_NODE = 110
GPUS_PER_POD = 8  # the examples' largest (Kimi on 8 RTX PRO 6000)


class ApiError(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{status}: {text[:300]}")
        self.status = status


class Admin:
    """The cluster admin (system:masters, a client certificate) over TLS."""

    def __init__(self, plane: ControlPlane, connections: int = 64) -> None:
        self.server = plane.server
        ctx = ssl.create_default_context(cafile=str(plane.pki / "ca.crt"))
        ctx.load_cert_chain(str(plane.pki / "admin.crt"), str(plane.pki / "admin.key"))
        self._ssl = ctx
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Admin:
        connector = aiohttp.TCPConnector(ssl=self._ssl, limit=self._connections)
        self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use `async with Admin(plane)`"
        return self._session

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                      params: dict[str, str] | None = None, timeout: float = 60) -> JSON:  # fmt: skip
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self.session.request(method, self.server + path, data=data, headers=headers, params=params,
                                        timeout=aiohttp.ClientTimeout(total=timeout)) as resp:  # fmt: skip
            text = await resp.text()
            if resp.status >= 300:
                raise ApiError(resp.status, text)
            return json.loads(text) if text else {}

    async def create(self, collection: str, ns: str, body: JSON) -> JSON:
        return await self.request("POST", collection.format(ns=ns), body)

    async def merge_patch(self, collection: str, ns: str, name: str, patch: JSON, subresource: str = "",
                          params: dict[str, str] | None = None) -> JSON:  # fmt: skip
        path = f"{collection.format(ns=ns)}/{name}" + (f"/{subresource}" if subresource else "")
        return await self.request("PATCH", path, patch, "application/merge-patch+json", params)

    async def delete(self, collection: str, ns: str, name: str) -> None:
        with contextlib.suppress(ApiError):
            await self.request("DELETE", f"{collection.format(ns=ns)}/{name}")

    async def delete_pods(self, ns: str, selector: str) -> None:
        await self.request("DELETE", PODS.format(ns=ns), params={"labelSelector": selector, "gracePeriodSeconds": "0"})

    async def get_raw(self, path: str) -> str:
        async with self.session.get(self.server + path) as resp:
            return await resp.text()


class Cache:
    """One collection of one namespace, kept by list and watch (relist on 410 or a broken watch): reads are local.
    `on_change` is called with each object added or modified (not for deletions)."""

    def __init__(self, admin: Admin, collection: str, ns: str,
                 on_change: Callable[[JSON], Awaitable[None]] | None = None) -> None:  # fmt: skip
        self.admin, self.path, self.on_change = admin, collection.format(ns=ns), on_change
        self.items: dict[str, JSON] = {}
        self.synced = asyncio.Event()
        self.relists = 0
        self.errors = 0

    def get(self, name: str) -> JSON | None:
        return self.items.get(name)

    async def run(self) -> None:
        while True:
            try:
                listed = await self.admin.request("GET", self.path, params={"limit": "0"})
                self.items = {o["metadata"]["name"]: o for o in listed.get("items") or []}
                self.relists += 1
                self.synced.set()
                for obj in list(self.items.values()):
                    await self._changed(obj)
                await self._watch(listed["metadata"]["resourceVersion"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the API server restarting, a 410, a broken stream: relist
                self.errors += 1
                if self.errors <= 3:
                    print(f"cache {self.path}: {type(exc).__name__}: {exc}; relisting", flush=True)
                await asyncio.sleep(0.5)

    async def _watch(self, version: str) -> None:
        params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true", "timeoutSeconds": "240"}
        async with self.admin.session.get(self.admin.server + self.path, params=params) as resp:
            if resp.status != 200:
                raise ApiError(resp.status, await resp.text())
            # Split the stream on newlines here: aiohttp's line reader refuses lines over 64 KiB (an object with
            # its managedFields can be longer).
            buffer = b""
            async for chunk in resp.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        await self._event(json.loads(line))
            # timeoutSeconds ended the watch: relist (cheap at these sizes, and it cannot miss a change)

    async def _event(self, event: JSON) -> None:
        obj = event["object"]
        if event["type"] == "BOOKMARK":  # only a resourceVersion: nothing changed
            return
        if event["type"] == "ERROR":
            raise ApiError(int(obj.get("code") or 500), str(obj.get("message")))
        name = obj["metadata"]["name"]
        if event["type"] == "DELETED":
            self.items.pop(name, None)
        elif event["type"] in ("ADDED", "MODIFIED"):
            self.items[name] = obj
            await self._changed(obj)

    async def _changed(self, obj: JSON) -> None:
        if self.on_change is not None:
            try:
                await self.on_change(obj)
            except (aiohttp.ClientError, ApiError, OSError, TimeoutError) as exc:
                print(f"cache {self.path}: on_change failed: {exc}", flush=True)


class Gateway:
    """The Gateway controller's stand-in: each HTTPRoute generation is accepted `delay` seconds after it is seen (the
    operator waits for that before rolling a pool it drained, and Ready needs it)."""

    def __init__(self, admin: Admin, ns: str, delay: float = 0.1) -> None:
        self.admin, self.ns, self.delay = admin, ns, delay
        self.cache = Cache(admin, HTTPROUTES, ns, self._seen)
        self._pending: set[tuple[str, int]] = set()

    async def _seen(self, route: JSON) -> None:
        generation = int(route["metadata"].get("generation") or 1)
        seen = [c.get("observedGeneration") for p in (route.get("status") or {}).get("parents") or []
                for c in p.get("conditions") or []]  # fmt: skip
        key = (route["metadata"]["name"], generation)
        if (seen and all(g == generation for g in seen)) or key in self._pending:
            return
        self._pending.add(key)
        asyncio.get_running_loop().call_later(self.delay, lambda: asyncio.ensure_future(self._accept(route, key)))

    async def _accept(self, route: JSON, key: tuple[str, int]) -> None:
        name, generation = key
        try:
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            parents = [{
                "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", **ref},
                "controllerName": "specserve.test/gateway",
                "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "test gateway",
                                "lastTransitionTime": now, "observedGeneration": generation}],
            } for ref in route["spec"].get("parentRefs") or []]  # fmt: skip
            await self.admin.merge_patch(HTTPROUTES, self.ns, name, {"status": {"parents": parents}}, "status")
        except (aiohttp.ClientError, ApiError, OSError, TimeoutError) as exc:
            if not isinstance(exc, ApiError) or exc.status != 404:
                print(f"gateway: accepting {name} generation {generation}: {exc}", flush=True)
        except RuntimeError:  # the session closed under a pending acceptance: the run is over
            pass
        finally:
            self._pending.discard(key)


def weights(route: JSON | None) -> dict[str, int] | None:
    if route is None:
        return None
    refs = [r for rule in (route.get("spec") or {}).get("rules") or [] for r in rule.get("backendRefs") or []]
    return {r["name"]: int(r.get("weight", 1)) for r in refs}


def add_gpu_capacity(plane: ControlPlane, pods: int, product: str = GPU_PRODUCTS[2]) -> int:
    """kwok nodes of `product` enough for `pods` pods of GPUS_PER_POD GPUs (PODS_PER_NODE pods a node, the kubelet's
    default): few large nodes, so that kwok's node heartbeats stay a small part of the API server's load. Returns
    how many were added."""
    count = math.ceil(pods / PODS_PER_NODE)
    for i in range(count):
        doc = node(f"bulk-{product[-8:].lower()}-{i}", product, gpus=GPUS_PER_POD * PODS_PER_NODE)
        # and the CPU and memory of the examples' largest pod (32 CPU, 512Gi) times the pods
        doc["status"]["capacity"].update(
            {"cpu": str(32 * PODS_PER_NODE), "memory": f"{512 * PODS_PER_NODE}Gi", "pods": str(PODS_PER_NODE)}
        )
        doc["status"]["allocatable"] = doc["status"]["capacity"]
        plane.add_node(doc)
    return count


def prepare_namespace(plane: ControlPlane, ns: str) -> None:
    """A namespace with what the examples reference: the model-cache and hf-cache claims (bound to hostPath volumes),
    the hf-token Secret, and the llm-serving PriorityClass."""
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    plane.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": "llm-serving"}, "value": 1000})  # fmt: skip
    for claim in ("model-cache", "hf-cache"):
        pv = f"{ns}-{claim}"
        plane.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
                     "spec": {"capacity": {"storage": "10Ti"}, "accessModes": ["ReadOnlyMany", "ReadWriteMany"],
                              "hostPath": {"path": f"/models/{pv}"}, "storageClassName": "",
                              "claimRef": {"namespace": ns, "name": claim}}})  # fmt: skip
        plane.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": ns},
                     "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Ti"}},
                              "storageClassName": "", "volumeName": pv}})  # fmt: skip
    if plane.kubectl("get", "secret", "hf-token", "-n", ns, check=False).returncode != 0:
        plane.kubectl("create", "secret", "generic", "hf-token", "-n", ns, "--from-literal=token=hf_test")


async def create_all(admin: Admin, collection: str, ns: str, bodies: list[JSON], concurrency: int = 16) -> None:
    """POST every body, `concurrency` at a time."""
    queue = list(reversed(bodies))

    async def worker() -> None:
        while queue:
            await admin.create(collection, ns, queue.pop())

    await asyncio.gather(*(worker() for _ in range(concurrency)))

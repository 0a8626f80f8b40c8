"""The demo's own small client of the (fake) Kubernetes API: what a kubelet, a gateway and a viewer need.

aiohttp on the demo's event loop (the operator keeps its own client in its own process)."""

from __future__ import annotations

from typing import Any

import aiohttp

from specserve.kube.kinds import Kind

JSON = dict[str, Any]


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


class DemoApi:
    def __init__(self, base_url: str, session: aiohttp.ClientSession) -> None:
        self.base = base_url.rstrip("/")
        self.session = session

    async def _call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        timeout = aiohttp.ClientTimeout(total=10)
        async with self.session.request(method, self.base + path, json=body, headers=headers, timeout=timeout) as r:
            data = await r.json(content_type=None) if r.content_length != 0 else None
            if r.status == 404 and method == "GET":
                return None
            if r.status >= 300:
                message = data.get("message") if isinstance(data, dict) else data
                raise ApiError(r.status, f"{method} {path}: HTTP {r.status}: {message}")
            return data

    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        data: JSON | None = await self._call("GET", kind.object_path(namespace, name))
        return data

    async def list(self, kind: Kind, namespace: str) -> list[JSON]:
        data = await self._call("GET", kind.collection_path(namespace))
        return list((data or {}).get("items") or [])

    async def create(self, kind: Kind, namespace: str, body: JSON) -> JSON:
        path = kind.collection_path(namespace) if namespace else f"/api/v1/{kind.plural}"
        data: JSON = await self._call("POST", path, body)
        return data

    async def patch_status(self, kind: Kind, namespace: str, name: str, status: JSON) -> None:
        path = kind.object_path(namespace, name) + "/status"
        await self._call("PATCH", path, {"status": status}, "application/merge-patch+json")

    async def patch(self, kind: Kind, namespace: str, name: str, body: JSON) -> None:
        await self._call("PATCH", kind.object_path(namespace, name), body, "application/merge-patch+json")

    async def delete(self, kind: Kind, namespace: str, name: str) -> None:
        try:
            await self._call("DELETE", kind.object_path(namespace, name))
        except ApiError as exc:
            if exc.status != 404:
                raise

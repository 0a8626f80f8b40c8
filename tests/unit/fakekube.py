"""An in-memory Kube for reconcile unit tests: stores what a real API server would (server_objects), bumps
generation on spec changes, and lets the test play the Deployment controller (pods Ready only when it says)."""

from __future__ import annotations

import copy
from typing import Any

from specserve.kube.client import KubeError
from specserve.kube.kinds import SPECSERVE, Kind
from tests.unit import server_objects

JSON = dict[str, Any]


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], JSON] = {}
        self.writes: list[tuple[str, str]] = []
        self.status: JSON = {}
        self.status_patches: list[JSON] = []
        self.fail: dict[tuple[str, str], KubeError] = {}  # (verb, "Kind/name" or "Kind") -> error
        self.handovers: list[tuple[str, JSON]] = []  # (field manager, body) of applies by other managers
        self.status_owners: dict[str, tuple[set[str], set[str]]] = {}  # manager -> (fields, condition types)

    def _check(self, verb: str, kind: str, name: str = "") -> None:
        for key in ((verb, f"{kind}/{name}"), (verb, kind)):
            if key in self.fail:
                raise self.fail[key]

    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        self._check("get", kind.kind, name)
        return copy.deepcopy(self.objects.get((kind.kind, name)))

    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]:
        self._check("list", kind.kind)
        # Items of a LIST carry no apiVersion/kind, as on a real server.
        return [
            {k: v for k, v in copy.deepcopy(o).items() if k not in ("apiVersion", "kind")}
            for (k, _), o in self.objects.items()
            if k == kind.kind and labels.items() <= (o["metadata"].get("labels") or {}).items()
        ]

    async def apply(self, manifest: JSON, field_manager: str = "specserve") -> JSON:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        self._check("apply", kind, name)
        self.writes.append(("apply", f"{kind}/{name}"))
        if field_manager != "specserve":  # a partial apply by another manager (the replica handover)
            self.handovers.append((field_manager, copy.deepcopy(manifest)))
            return copy.deepcopy(self.objects[(kind, name)])
        old = self.objects.get((kind, name))
        new = server_objects.stored(manifest)
        if kind == "Deployment":
            generation = (old or {}).get("metadata", {}).get("generation", 0)
            changed = old is None or old["spec"] != new["spec"]
            new["metadata"]["generation"] = generation + 1 if changed else generation
            status = copy.deepcopy((old or {}).get("status") or {})
            replicas = new["spec"].get("replicas", 1)
            if old is None or old["spec"]["template"] != new["spec"]["template"]:
                status = {"replicas": replicas, "updatedReplicas": replicas, "readyReplicas": 0}  # pods restart
            status["observedGeneration"] = new["metadata"]["generation"]
            new["status"] = status
        elif old is not None and "status" in old:  # an apply of the main resource leaves the status alone
            new["status"] = copy.deepcopy(old["status"])
        self.objects[(kind, name)] = new
        return copy.deepcopy(new)

    async def delete(self, kind: Kind, namespace: str, name: str) -> None:
        self._check("delete", kind.kind, name)
        self.writes.append(("delete", f"{kind.kind}/{name}"))
        self.objects.pop((kind.kind, name), None)

    async def apply_status(self, kind: Kind, namespace: str, name: str, status_body: JSON, field_manager: str) -> JSON:
        """Server-side apply of /status at the granularity the writers use: top-level fields, and conditions as a
        map keyed by type. What this manager applied before and leaves out now goes (unless another owns it)."""
        assert kind == SPECSERVE
        self._check("apply_status", kind.kind, name)
        self.writes.append(("status", name))
        self.status_patches.append(copy.deepcopy(status_body))
        fields = {k for k in status_body if k != "conditions"}
        types = {c["type"] for c in status_body.get("conditions") or []}
        old_fields, old_types = self.status_owners.get(field_manager, (set(), set()))
        others = [v for m, v in self.status_owners.items() if m != field_manager]
        other_fields = set().union(*(f for f, _ in others)) if others else set()
        other_types = set().union(*(t for _, t in others)) if others else set()
        status = {k: v for k, v in self.status.items() if k not in old_fields - fields - other_fields}
        status.update(copy.deepcopy({k: v for k, v in status_body.items() if k != "conditions"}))
        live_conditions = status.get("conditions")
        kept = [
            c for c in (live_conditions if isinstance(live_conditions, list) else [])
            if isinstance(c, dict) and c.get("type") not in types and c.get("type") not in old_types - other_types
        ]  # fmt: skip
        status["conditions"] = copy.deepcopy(status_body.get("conditions") or []) + kept
        if not status["conditions"]:
            del status["conditions"]
        self.status = status
        self.status_owners[field_manager] = (fields, types)
        return {"status": copy.deepcopy(status)}

    # ---------------------------------------------------------------------------- the test's controller

    def ready(self, name: str, ready: int | None = None) -> None:
        """The Deployment controller's word: `ready` pods (default all) of the current template are Ready."""
        deployment = self.objects[("Deployment", name)]
        replicas = deployment["spec"].get("replicas", 1)
        deployment["status"] = {
            "observedGeneration": deployment["metadata"]["generation"],
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas if ready is None else ready,
        }

    def accept_route(self, name: str = "m") -> None:
        """A Gateway controller's word: the HTTPRoute is accepted."""
        accepted = {"type": "Accepted", "status": "True", "reason": "Accepted", "message": ""}
        self.objects[("HTTPRoute", name)]["status"] = {"parents": [{"conditions": [accepted]}]}

    def route_weights(self, name: str = "m") -> dict[str, int]:
        route = self.objects[("HTTPRoute", name)]
        return {b["name"]: b["weight"] for b in route["spec"]["rules"][0]["backendRefs"]}

    def put(self, obj: JSON) -> None:
        self.objects[(obj["kind"], obj["metadata"]["name"])] = copy.deepcopy(obj)

"""The object store and its write semantics: metadata, generation, status subresource, patches, apply,
deletion with finalizers and garbage collection, and the watch event history.

Stored dicts are never mutated in place: every write builds a new dict, so watch events and lists may hold
references to them safely.
"""

from __future__ import annotations

import asyncio
import copy
import random
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from specserve_kubefake import defaults, fields, patching
from specserve_kubefake.admission import Admission
from specserve_kubefake.errors import ApiError, not_found
from specserve_kubefake.resources import Registry, ResourceType
from specserve_kubefake.selectors import Selector
from specserve_kubefake.validation import Validator
from specserve_kubefake.watch import Event, Watch, WatchHub

__all__ = ["ApiError", "Event", "Store", "Watch"]

JSON = dict[str, Any]
ObjKey = tuple[str, str, str]  # resource key, namespace ("" when cluster-scoped), name
AfterWrite = Callable[["Store", ResourceType, JSON, "JSON | None"], None]
_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _keyed(rt: ResourceType, subresource: str) -> bool:
    """Whether the keyed lists of patching.LIST_MAP_KEYS merge by key. Built-in kinds: always. Custom resources: in
    their status, where the one such list they declare is `conditions` (a list map keyed by type in the SpecServe
    CRD and the Gateway API's); elsewhere their lists stay atomic, as their schemas leave them."""
    return rt.builtin or subresource == "status"


def _spec_part(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _content(obj: JSON) -> JSON:
    """The object without what the server alone writes on every change (resourceVersion, managedFields)."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return {**obj, "metadata": meta}


def _subresource_view(rt: ResourceType, old: JSON | None, new: JSON, subresource: str) -> JSON:
    """With the status subresource, a write to it changes only .status (and managedFields), a write to the
    main resource never changes .status, and a create starts without one."""
    new = {**new, "metadata": dict(new.get("metadata") or {})}  # the top levels this write changes: fresh copies
    if not rt.status_subresource:
        return new
    if old is None:
        new.pop("status", None)
        return new
    if subresource != "status":
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
        return new
    out = {**old, "metadata": dict(old["metadata"])}
    if new.get("status") is None:
        out.pop("status", None)
    else:
        out["status"] = new["status"]
    managed = (new.get("metadata") or {}).get("managedFields")
    if managed is not None:
        out["metadata"]["managedFields"] = managed
    return out


class Store:
    def __init__(self, registry: Registry, validator: Validator, history: int = 20000) -> None:
        self.registry = registry
        self.validator = validator
        self.rv = 0
        self.objects: dict[str, dict[tuple[str, str], JSON]] = {}
        self.hub = WatchHub(history)
        self.after_write: list[AfterWrite] = []
        self._uids: dict[str, ObjKey] = {}
        self._dependents: dict[str, set[ObjKey]] = {}
        self._labels: dict[str, dict[tuple[str, str], set[tuple[str, str]]]] = {}
        # False: the OwnerReferencesPermissionEnforcement admission plugin runs and the client may not update
        # <owner>/finalizers, so it may not set blockOwnerDeletion (OpenShift, hardened clusters).
        self.block_owner_deletion_allowed = True
        self.admission = Admission()

    # ---------------------------------------------------------------------------------------------- reads

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], JSON]:
        return self.objects.setdefault(rt.key, {})

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> JSON | None:
        return self._bucket(rt).get(((namespace or "") if rt.namespaced else "", name))

    def must_get(self, rt: ResourceType, namespace: str | None, name: str) -> JSON:
        obj = self.get(rt, namespace, name)
        if obj is None:
            raise not_found(rt.kind, rt.plural, rt.group, name)
        return obj

    def select(
        self, rt: ResourceType, namespace: str | None, selector: Selector | None = None
    ) -> tuple[list[JSON], int]:
        """Matching objects sorted by namespace and name, and the resourceVersion of the list."""
        bucket = self._bucket(rt)
        candidates: Iterable[tuple[str, str]] = bucket
        if selector is not None and selector.label_equalities:
            index = self._labels.get(rt.key, {})
            matched = [index.get(pair, set()) for pair in selector.label_equalities]
            smallest: set[tuple[str, str]] = min(matched, key=len)  # the rest is checked below, on fewer objects
            candidates = smallest
        keys = sorted(k for k in candidates if not rt.namespaced or not namespace or k[0] == namespace)
        items = [bucket[k] for k in keys]
        if selector is not None:
            items = [o for o in items if selector.matches(o)]
        return items, self.rv

    def _index_labels(self, key: str, where: tuple[str, str], old: JSON | None, new: JSON | None) -> None:
        """Keep the label index (resource -> (label, value) -> objects) in step with a store or a removal."""
        index = self._labels.setdefault(key, {})
        before = ((old or {}).get("metadata") or {}).get("labels") or {}
        after = ((new or {}).get("metadata") or {}).get("labels") or {}
        if before == after:
            return
        for pair in before.items():
            if after.get(pair[0]) != pair[1]:
                index.get(pair, set()).discard(where)
        for pair in after.items():
            index.setdefault(pair, set()).add(where)

    def by_uid(self, uid: str) -> JSON | None:
        where = self._uids.get(uid)
        if where is None:
            return None
        return self.objects.get(where[0], {}).get((where[1], where[2]))

    # --------------------------------------------------------------------------------------------- writes

    def create(self, body: JSON, *, rt: ResourceType, namespace: str | None = None, manager: str = "unknown") -> JSON:
        """POST: 409 AlreadyExists when taken; generateName honoured; uid/creationTimestamp/generation set."""
        meta = body.setdefault("metadata", {})
        ns = (namespace or meta.get("namespace") or "") if rt.namespaced else ""
        if rt.namespaced and not ns:
            raise ApiError(400, "BadRequest", "the namespace of the object must be set")
        if namespace and meta.get("namespace") and meta["namespace"] != namespace:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the request")
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise ApiError(422, "Invalid", "name or generateName is required", {"kind": rt.kind})
            meta["name"] = meta["generateName"] + "".join(random.choices(_GENERATE_CHARS, k=5))
        self._check_namespace(rt, ns)
        if self.get(rt, ns, meta["name"]) is not None:
            name = meta["name"]
            raise ApiError(409, "AlreadyExists", f'{rt.plural}{"." + rt.group if rt.group else ""} "{name}" '
                           "already exists", {"name": name, "group": rt.group, "kind": rt.plural})  # fmt: skip
        for server_field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
            meta.pop(server_field, None)
        return self._commit(rt, ns, meta["name"], None, body, manager=manager, subresource="", op="Update")

    def replace(
        self, rt: ResourceType, namespace: str | None, name: str, body: JSON, *, subresource: str = "",
        manager: str = "unknown",
    ) -> JSON:  # fmt: skip
        """PUT: metadata.resourceVersion is required and must be current (409 Conflict otherwise)."""
        old = self.must_get(rt, namespace, name)
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if not rv:
            raise ApiError(422, "Invalid", f'{rt.kind} "{name}" is invalid: metadata.resourceVersion: Invalid value: '
                           '0: must be specified for an update')  # fmt: skip
        self._precondition(rt, name, old, rv)
        return self._commit(rt, self._ns(rt, namespace), name, old, body, manager=manager, subresource=subresource,
                            op="Update")  # fmt: skip

    def patch(
        self, rt: ResourceType, namespace: str | None, name: str, patch_type: str, body: Any, *,
        subresource: str = "", manager: str = "unknown", force: bool = False,
    ) -> JSON:  # fmt: skip
        """PATCH with patch_type merge, strategic, json or apply (server-side apply creates missing objects)."""
        ns = self._ns(rt, namespace)
        old = self.get(rt, ns, name)
        if patch_type == "apply":
            return self._apply(rt, ns, name, old, body, subresource=subresource, manager=manager, force=force)
        if old is None:
            raise not_found(rt.kind, rt.plural, rt.group, name)
        if patch_type == "json":
            new = patching.json_patch(old, body)
            if (new.get("metadata") or {}).get("resourceVersion") != old["metadata"]["resourceVersion"]:
                self._precondition(rt, name, old, (new.get("metadata") or {}).get("resourceVersion"))
        else:
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
            self._precondition(rt, name, old, (body.get("metadata") or {}).get("resourceVersion"))
            if patch_type == "strategic":
                if not rt.builtin:
                    raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                                   "accepted media types include: application/json-patch+json, "
                                   "application/merge-patch+json, application/apply-patch+yaml")  # fmt: skip
                new = patching.strategic_merge_patch(old, body)
            else:
                new = patching.merge_patch(old, body)
        return self._commit(rt, ns, name, old, new, manager=manager, subresource=subresource, op="Update")

    def _apply(
        self, rt: ResourceType, ns: str, name: str, old: JSON | None, body: Any, *, subresource: str,
        manager: str, force: bool,
    ) -> JSON:  # fmt: skip
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "an apply patch must be an object")
        meta = body.get("metadata") or {}
        if meta.get("name", name) != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
        if (body.get("apiVersion"), body.get("kind")) != (rt.api_version, rt.kind):
            raise ApiError(400, "BadRequest", f"apply body must be {rt.api_version} {rt.kind}")
        if old is not None:
            self._precondition(rt, name, old, meta.get("resourceVersion"))
        elif subresource:
            raise not_found(rt.kind, rt.plural, rt.group, name)
        else:
            self._check_namespace(rt, ns)
        status = (subresource == "status") if rt.status_subresource else None
        new = fields.server_side_apply(
            old, body, manager=manager, force=force, keyed=_keyed(rt, subresource), status=status,
            api_version=rt.api_version,
            now=now(),
        )  # fmt: skip
        new.setdefault("metadata", {})["name"] = name
        return self._commit(rt, ns, name, old, new, manager=manager, subresource=subresource, op="Apply")

    def _commit(
        self, rt: ResourceType, ns: str, name: str, old: JSON | None, candidate: JSON, *, manager: str,
        subresource: str, op: str,
    ) -> JSON:  # fmt: skip
        stamp = now()
        # Subtrees are shared with ``candidate`` and ``old``: nothing below mutates them (normalisation builds
        # new dicts), which saves the deep copies that dominated the CPU per write.
        new = _subresource_view(rt, old, candidate, subresource)
        self._server_metadata(rt, ns, name, old, new, stamp)
        new = self._normalise(rt, new, old)
        requested, stages = new, []  # stages: what each mutating webhook made of the object, in order
        if subresource != "status" and self.admission.mutators:
            for webhook in self.admission.matching(frozenset((rt.kind, rt.plural, rt.key)), new):
                mutated = copy.deepcopy(new)
                webhook.mutate(mutated)
                new = self._normalise(rt, mutated, old)
                stages.append((webhook.manager, new))
        meta = new["metadata"]
        if rt.generation:
            generation = 1 if old is None else int(old["metadata"].get("generation", 1))
            if old is not None and _spec_part(old) != _spec_part(new):
                generation += 1
            meta["generation"] = generation
        if old is None or _content(old) != _content(new):
            self._admit_owner_references(rt, new, old)
            self.validator.validate(rt, new, old)  # an unchanged object was valid when stored
        status_flag = (subresource == "status") if rt.status_subresource else None
        keyed = _keyed(rt, subresource)
        if op != "Apply":
            fields.record_update(
                old, requested, manager=manager, keyed=keyed, status=status_flag, api_version=rt.api_version, now=stamp
            )
        before = requested
        for webhook_manager, stage in stages:  # what a webhook changed is its own, as an Update by its manager
            stage["metadata"].pop("managedFields", None)
            if "managedFields" in before["metadata"]:
                stage["metadata"]["managedFields"] = before["metadata"]["managedFields"]
            if webhook_manager is not None:  # None: unowned, as the API server leaves a plain webhook's fields
                fields.record_update(before, stage, manager=webhook_manager, keyed=keyed, status=status_flag,
                                     api_version=rt.api_version, now=stamp)  # fmt: skip
            before = stage
        if old is not None:
            meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            if new == old:
                return old  # a no-op write changes nothing: no new resourceVersion, no event
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not self._held_by_spec_finalizers(new):
            self._remove(rt, ns, name, new)
            return new
        self._store(rt, ns, name, new, "ADDED" if old is None else "MODIFIED")
        for hook in list(self.after_write):
            hook(self, rt, new, old)
        self._collect_if_orphaned(rt, new)
        return new

    def _admit_owner_references(self, rt: ResourceType, new: JSON, old: JSON | None) -> None:
        if self.block_owner_deletion_allowed:
            return
        before = {r.get("uid") for r in ((old or {}).get("metadata") or {}).get("ownerReferences") or []
                  if r.get("blockOwnerDeletion")}  # fmt: skip
        for ref in new["metadata"].get("ownerReferences") or []:
            if ref.get("blockOwnerDeletion") and ref.get("uid") not in before:
                group = ref.get("apiVersion", "").rpartition("/")[0]
                plural = ref.get("kind", "").lower() + "s"
                raise ApiError(403, "Forbidden", f'{rt.plural} "{new["metadata"]["name"]}" is forbidden: cannot set '
                               "blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers "
                               f'on: cannot update resource "{plural}/finalizers" in API group "{group}"')  # fmt: skip

    def _normalise(self, rt: ResourceType, new: JSON, old: JSON | None) -> JSON:
        if rt.builtin:
            return defaults.normalise_builtin(rt.key, new, old)
        return defaults.normalise_extra(rt.key, self.validator.prepare(rt, new, old), old)

    @staticmethod
    def _server_metadata(rt: ResourceType, ns: str, name: str, old: JSON | None, new: JSON, stamp: str) -> None:
        """apiVersion, kind, name, namespace, uid and timestamps are the server's; generation comes later."""
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        meta = new.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        meta["name"] = name
        if rt.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if old is None:
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = stamp
        else:
            for server_field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
                if server_field in old["metadata"]:
                    meta[server_field] = old["metadata"][server_field]
                else:
                    meta.pop(server_field, None)
            added = set(meta.get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
            if old["metadata"].get("deletionTimestamp") and added:
                raise ApiError(422, "Invalid", f'{rt.kind} "{name}" is invalid: metadata.finalizers: Forbidden: no new '
                               "finalizers can be added if the object is being deleted")  # fmt: skip
        meta.pop("generation", None)
        meta.pop("resourceVersion", None)

    @staticmethod
    def _held_by_spec_finalizers(obj: JSON) -> bool:
        return bool((obj.get("spec") or {}).get("finalizers")) and obj.get("kind") == "Namespace"

    def _store(self, rt: ResourceType, ns: str, name: str, obj: JSON, event: str) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        bucket = self._bucket(rt)
        old = bucket.get((ns, name))
        bucket[(ns, name)] = obj
        self._index_labels(rt.key, (ns, name), old, obj)
        uid = obj["metadata"]["uid"]
        self._uids[uid] = (rt.key, ns, name)
        self._index_owners(old, remove=True)
        self._index_owners(obj)
        self.hub.emit(Event(self.rv, event, rt.key, ns, obj))

    def _index_owners(self, obj: JSON | None, remove: bool = False) -> None:
        if obj is None:
            return
        me = self._uids.get(obj["metadata"]["uid"])
        if me is None:
            return
        for ref in obj["metadata"].get("ownerReferences") or []:
            deps = self._dependents.setdefault(ref.get("uid", ""), set())
            if remove:
                deps.discard(me)
            else:
                deps.add(me)

    def _precondition(self, rt: ResourceType, name: str, old: JSON, rv: Any) -> None:
        if rv and str(rv) != old["metadata"]["resourceVersion"]:
            group = f".{rt.group}" if rt.group else ""
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {rt.plural}{group} "{name}": the object '
                           "has been modified; please apply your changes to the latest version and try again",
                           {"name": name, "group": rt.group, "kind": rt.plural})  # fmt: skip

    def _ns(self, rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rt.namespaced else ""

    def _check_namespace(self, rt: ResourceType, ns: str) -> None:
        if not rt.namespaced:
            return
        ns_type = self.registry.get("v1/namespaces")
        namespace = self.get(ns_type, None, ns) if ns_type is not None else None
        if namespace is None:
            raise ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})
        if namespace["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden", f"unable to create new content in namespace {ns} because it is being "
                           "terminated", {"name": ns, "kind": "namespaces"})  # fmt: skip

    # ------------------------------------------------------------------------------------------- deletion

    def delete(
        self, rt: ResourceType, namespace: str | None, name: str, *, propagation: str = "Background",
        preconditions: JSON | None = None,
    ) -> JSON:  # fmt: skip
        """DELETE: finalizers hold the object with a deletionTimestamp; dependents are garbage-collected
        (Background: after the owner goes; Foreground: before, the owner waiting with foregroundDeletion)."""
        ns = self._ns(rt, namespace)
        old = self.must_get(rt, ns, name)
        if preconditions:
            if preconditions.get("uid") and preconditions["uid"] != old["metadata"]["uid"]:
                raise ApiError(409, "Conflict", "Precondition failed: UID in precondition does not match")
            self._precondition(rt, name, old, preconditions.get("resourceVersion"))
        finalizers = list(old["metadata"].get("finalizers") or [])
        if propagation == "Foreground" and self._dependents.get(old["metadata"]["uid"]):
            finalizers.append("foregroundDeletion")
        if rt.key == "v1/namespaces" or finalizers:
            if old["metadata"].get("deletionTimestamp"):
                return old
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["metadata"]["finalizers"] = list(dict.fromkeys(finalizers))
            if rt.key == "v1/namespaces":
                new.setdefault("status", {})["phase"] = "Terminating"
            if not new["metadata"]["finalizers"]:
                new["metadata"].pop("finalizers")
            self._store(rt, ns, name, new, "MODIFIED")
            if rt.key == "v1/namespaces":
                self._empty_namespace(name)
            elif "foregroundDeletion" in finalizers:
                self._collect_dependents(new["metadata"]["uid"])
                self._finish_foreground(new["metadata"]["uid"])
            return self.get(rt, ns, name) or new
        self._remove(rt, ns, name, old)
        return old

    def _remove(self, rt: ResourceType, ns: str, name: str, final: JSON) -> None:
        bucket = self._bucket(rt)
        stored = bucket.pop((ns, name), None)
        self._index_labels(rt.key, (ns, name), stored, None)
        self._index_owners(stored, remove=True)
        uid = final["metadata"]["uid"]
        self._uids.pop(uid, None)
        self.rv += 1
        gone = {**final, "metadata": {**final["metadata"], "resourceVersion": str(self.rv)}}
        self.hub.emit(Event(self.rv, "DELETED", rt.key, ns, gone))
        self._collect_dependents(uid)
        for ref in final["metadata"].get("ownerReferences") or []:
            self._finish_foreground(ref.get("uid", ""))
        if rt.namespaced:
            self._finish_namespace(ns)

    def _collect_dependents(self, uid: str) -> None:
        """The garbage collector: dependents whose every owner is gone are deleted (recursively)."""
        for key, ns, name in sorted(self._dependents.pop(uid, set())):
            dep_rt = self.registry.get(key)
            dep = self.objects.get(key, {}).get((ns, name))
            if dep_rt is None or dep is None or dep["metadata"].get("deletionTimestamp"):
                continue
            owners = [r.get("uid") for r in dep["metadata"].get("ownerReferences") or []]
            if any(o != uid and o in self._uids for o in owners):
                continue
            self.delete(dep_rt, ns, name, propagation="Background")

    def _finish_foreground(self, owner_uid: str) -> None:
        where = self._uids.get(owner_uid)
        if where is None:
            return
        owner = self.objects.get(where[0], {}).get((where[1], where[2]))
        if owner is None or "foregroundDeletion" not in (owner["metadata"].get("finalizers") or []):
            return
        if any(k in self._uids.values() for k in self._dependents.get(owner_uid, set())):
            return
        new = copy.deepcopy(owner)
        new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != "foregroundDeletion"]
        owner_rt = self.registry.get(where[0])
        if owner_rt is None:
            return
        if not new["metadata"]["finalizers"]:
            del new["metadata"]["finalizers"]
            self._remove(owner_rt, where[1], where[2], new)
        else:
            self._store(owner_rt, where[1], where[2], new, "MODIFIED")

    def _empty_namespace(self, ns: str) -> None:
        for rt in self.registry:
            if not rt.namespaced:
                continue
            for obj_ns, name in sorted(self._bucket(rt)):
                if obj_ns == ns and (self.get(rt, ns, name) or {}).get("metadata", {}).get("deletionTimestamp") is None:
                    self.delete(rt, ns, name)
        self._finish_namespace(ns)

    def _finish_namespace(self, ns: str) -> None:
        ns_rt = self.registry.get("v1/namespaces")
        namespace = self.get(ns_rt, None, ns) if ns_rt is not None else None
        if namespace is None or not namespace["metadata"].get("deletionTimestamp"):
            return
        if any(k[0] == ns for rt in self.registry if rt.namespaced for k in self._bucket(rt)):
            return
        assert ns_rt is not None
        final = copy.deepcopy(namespace)
        final["spec"] = {}
        if final["metadata"].get("finalizers"):
            self._store(ns_rt, "", ns, final, "MODIFIED")  # metadata finalizers still hold it
        else:
            self._remove(ns_rt, "", ns, final)

    def _collect_if_orphaned(self, rt: ResourceType, obj: JSON) -> None:
        """A dependent none of whose owners exist is garbage: the collector deletes it soon after."""
        refs = obj["metadata"].get("ownerReferences") or []
        if not refs or any(r.get("uid") in self._uids for r in refs):
            return
        ns, name = obj["metadata"].get("namespace", ""), obj["metadata"]["name"]

        def collect() -> None:
            current = self.get(rt, ns, name)
            if current is not None and current["metadata"]["uid"] == obj["metadata"]["uid"]:
                refs_now = current["metadata"].get("ownerReferences") or []
                if refs_now and not any(r.get("uid") in self._uids for r in refs_now):
                    self.delete(rt, ns, name)

        try:
            asyncio.get_running_loop().call_later(0.05, collect)
        except RuntimeError:
            collect()

    # ---------------------------------------------------------------------------------------------- watch

    def subscribe(self, rt: ResourceType, namespace: str | None, since: int | None) -> tuple[list[Event], Watch]:
        """Events to replay then a live subscription: after ``since`` from the history (410 when it is older
        than the history), or ADDED for every current object when ``since`` is None."""
        ns = namespace if rt.namespaced and namespace else None
        if since is None:
            items, _ = self.select(rt, ns)
            replay = [Event(int(o["metadata"]["resourceVersion"]), "ADDED", rt.key, o["metadata"].get("namespace", ""),
                            o) for o in items]  # fmt: skip
        else:
            replay = self.hub.since(rt.key, ns, since)
        return replay, self.hub.subscribe(rt.key, ns)

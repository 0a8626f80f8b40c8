"""What a SpecServe renders to, remembered while its spec does not change: a resync round re-reads every
SpecServe, and rendering (templates, then YAML parsing) was most of a steady-state reconcile's CPU (about 11 of
18 ms). Keyed by a digest of what render() reads (the spec, the object's names) and the mode, so any change
renders again.

One entry per SpecServe (its last render as compressed JSON: about 12 KB of JSON in 2-3 KB, a copy of its own
for every caller); `forget` drops a deleted SpecServe's entry.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

from specserve.api.models import Mode, SpecServe
from specserve.kube.kinds import DEPLOYMENT
from specserve.reconcile.intent import with_template_hash
from specserve.render import render

JSON = dict[str, Any]
_RENDERED_METADATA = {"name", "namespace", "uid", "labels"}
_last: dict[tuple[str, str], tuple[bytes, bytes]] = {}  # (namespace, name) -> (digest, the manifests, zlib JSON)


def remembered_render(obj: SpecServe, mode: Mode) -> list[JSON]:
    """render(obj, mode) with each Deployment's template hash, as fresh objects the caller may change."""
    # What render() reads (name, namespace, uid, the spec; labels for safety), not the rest of metadata: the
    # resourceVersion and managedFields change with every write, status writes included, and kopf's annotations
    # (last-handled-configuration) with its first handling; each made a miss, 2-3 renders per SpecServe at start.
    seen = obj.model_dump_json(include={"metadata": _RENDERED_METADATA, "spec": True})
    digest = hashlib.blake2b(seen.encode() + mode.value.encode(), digest_size=16).digest()
    key = (obj.metadata.namespace, obj.metadata.name)
    hit = _last.get(key)
    if hit is not None and hit[0] == digest:
        manifests: list[JSON] = json.loads(zlib.decompress(hit[1]))
        return manifests
    out = [with_template_hash(m) if m["kind"] == DEPLOYMENT.kind else m for m in render(obj, mode)]
    _last[key] = (digest, zlib.compress(json.dumps(out, separators=(",", ":")).encode(), 1))
    return out


def forget(namespace: str, name: str) -> None:
    _last.pop((namespace, name), None)

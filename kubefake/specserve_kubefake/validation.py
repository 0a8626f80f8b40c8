"""Admission for writes: custom resources pruned and defaulted by their schema, then every object validated."""

from __future__ import annotations

from typing import Any

from specserve_kubefake import rules, schemas
from specserve_kubefake.errors import invalid
from specserve_kubefake.resources import ResourceType

JSON = dict[str, Any]


class Validator:
    """``enabled=False`` still prunes and defaults custom resources (storage, not validation) but accepts all."""

    def __init__(self, enabled: bool = True) -> None:
        if enabled:
            try:
                import celpy  # noqa: F401, PLC0415
                import jsonschema  # noqa: F401, PLC0415
                import kubernetes_validate  # noqa: F401, PLC0415
            except ImportError as exc:
                raise ImportError(f"kubefake validation needs {exc.name or exc}: pip install 'specserve-tools[demo]' "
                                  "(or FakeApiServer(validate=False))") from exc  # fmt: skip
        self.enabled = enabled
        self._custom: dict[str, schemas.CustomResourceSchema] = {}

    def _schema(self, rt: ResourceType) -> schemas.CustomResourceSchema | None:
        if rt.schema is None:
            return None
        compiled = self._custom.get(rt.key)
        if compiled is None:
            compiled = self._custom[rt.key] = schemas.CustomResourceSchema(rt.schema)
        return compiled

    def prepare(self, rt: ResourceType, obj: JSON, old: JSON | None = None) -> JSON:
        """A custom resource as its structural schema stores it (unknown fields pruned, defaults applied).
        Top-level parts that are the very objects stored in ``old`` (a write that left them alone) were
        pruned when stored and are kept as they are."""
        if rt.builtin or rt.schema is None:
            return obj
        untouched = {k: v for k, v in obj.items() if old is not None and k != "metadata" and old.get(k) is v}
        changed = {k: v for k, v in obj.items() if k not in untouched}
        out: JSON = schemas.prune_and_default(changed, rt.schema, root=True)
        for key, value in untouched.items():
            out[key] = value
        return out

    def validate(self, rt: ResourceType, obj: JSON, old: JSON | None) -> None:
        """Raise 422 Invalid naming the fields when the API server would refuse ``obj``."""
        if not self.enabled:
            return
        causes = rules.check(rt.key, obj, old)
        if rt.builtin:
            causes += schemas.validate_builtin(obj, old)
        else:
            compiled = self._schema(rt)
            if compiled is not None:
                causes += compiled.validate(obj, old)
        if causes:
            kind = rt.kind if rt.builtin else f"{rt.kind}.{rt.group}"
            raise invalid(kind, (obj.get("metadata") or {}).get("name", ""), causes, rt.group)

"""Mutating admission: hooks that change objects on their way into the store, as a mutating webhook would
(sidecar injectors, policy engines adding labels, annotations or env vars to pod templates).

A hook runs on every create and update of the main resource (never on ``/status``) of the objects it matches,
after the request's own change and before validation. The fields it changes are recorded in
``metadata.managedFields`` under the hook's field manager (as a webhook that declares its ownership does, e.g.
Kyverno's); with ``manager=None`` they are owned by nobody, as the API server leaves the fields of a plain webhook
(mutating admission runs after the request's managedFields are computed: kubernetes#87672). Either way a later
server-side apply by another manager keeps them. A hook that sets what is already there changes nothing: a write
that the hook makes a no-op stays a no-op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]
Mutate = Callable[[JSON], None]  # changes the object it is given (a private copy) in place


@dataclass
class Mutator:
    """One mutating webhook. ``kind`` is the kind (``Deployment``), plural or resource key it intercepts."""

    kind: str
    mutate: Mutate
    manager: str | None = "mutating-webhook"
    namespace: str | None = None
    name: str | None = None
    active: bool = True

    def matches(self, kinds: frozenset[str], obj: JSON) -> bool:
        if not self.active or self.kind not in kinds:
            return False
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.name is None or meta.get("name") == self.name

    def cancel(self) -> None:
        """Uninstall the webhook: later writes pass unchanged (what it added stays until someone removes it)."""
        self.active = False


@dataclass
class Admission:
    """The mutating webhooks of one server, applied in the order they were added."""

    mutators: list[Mutator] = field(default_factory=list)

    def mutating_webhook(
        self, kind: str, mutate: Mutate, *, manager: str | None = "mutating-webhook", namespace: str | None = None,
        name: str | None = None,
    ) -> Mutator:  # fmt: skip
        mutator = Mutator(kind, mutate, manager, namespace, name)
        self.mutators.append(mutator)
        return mutator

    def matching(self, kinds: frozenset[str], obj: JSON) -> list[Mutator]:
        if not self.mutators:
            return []
        return [m for m in self.mutators if m.matches(kinds, obj)]

    def clear(self) -> None:
        for mutator in self.mutators:
            mutator.cancel()
        self.mutators.clear()


def _pod_spec_metadata(obj: JSON) -> JSON:
    template = obj.setdefault("spec", {}).setdefault("template", {})
    meta: JSON = template.setdefault("metadata", {})
    return meta


def pod_template_annotation(key: str, value: str) -> Mutate:
    """A webhook that annotates the pod template of a workload (Deployment, ...)."""

    def mutate(obj: JSON) -> None:
        _pod_spec_metadata(obj).setdefault("annotations", {})[key] = value

    return mutate


def pod_template_env(name: str, value: str, container: str | None = None) -> Mutate:
    """A webhook that sets an env var on the pod template's containers (all, or the one named ``container``)."""

    def mutate(obj: JSON) -> None:
        spec = obj.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
        for c in spec.get("containers") or []:
            if container is not None and c.get("name") != container:
                continue
            env = c.setdefault("env", [])
            for var in env:
                if var.get("name") == name:
                    var.clear()
                    var.update({"name": name, "value": value})
                    break
            else:
                env.append({"name": name, "value": value})

    return mutate

"""Server-side apply of a custom resource's status by two field managers: `conditions` merges by type."""

from __future__ import annotations

from typing import Any

from specserve_kubefake import SPECSERVES, FakeApiServer
from tests.kubefake.conftest import NS, kimi


def condition(type_: str, reason: str = "Set") -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def apply_status(server: FakeApiServer, manager: str, status: dict[str, Any]) -> dict[str, Any]:
    rt = server.registry.get(SPECSERVES)
    assert rt is not None
    body = {"apiVersion": rt.api_version, "kind": rt.kind, "metadata": {"name": "kimi-k25", "namespace": NS},
            "status": status}  # fmt: skip
    out: dict[str, Any] = server.store.patch(
        rt, NS, "kimi-k25", "apply", body, subresource="status", manager=manager, force=True
    )
    applied: dict[str, Any] = out["status"]
    return applied


def test_two_managers_conditions_and_fields_survive_each_others_applies(server: FakeApiServer) -> None:
    server.create(kimi())
    apply_status(server, "specserve", {"activeMode": "Baseline", "conditions": [condition("Ready")]})
    apply_status(server, "specserve-switching", {"load": {"concurrency": 3.0}, "conditions": [condition("Switching")]})
    status = apply_status(server, "specserve", {"activeMode": "Speculative", "conditions": [condition("Ready", "B")]})
    assert {c["type"]: c["reason"] for c in status["conditions"]} == {"Ready": "B", "Switching": "Set"}
    assert status["load"]["concurrency"] == 3.0 and status["activeMode"] == "Speculative"
    # A condition its manager stops applying goes; the other manager's stays.
    status = apply_status(server, "specserve", {"activeMode": "Speculative", "conditions": []})
    assert [c["type"] for c in status["conditions"]] == ["Switching"]

"""The API server's error answers: a status code and a `Status` body."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error the fake answers with ``status`` and a ``Status`` body (reason NotFound, AlreadyExists, ...)."""

    def __init__(self, status: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details or {}

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.status,
        }
        if self.details:
            out["details"] = self.details
        return out


def not_found(kind: str, plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{plural}{"." + group if group else ""} "{name}" not found',
                    {"name": name, "group": group, "kind": plural})  # fmt: skip


def invalid(kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
    """422 Invalid naming each field, as the API server words it: `Kind "name" is invalid: field: message`."""
    text = "; ".join(f"{f}: {m}" for f, m in causes)
    details = {
        "name": name,
        "group": group,
        "kind": kind,
        "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes],
    }
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {text}', details)

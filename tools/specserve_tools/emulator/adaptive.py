"""Reading an adaptive-speculation config: SGLang's JSON file form ({"1": {"candidate_steps": [1, 3]}}) or
SpecServe's list form ({"1": [1, 3]}). Same checks as SGLang's _load_adaptive_config: integer-string keys,
non-empty lists of non-negative ints, at least one key."""

from __future__ import annotations

from typing import Any


def parse_adaptive_config(doc: Any, where: str) -> dict[int, list[int]]:
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: an adaptive config is a JSON object of batch-size keys")
    table: dict[int, list[int]] = {}
    for key, entry in doc.items():
        if not isinstance(key, str) or not key.isdigit():
            continue  # SGLang ignores non-numeric keys too
        steps = entry.get("candidate_steps") if isinstance(entry, dict) else entry
        if (
            not isinstance(steps, list)
            or not steps
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps)
        ):
            raise ValueError(f"{where}: batch size {key}: candidate steps must be a non-empty list of ints >= 0")
        table[int(key)] = list(steps)
    if not table:
        raise ValueError(f'{where}: needs at least one batch-size key, e.g. {{"1": {{"candidate_steps": [3]}}}}')
    return table

"""Make a loop.json (scripts/gpu/loop.py) small enough to commit: every request as one compact row
(stage, sampled, start, first, end, tokens, pool, error) instead of a dict, per policy and for the Restart run.

usage: python3 loop_compact.py IN.json OUT.json"""

from __future__ import annotations

import json
import sys
from typing import Any

COLUMNS = ["stage", "sampled", "start", "first", "end", "tokens", "pool", "error"]


def rows(requests: list[dict[str, Any]], pool_of: dict[str, str]) -> list[list[Any]]:
    def pool(server: str) -> str:
        return pool_of.get(server) or (
            "speculative" if "-spec-" in server else "baseline" if "-base-" in server else "?"
        )

    def t(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    return [[r["stage"], r["sampled"], t(r["start"]), t(r["first"]), t(r["end"]), r["tokens"], pool(r["server"]),
             r["error"]] for r in requests]  # fmt: skip


def compact(data: dict[str, Any]) -> dict[str, Any]:
    for run in (*data.get("policies", {}).values(), data.get("restart") or {}):
        if run.get("requests") and isinstance(run["requests"][0], dict):
            modes = {name: p.get("mode", "?") for name, p in (run.get("pods") or {}).items()}
            run["requests"] = rows(run["requests"], modes)
            run["requests_columns"] = COLUMNS
    return data


if __name__ == "__main__":
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        data = compact(json.load(f))
    with open(dst, "w") as f:
        json.dump(data, f, separators=(",", ":"))

"""The prompt set: built-in coding and agentic prompts (what the seed benchmark used), or a user's file."""

from __future__ import annotations

import json
from pathlib import Path

BUILTIN_PROMPTS: tuple[str, ...] = (
    "Write a Python function that parses an ISO 8601 duration like 'P3DT4H12M' into a timedelta, with tests.",
    "Refactor this loop into a list comprehension and explain the trade-offs: for x in xs: if x % 2: ys.append(x*x)",
    "Implement an LRU cache in Go with Get and Put in O(1), and write a table-driven test for it.",
    "You are a coding agent. The test `test_merge_overlapping` fails with an off-by-one error in `merge_intervals`."
    " Plan your investigation step by step, then propose a patch.",
    "Write a Bash script that finds the 10 largest files under a directory, skipping .git, and prints sizes in MiB.",
    "Explain what this SQL does and rewrite it with a window function: SELECT a.id, (SELECT max(b.t) FROM b"
    " WHERE b.a_id = a.id) FROM a;",
    "Implement a token-bucket rate limiter in TypeScript that is safe to call from concurrent async handlers.",
    "You have tools `read_file(path)`, `grep(pattern)` and `run_tests()`. A user reports that the CLI crashes on"
    " empty input. Describe the tool calls you would make, in order, and why.",
    "Write a Rust function that merges two sorted vectors into one sorted vector without extra allocation beyond"
    " the output, with property tests.",
    "Convert this callback-based Node.js code to async/await and handle errors properly:"
    " fs.readFile(p, (e, d) => { if (e) throw e; parse(d, (e2, r) => cb(r)); });",
    "Design a Kubernetes readiness probe for a service that needs 8 minutes to load a model; justify each field.",
    "Write a Python asyncio producer/consumer with a bounded queue, graceful shutdown on SIGTERM, and a test.",
    "Review this diff for bugs and style issues and list them by severity: `- if x == None:` `+ if x is None:`"
    " `- except: pass` `+ except ValueError: log.warning(...)`.",
    "Implement binary search over a rotated sorted array in Java and explain the invariant you maintain.",
    "You are an agent fixing a flaky CI job. The job times out 1 run in 20 on `test_upload`. List hypotheses,"
    " the evidence that would confirm each, and the fix you would try first.",
    "Write a Dockerfile for a Python web app with a multi-stage build, a non-root user and a health check.",
    "Write a C function that reverses the words of a string in place, and list the edge cases you test.",
    "Generate a JSON schema for a config file with fields name (string), replicas (int >= 1) and tags (string"
    " list), then a Python validator using it.",
    "Explain the difference between optimistic and pessimistic locking, with a PostgreSQL example of each.",
    "Write a GitHub Actions workflow that runs ruff, mypy and pytest on Python 3.11 and 3.12 with caching.",
    "As a coding agent, you must add pagination to a REST endpoint `/items`. Write the plan, the code change in"
    " FastAPI, and the tests.",
    "Implement Dijkstra's algorithm in Python with a heap, returning both distances and the shortest-path tree.",
    "Write a regular expression that matches semantic versions (with pre-release and build metadata) and tests.",
    "Profile-guided question: a Python service spends 40% of CPU in json.dumps. Suggest three fixes and their risks.",
)


class PromptFileError(ValueError):
    pass


def load_prompts(path: str | None) -> list[str]:
    """Built-in prompts, or a file: a JSON list of strings, JSON lines with a "prompt" field, or plain text with
    one prompt per line."""
    if path is None:
        return list(BUILTIN_PROMPTS)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptFileError(f"{path}: cannot read the prompt file ({exc.strerror or exc})") from exc
    stripped = text.strip()
    prompts: list[str] = []
    if stripped.startswith("["):
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise PromptFileError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
        if not isinstance(doc, list) or not all(isinstance(p, str) for p in doc):
            raise PromptFileError(f"{path}: a JSON prompt file must be a list of strings")
        prompts = [p for p in doc if p.strip()]
    else:
        for number, raw_line in enumerate(stripped.splitlines(), 1):
            line = raw_line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise PromptFileError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
                if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str):
                    raise PromptFileError(f'{path}:{number}: a JSON line needs a "prompt" string')
                prompts.append(obj["prompt"])
            else:
                prompts.append(line)
    if not prompts:
        raise PromptFileError(f"{path}: no prompts found (one per line, or a JSON list of strings)")
    return prompts

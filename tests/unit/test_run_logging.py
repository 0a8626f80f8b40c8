"""`specserve run --log-format json`: the operator's logs as one JSON object a line, for log aggregation."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from specserve import cli


@pytest.fixture(autouse=True)
def root_logger() -> Iterator[None]:
    """kopf.configure replaces the root logger's handler: put back what the test found."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_logs_are_one_object_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--log-format", "json", "--max-concurrent-reconciles", "0"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line parses
    error = next(r for r in records if r.get("severity") == "error")
    assert "max_concurrent_reconciles must be at least 1" in error["message"]
    assert "timestamp" in error


def test_text_logs_stay_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--max-concurrent-reconciles", "0"]) == 2
    err = capsys.readouterr().err
    assert "max_concurrent_reconciles must be at least 1" in err and not err.lstrip().startswith("{")

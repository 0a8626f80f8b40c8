"""Shared test helpers: paths and loaders for the repository's own files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture()
def kimi_doc() -> dict[str, Any]:
    doc: dict[str, Any] = load_yaml(ROOT / "examples" / "kimi-k25-rtxpro6000.yaml")
    return doc

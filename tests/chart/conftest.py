"""Markers for the delivery tests (tests/chart)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "sglang_wheel: downloads the pinned sglang wheel from PyPI (cached in .cache/) to check images/sglang/patches",
    )

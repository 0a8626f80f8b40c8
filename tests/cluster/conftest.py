"""Fixtures of the cluster tier: one real control plane per test session (tests/cluster/controlplane.py), the CRDs
and the chart installed, and the operator run as the chart runs it.

The test command (scripts/test.sh) builds the binaries (scripts/kube-binaries.sh, cached) and sets
SPECSERVE_CLUSTER=1: then binaries that cannot be had are a failure, not a skip. A plain `pytest` without the
variable skips the tier with that reason (a cold build takes half an hour)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.controlplane import ControlPlane, find


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if os.environ.get("SPECSERVE_CLUSTER") != "1":
        pytest.skip("the real control plane tier is opt-in: SPECSERVE_CLUSTER=1 (after bash scripts/kube-binaries.sh)")
    assets = find()
    if isinstance(assets, str):
        pytest.fail(f"SPECSERVE_CLUSTER=1 but no real control plane: {assets}")
    cp = ControlPlane(assets, Path(tmp_path_factory.mktemp("control-plane")))
    try:
        cp.start()
        cp.install_crds()
        cp.install_chart()
        yield cp
    finally:
        cp.stop()

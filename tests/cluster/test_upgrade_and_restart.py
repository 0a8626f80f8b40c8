"""Faults and upgrades only a real control plane shows: kube-apiserver restarted under the operator (its watches end
and it relists), and the CRD upgraded from the previous release (every SpecServe reads differently at once).

Runs after test_cluster.py (files run in name order): it stops that module's operators and runs its own, with a Lease
long enough to outlive the API server's restart (the leader stops acting when it cannot renew: right in production,
where its pod restarts, but nothing restarts it here)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.controlplane import ROOT, ControlPlane, wait_for
from tests.cluster.test_cluster import (
    JSON,
    RESYNC,
    SPECSERVE,
    deployments,
    example,
    holder,
    namespace,
    quiet,
    specserve,
    wait_ready,
    writes_in,
)

POD = "pod-r"
PREVIOUS_RELEASE = "28727d8"  # the release before the CRD gained defaulted fields (spec.switching.weightChangeCost)


@pytest.fixture(scope="module")
def operator(plane: ControlPlane) -> Iterator[ControlPlane]:
    for name in [n for n in plane.procs if n.startswith("operator-")]:
        plane.stop_process(name)
    plane.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": "llm-serving"}, "value": 1000})  # fmt: skip
    plane.run_operator(POD, f"--resync-seconds={RESYNC}", "--full-resync-every=1", "--lease-seconds=120")
    wait_for(lambda: holder(plane) == POD, 120, f"{POD} holding the Lease", interval=1)
    yield plane


def alive(plane: ControlPlane) -> None:
    proc = plane.procs[f"operator-{POD}"]
    assert proc.poll() is None, f"the operator exited with {proc.returncode}:\n{plane.log_tail(f'operator-{POD}', 60)}"


def templates(plane: ControlPlane, ns: str) -> dict[str, JSON]:
    return {n: d["spec"]["template"] for n, d in deployments(plane, ns).items()}


def test_after_an_api_server_restart_the_operator_relists_writes_nothing_new_and_still_reconciles(
    operator: ControlPlane,
) -> None:
    plane = operator
    ns = namespace(plane, "restart")
    doc = example("llama31-8b-h100.yaml", ns)
    plane.apply(doc)
    name = doc["metadata"]["name"]
    wait_ready(plane, ns, name)
    assert quiet(plane, ns, 3 * RESYNC) == []
    before = templates(plane, ns)

    start = plane.audit_count()
    plane.restart("kube-apiserver", down=5)  # every watch breaks; the new server's watch cache starts afresh
    # The relist replays every object as new: nothing to re-apply for objects that did not change. What failed to be
    # written while the server was down (a status report, its Event) goes out once it is back.
    time.sleep(6 * RESYNC)
    relisted = writes_in(plane, ns, start)
    owned = [w for w in relisted if not w.split()[1].startswith(("specserves/", "events/"))]
    assert owned == [], f"the relist after the restart re-applied: {relisted}"
    # At most: each of the two status writers (the reconcile, the switching loop) reports the failed read and then
    # clears it, and a report may post its Warning Event; whether a pass falls into the 5 s outage is timing.
    statuses = [w for w in relisted if w.split()[1].startswith("specserves/")]
    events = [w for w in relisted if w.split()[1].startswith("events/")]
    assert len(statuses) <= 4 and len(events) <= 2, relisted
    assert quiet(plane, ns, 3 * RESYNC) == []
    alive(plane)
    assert holder(plane) == POD

    doc["spec"]["engine"]["memFractionStatic"] = 0.77
    plane.apply(doc)
    wait_for(lambda: all(t != before[n] for n, t in templates(plane, ns).items()), 180,
             "the spec change reaching every Deployment", interval=1)  # fmt: skip
    wait_ready(plane, ns, name, timeout=240)
    assert quiet(plane, ns, 3 * RESYNC) == []
    alive(plane)
    # One roll, not one per watch that restarted: each Deployment's spec was applied for this change once.
    applied = [w for w in writes_in(plane, ns, start) if w.startswith("patch deployments/")]
    assert sorted(applied) == sorted(f"patch deployments/{n}/ 200" for n in before), writes_in(plane, ns, start)


def crd_has(plane: ControlPlane, field: str) -> bool:
    return field in plane.kubectl("get", "crd", SPECSERVE, "-o", "json").stdout


def test_a_crd_upgrade_that_adds_a_defaulted_field_causes_no_update_storm(operator: ControlPlane) -> None:
    """The previous release's CRD (a copy in data/), SpecServes settled under it, then the current CRD: its new
    default (spec.switching.weightChangeCost) makes every SpecServe read differently at once, with no resourceVersion
    change; the operator's writes over the next resync rounds are counted from the audit log."""
    plane = operator
    previous = (Path(__file__).parent / "data" / f"specserve-crd-{PREVIOUS_RELEASE}.yaml").read_text(encoding="utf-8")
    # Replaced whole, as `helm upgrade` does (a server-side apply by another manager would keep the chart's fields).
    plane.kubectl("replace", "-f", "-", input=previous)
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{SPECSERVE}")
    wait_for(lambda: not crd_has(plane, "weightChangeCost"), 30, "the previous CRD served")
    ns = namespace(plane, "upgrade")
    names = [f"up-{i}" for i in range(3)]
    for name in names:
        doc = example("llama31-8b-h200.yaml", ns)
        doc["metadata"]["name"] = name
        plane.apply(doc)
    for name in names:
        wait_ready(plane, ns, name)
        assert "weightChangeCost" not in specserve(plane, ns, name)["spec"].get("switching", {})
    assert quiet(plane, ns, 3 * RESYNC) == [], "no steady state under the previous CRD"

    start = plane.audit_count()
    plane.kubectl("replace", "-f", str(ROOT / "crds/specserve.io_specserves.yaml"))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{SPECSERVE}")
    wait_for(lambda: all("weightChangeCost" in specserve(plane, ns, n)["spec"]["switching"] for n in names), 60,
             "every SpecServe read with the new default")  # fmt: skip
    time.sleep(8 * RESYNC)  # resync rounds (--full-resync-every=1: each one reads every SpecServe)
    writes = writes_in(plane, ns, start)
    print(f"operator writes in the {8 * RESYNC} s after the CRD upgrade, {len(names)} SpecServes: {writes}")
    alive(plane)
    # Measured: one burst, not a storm. Per SpecServe a metadata patch (kopf records the configuration it handled,
    # which now holds the default), a status patch and an Event; no owned object re-applied, and nothing in the
    # later rounds.
    owned = [w for w in writes if not w.split()[1].startswith(("specserves/", "events/"))]
    assert owned == [], f"the CRD upgrade re-applied owned objects: {writes}"
    for name in names:
        mine = [w for w in writes if w.split()[1].split("/")[1].split(".")[0] == name]
        assert len(mine) <= 3, f"{name}: more than one write of each kind after the CRD upgrade: {writes}"
    assert quiet(plane, ns, 3 * RESYNC) == [], "the operator still writes rounds after the CRD upgrade"

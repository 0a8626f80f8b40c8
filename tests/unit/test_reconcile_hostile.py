"""A running SpecServe edited into hostile input the API server cannot refuse keeps serving its last good spec:
the reconcile applies nothing, says Degraded=InvalidSpec naming the field, and the pools stay as they were."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from specserve.api.install_policy import InstallPolicy
from specserve.reconcile import reconcile
from tests.unit.fakekube import FakeKube
from tests.unit.test_api import MINIMAL, with_
from tests.unit.test_api_hostile import ZIGZAG_BASE, ZIGZAG_SPEC
from tests.unit.test_reconcile import body, cond, serving

JSON = dict[str, Any]
OWN = InstallPolicy(prometheus_urls=("http://prometheus.monitoring:9090",))


def with_annotations(raw: JSON, annotations: dict[str, str]) -> JSON:
    out = copy.deepcopy(raw)
    out["metadata"]["annotations"] = annotations
    return out


@pytest.mark.parametrize(
    ("edit", "annotations", "field"),
    [
        (with_({"switching.metrics": {"prometheusUrl": "http://169.254.169.254/latest"}}), {}, "prometheusUrl"),
        (with_({"switching.curves": {"speculative": ZIGZAG_SPEC, "baseline": ZIGZAG_BASE}}), {}, "switching.curves"),
        (MINIMAL, {"specserve.io/paused": "yes"}, 'annotations["specserve.io/paused"]'),
    ],
    ids=["metadata-url", "zigzag-curves", "paused-yes"],
)
async def test_an_edit_into_hostile_input_keeps_the_last_good_spec_serving(
    edit: JSON, annotations: dict[str, str], field: str
) -> None:
    kube = FakeKube()
    await serving(kube, MINIMAL)
    before = copy.deepcopy(kube.objects)
    assert cond(kube, "Ready")["status"] == "True"
    edited = with_annotations(body(edit, generation=2, status=kube.status), annotations)
    outcome = await reconcile(kube, edited, install=OWN)
    assert outcome.invalid is not None and field in outcome.invalid
    assert outcome.applied == () and outcome.pruned == ()
    assert kube.objects == before  # nothing applied, nothing pruned: the pools serve on
    degraded = cond(kube, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec")
    assert field in degraded["message"]

"""Drift detection against what a real API server stores: removals re-apply; normalisation is no drift."""

from __future__ import annotations

import copy
from typing import Any

from specserve.api.validation import parse_object
from specserve.kube.drift import APPLIED_HASH, contains, intent_hash, needs_apply, with_applied_hash
from specserve.render import render
from tests.unit import server_objects
from tests.unit.test_api import MINIMAL, with_

JSON = dict[str, Any]
DESIRED = {"spec": {"replicas": 1, "template": {"args": ["--a", "1"], "enabled": True}}}


def rendered(spec: JSON) -> dict[str, JSON]:
    obj = parse_object(
        {
            "apiVersion": "specserve.io/v1alpha1",
            "kind": "SpecServe",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u1", "generation": 1},
            "spec": spec,
        }
    )
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in render(obj)}


# A spec that exercises omitempty values: readOnly false, empty env value, quantities the server rewrites.
RICH = with_(
    {
        "model.cache": {"pvcName": "weights", "readOnly": False},
        "engine.env": [{"name": "EMPTY", "value": ""}, {"name": "NCCL_DEBUG", "value": "WARN"}],
        "engine.resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {"memory": "1.5Gi"}},
        "placement.nodeSelector": {"pool": "gpu", "zone": "a"},
        "placement.priorityClassName": "llm",
        "placement.tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
)


def test_a_server_normalised_object_is_no_drift() -> None:
    for key, manifest in rendered(RICH).items():
        live = server_objects.stored(with_applied_hash(manifest))
        assert not needs_apply(live, manifest), key


def test_every_removal_from_the_intent_re_applies() -> None:
    before = rendered(RICH)["Deployment/m-spec"]
    live = server_objects.stored(with_applied_hash(before))
    removals: dict[str, JSON] = {
        "a nodeSelector entry": {"placement.nodeSelector": {"pool": "gpu"}},
        "priorityClassName": {"placement.priorityClassName": None},
        "a limit": {"engine.resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}}},
        "a toleration field": {"placement.tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
    }
    for what, patch in removals.items():
        spec = with_(patch, RICH)
        if spec["placement"].get("priorityClassName") is None:
            spec["placement"].pop("priorityClassName", None)
        after = rendered(spec)["Deployment/m-spec"]
        assert contains(live, after), f"{what}: a subset check alone would never see it"
        assert needs_apply(live, after), what


def test_list_items_without_kind_are_no_drift() -> None:
    manifest = rendered(MINIMAL)["Deployment/m-spec"]
    live = server_objects.stored(with_applied_hash(manifest))
    del live["apiVersion"], live["kind"]  # items of a LIST response from a real server
    assert not needs_apply(live, manifest)


def test_foreign_edits_of_our_fields_are_drift() -> None:
    manifest = rendered(MINIMAL)["Deployment/m-spec"]
    live = server_objects.stored(with_applied_hash(manifest))
    edited = copy.deepcopy(live)
    edited["spec"]["replicas"] = 7
    assert needs_apply(edited, manifest)
    dropped = copy.deepcopy(live)
    del dropped["spec"]["template"]["spec"]["tolerations"]
    assert needs_apply(dropped, manifest)
    unannotated = copy.deepcopy(live)
    del unannotated["metadata"]["annotations"][APPLIED_HASH]
    assert needs_apply(unannotated, manifest)  # applied by an older operator version: send the full intent once
    assert needs_apply(None, manifest)


def test_the_hash_ignores_itself_and_tracks_everything_else() -> None:
    manifest = rendered(MINIMAL)["Service/m-spec"]
    assert intent_hash(with_applied_hash(manifest)) == intent_hash(manifest)
    other = copy.deepcopy(manifest)
    other["metadata"]["labels"]["x"] = "y"
    assert intent_hash(other) != intent_hash(manifest)


def test_server_additions_are_not_drift() -> None:
    live = {
        "spec": {"replicas": 1, "paused": False, "template": {"args": ["--a", "1"], "enabled": True}},
        "status": {"readyReplicas": 1},
        "metadata": {"managedFields": []},
    }
    assert contains(live, DESIRED)


def test_omitempty_zero_values_match_their_absence() -> None:
    assert contains({}, {"readOnly": False, "value": "", "items": [], "labels": {}, "delay": 0, "x": None})
    assert contains({"env": [{"name": "A"}]}, {"env": [{"name": "A", "value": ""}]})
    assert not contains({}, {"readOnly": True})
    assert not contains({"readOnly": True}, {"readOnly": False})


def test_changed_scalars_lists_and_missing_keys_are_drift() -> None:
    assert not contains({"spec": {"replicas": 2, "template": {"args": ["--a", "1"], "enabled": True}}}, DESIRED)
    assert not contains({"spec": {"replicas": 1, "template": {"args": ["--a"], "enabled": True}}}, DESIRED)
    assert not contains({"spec": {"replicas": 1, "template": {"args": ["--a", "1"]}}}, DESIRED)
    assert not contains({"spec": {"replicas": 1, "template": {"args": ["--a", "1"], "enabled": 1}}}, DESIRED)


def test_numbers_compare_by_value() -> None:
    assert contains({"x": 1.0}, {"x": 1})
    assert not contains({"x": "1"}, {"x": 1})


def test_canonicalized_quantities_are_not_drift() -> None:
    assert contains({"cpu": "500m", "memory": "1Gi"}, {"cpu": "0.5", "memory": "1024Mi"})
    assert not contains({"cpu": "1"}, {"cpu": "0.5"})
    assert not contains({"image": "sglang:0.5.23"}, {"image": "sglang:0.5.9"})


def test_items_a_webhook_adds_to_keyed_pod_lists_are_no_drift() -> None:
    manifest = rendered(MINIMAL)["Deployment/m-spec"]
    live = server_objects.stored(with_applied_hash(manifest))
    pod = live["spec"]["template"]["spec"]
    pod["containers"].append({"name": "istio-proxy", "image": "proxy"})  # a sidecar injector
    pod["containers"][0].setdefault("env", []).append({"name": "INJECTED", "value": "1"})
    pod.setdefault("volumes", []).append({"name": "injected", "emptyDir": {}})
    assert not needs_apply(live, manifest)
    gone = copy.deepcopy(live)
    gone["spec"]["template"]["spec"]["containers"] = gone["spec"]["template"]["spec"]["containers"][1:]
    assert needs_apply(gone, manifest)  # our container removed by someone: drift


def test_atomic_lists_still_compare_whole() -> None:
    assert not contains({"args": ["--a", "1", "--b"]}, {"args": ["--a", "1"]})
    assert not contains({"backendRefs": [{"name": "a"}, {"name": "b"}]}, {"backendRefs": [{"name": "a"}]})

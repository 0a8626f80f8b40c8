"""Drift detection: a live object holds what we apply plus whatever the server and others added."""

from __future__ import annotations

from specserve.kube.drift import contains

DESIRED = {"spec": {"replicas": 1, "template": {"args": ["--a", "1"], "enabled": True}}}


def test_server_additions_are_not_drift() -> None:
    live = {
        "spec": {"replicas": 1, "paused": False, "template": {"args": ["--a", "1"], "enabled": True}},
        "status": {"readyReplicas": 1},
        "metadata": {"managedFields": []},
    }
    assert contains(live, DESIRED)


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

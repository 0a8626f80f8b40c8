"""The API server's Warning headers: parsed as k8s.io/apiserver writes them, logged once per (object, text)."""

from __future__ import annotations

import logging

import pytest

from specserve.kube.apiwarnings import WarningLog, parse, resource
from specserve.telemetry import REGISTRY

PODSECURITY = (
    '299 - "would violate PodSecurity \\"restricted:latest\\": allowPrivilegeEscalation != false '
    '(container \\"engine\\" must set securityContext.allowPrivilegeEscalation=false), '
    'runAsNonRoot != true (pod or container \\"engine\\" must set securityContext.runAsNonRoot=true)"'
)


def test_parse_reads_each_warning_with_its_escapes_and_commas() -> None:
    texts = parse([PODSECURITY, '299 - "apps/v1beta1 Deployment is deprecated"'])
    assert texts == [
        'would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "engine" must '
        'set securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (pod or container "engine" must '
        "set securityContext.runAsNonRoot=true)",
        "apps/v1beta1 Deployment is deprecated",
    ]


def test_parse_reads_warnings_comma_joined_in_one_header_and_skips_what_is_not_one() -> None:
    joined = '299 - "first, with a comma", 299 kube-apiserver "second" "Mon, 01 Jan 2026 00:00:00 GMT"'
    assert parse([joined]) == ["first, with a comma", "second"]
    assert parse(["", "garbage", "299 - unquoted"]) == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/apis/apps/v1/namespaces/llm/deployments/web", "deployments"),
        ("/apis/specserve.io/v1alpha1/namespaces/llm/specserves/x/status", "specserves/status"),
        ("/api/v1/namespaces/llm/events", "events"),
        ("/api/v1/namespaces/llm", "namespaces"),
        ("/api/v1/nodes/n1", "nodes"),
        ("/apis/coordination.k8s.io/v1/namespaces/s/leases/specserve?x=1", "leases"),
        ("/", "unknown"),
    ],
)
def test_resource_is_a_bounded_label(path: str, expected: str) -> None:
    assert resource(path) == expected


def count(verb: str, res: str) -> float:
    return REGISTRY.get_sample_value("specserve_api_warnings_total", {"verb": verb, "resource": res}) or 0.0


def test_each_warning_is_logged_once_per_object_and_counted_every_time(caplog: pytest.LogCaptureFixture) -> None:
    warned = WarningLog()
    before = count("PATCH", "deployments")
    a, b = "/apis/apps/v1/namespaces/llm/deployments/a", "/apis/apps/v1/namespaces/llm/deployments/b"
    with caplog.at_level(logging.WARNING, logger="specserve.kube.client"):
        for _ in range(3):
            warned.record("PATCH", a, ["would violate PodSecurity", "deprecated"])
        warned.record("PATCH", b, ["would violate PodSecurity"])
    logged = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert logged == [
        (logging.WARNING, f"the API server warns on PATCH {a}: would violate PodSecurity"),
        (logging.WARNING, f"the API server warns on PATCH {a}: deprecated"),
        (logging.WARNING, f"the API server warns on PATCH {b}: would violate PodSecurity"),
    ]
    assert count("PATCH", "deployments") - before == 7


def test_the_memory_is_bounded_and_forgets_the_oldest() -> None:
    warned = WarningLog(memory=2)
    assert warned.first("a", "t") and warned.first("b", "t")
    assert not warned.first("a", "t")  # seen again: now the newest
    assert warned.first("c", "t")  # forgets b, the oldest
    assert warned.first("b", "t")
    assert not warned.first("c", "t")

"""What a pass did, reported: counted in the metrics, logged, and its warnings posted as Events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from specserve import telemetry
from specserve.api import reasons
from specserve.dispatch.operator_kube import OperatorKube
from specserve.kube.kinds import Ref
from specserve.reconcile import Outcome


def record(body: Mapping[str, Any], outcome: Outcome) -> None:
    meta = body.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    telemetry.RECONCILES.labels(ns, name, "invalid" if outcome.invalid else "ok").inc()
    for ref in outcome.applied:
        telemetry.APPLIES.labels(ns, name, Ref(ref).kind).inc()
    for ref in outcome.pruned:
        telemetry.PRUNES.labels(ns, name, Ref(ref).kind).inc()
    # The status-derived gauges are computed at scrape time from the cache (telemetry.SpecServeCollector).


async def warn(kube: OperatorKube, body: Mapping[str, Any], reason: str, message: str) -> None:
    # Through our own client: its writes are fenced by the leader Lease (kopf's poster is not), and it works
    # outside a kopf handler too (a reconcile the switching loop triggered has no kopf event queue).
    await kube.post_event(dict(body), reason=reason, message=message, type_="Warning")


async def report(kube: OperatorKube, body: Mapping[str, Any], outcome: Outcome, logger: kopf.Logger) -> None:
    """The metrics, the log lines and the Warning events of one pass over `body` (the body it reconciled)."""
    record(body, outcome)
    if outcome.newly_invalid and outcome.invalid:
        await warn(kube, body, reasons.INVALID_SPEC, outcome.invalid)
        logger.warning("spec rejected, nothing changed: %s", outcome.invalid)
    for reason, message in outcome.warnings:  # e.g. DowntimeAhead, posted before the next pass acts
        await warn(kube, body, reason, message)
        logger.warning("%s: %s", reason, message)
    for ref in outcome.applied:
        logger.info("applied %s", ref)
    for ref in outcome.pruned:
        logger.info("pruned %s", ref)

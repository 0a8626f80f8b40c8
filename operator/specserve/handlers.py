"""kopf wiring: every event and the resync timer call the same reconcile. Nothing else lives here."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import kopf

from specserve import telemetry
from specserve.api.models import GROUP, PLURAL, VERSION, ConditionStatus
from specserve.config import OperatorConfig
from specserve.reconcile import Kube, Outcome, reconcile
from specserve.status import READY


def _plain(body: Mapping[str, Any]) -> dict[str, Any]:
    # kopf hands out read-only views; the API models want plain data.
    data: dict[str, Any] = json.loads(json.dumps(dict(body), default=dict))
    return data


def _record(body: Mapping[str, Any], outcome: Outcome) -> None:
    meta = body.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "")
    telemetry.RECONCILES.labels(ns, name, "invalid" if outcome.invalid else "ok").inc()
    for ref in outcome.applied:
        telemetry.APPLIES.labels(ns, name, ref.split("/")[0]).inc()
    for ref in outcome.pruned:
        telemetry.PRUNES.labels(ns, name, ref.split("/")[0]).inc()
    if outcome.status is not None:
        ready = any(c.type == READY and c.status == ConditionStatus.TRUE for c in outcome.status.conditions)
        telemetry.READY.labels(ns, name).set(1 if ready else 0)
        if outcome.status.weights is not None:
            telemetry.SPECULATIVE_WEIGHT.labels(ns, name).set(outcome.status.weights.speculative)


def register(registry: kopf.OperatorRegistry, config: OperatorConfig) -> None:
    resource = (GROUP, VERSION, PLURAL)

    async def run_once(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger) -> None:
        kube: Kube = memo["kube"]
        # One reconcile per object at a time: the resync timer and change handlers may fire together.
        lock: asyncio.Lock = memo.setdefault("lock", asyncio.Lock())
        async with lock:
            plain = _plain(body)
            outcome = await reconcile(kube, plain, last_write=memo.get("last_write"))
            if outcome.write is not None:
                memo["last_write"] = outcome.write
        _record(plain, outcome)
        if outcome.newly_invalid and outcome.invalid:
            kopf.warn(body, reason="InvalidSpec", message=outcome.invalid)
            logger.warning("spec rejected, nothing changed: %s", outcome.invalid)
        for ref in outcome.applied:
            logger.info("applied %s", ref)
        for ref in outcome.pruned:
            logger.info("pruned %s", ref)

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # The same credentials as specserve.kube.client: in-cluster service account or kubeconfig.
        info: kopf.ConnectionInfo | None = kopf.login_via_client(**kwargs)
        return info

    @kopf.on.resume(*resource, registry=registry)
    @kopf.on.create(*resource, registry=registry)
    @kopf.on.update(*resource, field="spec", registry=registry)
    async def on_change(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
        await run_once(body, memo, logger)

    @kopf.timer(*resource, interval=config.resync_seconds, initial_delay=config.resync_seconds, registry=registry)
    async def resync(body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
        await run_once(body, memo, logger)

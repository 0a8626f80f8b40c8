"""kopf wiring only: each handler delegates in one line to the Dispatcher (specserve.dispatch), which every change
event, the resync loop and the switching loop share. `register` puts them in a registry, each bound to that
registry's Dispatcher and with Kubernetes API failures mapped to kopf's temporary errors."""

from __future__ import annotations

from functools import partial
from typing import Any

import kopf

from specserve.api.models import GROUP, PLURAL, VERSION
from specserve.config import OperatorConfig
from specserve.dispatch import Dispatcher
from specserve.kopf_errors import kube_errors_are_temporary
from specserve.layout import LABEL_INSTANCE

RESOURCE = (GROUP, VERSION, PLURAL)


def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    # The same credentials as specserve.kube.client: in-cluster service account or kubeconfig.
    info: kopf.ConnectionInfo | None = kopf.login_via_client(**kwargs)
    return info


async def on_resume(ops: Dispatcher, body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    await ops.handle(body, memo, logger, urgent=False)  # every SpecServe at the start: background, like a resync


async def on_change(ops: Dispatcher, body: kopf.Body, memo: kopf.Memo, logger: kopf.Logger, **_: Any) -> None:
    await ops.handle(body, memo, logger)


async def track(ops: Dispatcher, event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
    ops.track(event, body)


async def pool_changed(ops: Dispatcher, event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
    await ops.pool_changed(event, body)


async def start_loops(ops: Dispatcher, memo: kopf.Memo, **_: Any) -> None:
    await ops.start(memo)  # kopf's memo carries the shared objects commands.run injects (client, reconcile slots)


async def stop_loops(ops: Dispatcher, **_: Any) -> None:
    await ops.stop()


def register(registry: kopf.OperatorRegistry, config: OperatorConfig) -> None:
    ops = Dispatcher(config)
    # A KubeError escaping a handler is retried after `delay`, on one log line (specserve.kopf_errors).
    temporary = kube_errors_are_temporary(delay=min(config.resync_seconds, 30.0))
    kopf.on.login(registry=registry)(login)
    kopf.on.resume(*RESOURCE, registry=registry)(temporary(partial(on_resume, ops)))
    changed = temporary(partial(on_change, ops))
    kopf.on.create(*RESOURCE, registry=registry)(changed)
    kopf.on.update(*RESOURCE, field="spec", registry=registry)(changed)
    kopf.on.event(*RESOURCE, registry=registry)(temporary(partial(track, ops)))
    pools = {LABEL_INSTANCE: kopf.PRESENT}
    kopf.on.event("apps", "v1", "deployments", labels=pools, registry=registry)(temporary(partial(pool_changed, ops)))
    kopf.on.startup(registry=registry)(partial(start_loops, ops))
    kopf.on.cleanup(registry=registry)(partial(stop_loops, ops))

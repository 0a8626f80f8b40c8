"""Stuck and failed rolls against the real operator (kopf + reconcile + KubeClient) and specserve_kubefake: the
cause is named in status within one resync with one Warning event, a failed pool is contained (the other pool
never rolls, traffic stays on Ready pools), an HPA scale is no roll, and a mutating webhook causes no perpetual
roll.

The Deployment controller's and the kubelet's words (a Progressing condition, pods with their reasons) are
written straight into the fake's store, as those controllers would write them.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from specserve.config import OperatorConfig
from specserve_kubefake import DEPLOYMENTS, PODS, SPECSERVES, FakeApiServer
from specserve_kubefake import fields as fake_fields
from specserve_kubefake.resources import ResourceType
from tests.integration.kube_emulator import eventually, running_operator
from tests.integration.test_safe_reconcile import (
    NAME,
    NS,
    RESYNC,
    Kubelet,
    background,
    condition,
    edit,
    fake,
    quiet,
    serving,
    status_of,
    weights,
)

__all__ = ["fake"]  # the fixture, used by name
JSON = dict[str, Any]
SPEC, BASE, ENGINE = f"{NAME}-spec", f"{NAME}-base", f"{NAME}-engine"


def pool_status(api: FakeApiServer, name: str) -> JSON:
    obj = api.get(SPECSERVES, NS, NAME) or {}
    return next((p for p in (obj.get("status") or {}).get("pools") or [] if p["name"] == name), {})


def failure(api: FakeApiServer, name: str) -> JSON:
    return pool_status(api, name).get("failure") or {}


def warnings_posted(api: FakeApiServer, reason: str, since: int = 0) -> list[JSON]:
    return [
        r.body
        for r in api.requests[since:]
        if r.method == "POST" and r.plural == "events" and (r.body or {}).get("reason") == reason
    ]


def timeline(api: FakeApiServer, since: int) -> str:
    """The status writes and events since `since`, for a failure message."""
    out = []
    for r in api.requests[since:]:
        if r.plural == "events" and r.method == "POST":
            out.append(f"event {(r.body or {}).get('reason')}")
        elif r.plural == "specserves" and r.method == "PATCH":
            pools = ((r.body or {}).get("status") or {}).get("pools")
            failures = [(p["name"], (p.get("failure") or {}).get("reason")) for p in pools or []]
            out.append(f"PATCH {r.subresource} {r.headers.get('User-Agent', '')[:20]} pools={failures}")
    return "\n".join(out)


def args(api: FakeApiServer, name: str) -> list[str]:
    d = api.get(DEPLOYMENTS, NS, name) or {}
    return list(d["spec"]["template"]["spec"]["containers"][0]["args"])


def mem_fraction(api: FakeApiServer, name: str) -> str:
    a = args(api, name)
    return a[a.index("--mem-fraction-static") + 1]


def deadline_exceeded(api: FakeApiServer, name: str) -> None:
    """The Deployment controller, progressDeadlineSeconds after the roll stopped progressing."""
    d = api.get(DEPLOYMENTS, NS, name) or {}
    conds = [c for c in (d.get("status") or {}).get("conditions") or [] if c["type"] != "Progressing"]
    conds.append({"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                  "message": f'ReplicaSet "{name}-7d9f" has timed out progressing.',
                  "lastUpdateTime": "2026-12-01T00:00:00Z", "lastTransitionTime": "2026-12-01T00:00:00Z"})  # fmt: skip
    api.patch_status(DEPLOYMENTS, NS, name, {"conditions": conds})


def failing_pod(api: FakeApiServer, deployment: str, pod_status: JSON, index: int = 0) -> None:
    """A pod of the Deployment's current template, as the kubelet (or the scheduler) reports it."""
    d = api.get(DEPLOYMENTS, NS, deployment) or {}
    labels = d["spec"]["template"]["metadata"]["labels"]
    name = f"{deployment}-7d9f-{index}"
    if api.get(PODS, NS, name) is None:
        api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
                    "spec": {"containers": [{"name": "sglang", "image": "sglang"}]}})  # fmt: skip
    api.patch_status(PODS, NS, name, pod_status)


def waiting(reason: str, message: str) -> JSON:
    state = {"waiting": {"reason": reason, "message": message}}
    return {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "sglang", "ready": False, "restartCount": 0, "image": "sglang",
                                   "imageID": "", "state": state}]}  # fmt: skip


def oom_killed() -> JSON:
    return {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "sglang", "ready": False, "restartCount": 3, "image": "sglang",
                                   "imageID": "", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": ""}},
                                   "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}  # fmt: skip


def unschedulable(message: str) -> JSON:
    return {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                "message": message}]}  # fmt: skip


def running(events: bool = False) -> Any:
    """The real operator, in this test's loop; yields its task (a test proves it was still running)."""
    return running_operator(OperatorConfig(namespaces=(NS,), resync_seconds=RESYNC, post_events=events))


async def still_running(task: asyncio.Task[None], check: Callable[[], Any], what: str, timeout: float = 15) -> Any:
    """`eventually`, and the operator had not stopped meanwhile."""
    out = await eventually(check, timeout=timeout, what=what)
    assert not task.done(), "the operator stopped"
    return out


# ------------------------------------------------------------------------------------------ deadlines


async def test_a_restart_whose_pods_never_get_ready_names_the_deadline_once(
    fake: FakeApiServer, kimi_doc: JSON
) -> None:
    restart = copy.deepcopy(kimi_doc)
    restart["spec"]["strategy"] = "Restart"
    kubelet = Kubelet(fake, load_seconds=0.2)
    async with background(kubelet.run()), running(events=True):
        await serving(fake, restart)
        kubelet.hold.add(ENGINE)  # the new pods never get Ready (OOM while capturing CUDA graphs)
        edit(fake, {"engine": {"memFractionStatic": 0.97}})
        await eventually(lambda: mem_fraction(fake, ENGINE) == "0.97", timeout=30, what="the restart")
        await eventually(lambda: pool_status(fake, ENGINE).get("ready") == 0, what="the pool down")
        failing_pod(fake, ENGINE, oom_killed())
        oom = await eventually(lambda: failure(fake, ENGINE).get("reason") == "OOMKilled" and failure(fake, ENGINE),
                               timeout=RESYNC * 4, what="OOMKilled in status")  # fmt: skip
        assert not oom.get("deadlineExceeded")
        start = len(fake.requests)
        began = time.monotonic()
        deadline_exceeded(fake, ENGINE)
        failed = await eventually(
            lambda: failure(fake, ENGINE).get("deadlineExceeded") and failure(fake, ENGINE),
            timeout=RESYNC * 3, what="ProgressDeadlineExceeded in status within one resync",
        )  # fmt: skip
        named = time.monotonic() - began
        assert failed["reason"] == "ProgressDeadlineExceeded"
        assert "timed out" in failed["message"] and "OOMKilled" in failed["message"]  # the pods say why
        progressing = condition(fake, "Progressing") or {}
        assert (progressing.get("status"), progressing.get("reason")) == ("False", "ProgressDeadlineExceeded")
        await asyncio.sleep(RESYNC * 6)  # several resyncs: still one event for this cause
        assert len(warnings_posted(fake, "ProgressDeadlineExceeded", start)) == 1
        assert (condition(fake, "Progressing") or {}).get("reason") == "ProgressDeadlineExceeded"
    print(f"\nProgressDeadlineExceeded named in status {named:.2f} s after the Deployment reported it")


# ------------------------------------------------------------------------------------------ causes, containment


@pytest.mark.parametrize(
    ("pod_status", "reason", "words"),
    [
        (waiting("ImagePullBackOff", 'Back-off pulling image "lmsysorg/sglang:v0.5.23-typo"'), "ImagePullBackOff",
         "v0.5.23-typo"),
        (unschedulable("0/4 nodes are available: 4 Insufficient nvidia.com/gpu."), "Unschedulable",
         "Insufficient nvidia.com/gpu"),
        (oom_killed(), "OOMKilled", "OOMKilled"),
    ],
)  # fmt: skip
async def test_a_stuck_roll_is_named_and_the_other_pool_is_contained(
    fake: FakeApiServer, kimi_doc: JSON, pod_status: JSON, reason: str, words: str
) -> None:
    kubelet = Kubelet(fake, load_seconds=0.2)
    async with background(kubelet.run()), running(events=True) as task:
        await serving(fake, kimi_doc)
        assert weights(fake) == {SPEC: 0, BASE: 100}  # initialMode Baseline
        kubelet.hold.add(SPEC)  # the first pool to roll (it carries no traffic) never comes up
        edit(fake, {"engine": {"memFractionStatic": 0.8}})
        await eventually(lambda: mem_fraction(fake, SPEC) == "0.8", what="the first pool rolled")
        start = len(fake.requests)
        failing_pod(fake, SPEC, pod_status)
        stuck = await still_running(task, lambda: failure(fake, SPEC).get("reason") == reason and failure(fake, SPEC),
                                    timeout=RESYNC * 4, what=f"{reason} in status")  # fmt: skip
        assert words in stuck["message"] and not stuck.get("deadlineExceeded")
        progressing = condition(fake, "Progressing") or {}
        assert (progressing.get("status"), progressing.get("reason")) == ("False", reason)
        for _ in range(int(6 / 0.1)):  # several resyncs: contained
            assert mem_fraction(fake, BASE) == "0.85", "the other pool rolled while one is failed"
            assert weights(fake) == {SPEC: 0, BASE: 100}, "traffic left the Ready pool"
            await asyncio.sleep(RESYNC / 5)
        assert not task.done()
        assert len(warnings_posted(fake, reason, start)) == 1, timeline(fake, start)
        assert failure(fake, BASE) == {}  # the healthy pool reports none
        kubelet.hold.clear()  # the user fixes what was wrong: the roll resumes and the cause goes
        fake.delete(PODS, NS, f"{SPEC}-7d9f-0")
        await still_running(task, lambda: mem_fraction(fake, BASE) == "0.8", timeout=30, what="the second pool")
        await eventually(lambda: status_of(fake, "Progressing") == "False" and failure(fake, SPEC) == {},
                         timeout=30, what="settled")  # fmt: skip


# ------------------------------------------------------------------------------------------ what is not a roll


@dataclass
class ScalingController:
    """Deployment controller + kubelet for replica counts: a new generation is observed at once; `capacity` pods
    per pool can run (the others stay Pending, as with no free GPU)."""

    api: FakeApiServer
    capacity: dict[str, int] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            for d in self.api.list(DEPLOYMENTS, NS):
                name, status = d["metadata"]["name"], d.get("status") or {}
                replicas = int(d["spec"].get("replicas", 1))
                ready = min(replicas, self.capacity.get(name, replicas))
                if status.get("observedGeneration") != d["metadata"]["generation"] or (
                    int(status.get("readyReplicas") or 0) != ready
                ):
                    self.api.set_deployment_ready(NS, name, ready)
            await asyncio.sleep(0.01)


async def test_an_hpa_scale_with_pending_pods_is_no_roll(fake: FakeApiServer, kimi_doc: JSON) -> None:
    doc = copy.deepcopy(kimi_doc)
    doc["spec"]["pools"]["baseline"] = {"autoscaling": "External"}  # an HPA owns the serving pool's count
    controller = ScalingController(fake)
    deployments = fake.store.registry.get(DEPLOYMENTS)
    assert deployments is not None

    def hpa_scales(replicas: int) -> None:  # as the HPA writes it: the scale subresource, its own manager
        fake.store.patch(deployments, NS, BASE, "merge", {"spec": {"replicas": replicas}},
                         manager="kube-controller-manager")  # fmt: skip

    async with background(controller.run()), running() as task:
        await serving(fake, doc)
        hpa_scales(2)
        await eventually(lambda: pool_status(fake, BASE).get("ready") == 2, what="2 Ready")
        await eventually(lambda: status_of(fake, "Progressing") == "False", what="settled")
        seen: list[tuple[Any, ...]] = []
        controller.capacity[BASE] = 2  # no GPU for more
        hpa_scales(4)
        deadline = time.monotonic() + RESYNC * 8
        while time.monotonic() < deadline:
            seen.append((weights(fake)[BASE], status_of(fake, "Ready"), status_of(fake, "Progressing")))
            await asyncio.sleep(0.005)
        assert not task.done()
        assert {w for w, _, _ in seen} == {100}, "the scale drained the pool"
        assert {r for _, r, _ in seen} == {"True"}, "Pending pods of a scale-up made the SpecServe unready"
        assert {p for _, _, p in seen} == {"False"}, "the scale read as a roll (the policy would freeze)"
        base = pool_status(fake, BASE)
        assert (base["desired"], base["ready"]) == (4, 2)
        assert (condition(fake, "BaselinePoolReady") or {}).get("reason") == "Scaling"
    print(f"\nHPA scale 2 -> 4 with 2 Pending: {len(seen)} samples, route, Ready and Progressing unchanged")


# ------------------------------------------------------------------------------------------ mutating webhooks


def webhook(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mutating admission webhook on Deployments: an injected env var, a sidecar and a pod annotation, added to
    every write of the pod template (within the same request, as admission does)."""
    apply = fake_fields.server_side_apply

    def mutated(live: JSON | None, applied: JSON, **kw: Any) -> JSON:
        out = apply(live, applied, **kw)
        if applied.get("kind") != "Deployment":
            return out
        out = copy.deepcopy(out)
        template = out["spec"]["template"]
        template.setdefault("metadata", {}).setdefault("annotations", {})["sidecar.example.com/status"] = "injected"
        containers = template["spec"]["containers"]
        env = containers[0].setdefault("env", [])
        if not any(e.get("name") == "INJECTED_BY_WEBHOOK" for e in env):
            env.append({"name": "INJECTED_BY_WEBHOOK", "value": "1"})
        if not any(c.get("name") == "mesh-proxy" for c in containers):
            containers.append({"name": "mesh-proxy", "image": "proxy:1"})
        return out

    monkeypatch.setattr(fake_fields, "server_side_apply", mutated)


async def test_a_mutating_webhook_causes_no_perpetual_roll(
    fake: FakeApiServer, kimi_doc: JSON, monkeypatch: pytest.MonkeyPatch
) -> None:
    webhook(monkeypatch)
    async with background(Kubelet(fake, load_seconds=0.2).run()), running() as task:
        await serving(fake, kimi_doc)
        pods = [d["spec"]["template"]["spec"]["containers"] for d in fake.list(DEPLOYMENTS, NS)]
        assert all(any(c["name"] == "mesh-proxy" for c in p) for p in pods)  # the webhook did act
        generations = {d["metadata"]["name"]: d["metadata"]["generation"] for d in fake.list(DEPLOYMENTS, NS)}
        await quiet(fake)  # no write every pass
        start = len(fake.requests)
        await asyncio.sleep(RESYNC * 6)
        assert len(fake.requests) > start, "the resync did not run: the window proves nothing"
        assert [f"{w.method} {w.path}" for w in fake.writes_since(start)] == []
        # The steady state reads no pod and no HPA: causes are looked for only while a pool is not complete.
        extra = [r.path for r in fake.requests[start:] if r.plural in ("pods", "horizontalpodautoscalers")]
        assert extra == [], extra
        assert {d["metadata"]["name"]: d["metadata"]["generation"] for d in fake.list(DEPLOYMENTS, NS)} == generations
        assert weights(fake) == {SPEC: 0, BASE: 100} and status_of(fake, "Progressing") == "False"
        # A real change still rolls, pool by pool, through the webhook.
        edit(fake, {"engine": {"memFractionStatic": 0.8}})
        await still_running(task, lambda: mem_fraction(fake, SPEC) == mem_fraction(fake, BASE) == "0.8",
                            timeout=30, what="both pools rolled")  # fmt: skip
        await eventually(lambda: status_of(fake, "Progressing") == "False", timeout=30, what="settled")


# ------------------------------------------------------------------------------------------ other writers


HPAS = "autoscaling/v2/horizontalpodautoscalers"


async def test_an_hpa_fighting_an_operator_sized_pool_is_reported_once(fake: FakeApiServer, kimi_doc: JSON) -> None:
    fake.store.registry.add(
        ResourceType(group="autoscaling", version="v2", plural="horizontalpodautoscalers",
                     kind="HorizontalPodAutoscaler", status_subresource=True, generation=True)
    )  # fmt: skip
    deployments = fake.store.registry.get(DEPLOYMENTS)
    assert deployments is not None

    async def hpa() -> None:  # an HPA that holds its target at 3, as each of its syncs would
        while True:
            d = fake.get(DEPLOYMENTS, NS, BASE) or {}
            if d and d["spec"].get("replicas") != 3:
                fake.store.patch(deployments, NS, BASE, "merge", {"spec": {"replicas": 3}},
                                 manager="kube-controller-manager")  # fmt: skip
            await asyncio.sleep(0.3)

    async with background(Kubelet(fake, load_seconds=0.2).run()), running(events=True) as task:
        await serving(fake, kimi_doc)  # spec.pools.baseline.replicas: 1, the operator's
        start = len(fake.requests)
        fake.create({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                     "metadata": {"name": "base-hpa", "namespace": NS},
                     "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": BASE},
                              "minReplicas": 3, "maxReplicas": 6}})  # fmt: skip
        async with background(hpa()):
            degraded = await still_running(
                task, lambda: (c := condition(fake, "Degraded")) and c["reason"] == "AutoscalerConflict" and c,
                what="AutoscalerConflict",
            )  # fmt: skip
            assert "base-hpa" in degraded["message"] and "External" in degraded["message"]
            await asyncio.sleep(RESYNC * 8)  # the fight goes on: still reported, one event
            assert (condition(fake, "Degraded") or {}).get("reason") == "AutoscalerConflict"
            assert len(warnings_posted(fake, "AutoscalerConflict", start)) == 1
            assert status_of(fake, "Ready") == "True"  # serving all along
        fake.delete(HPAS, NS, "base-hpa")
        await still_running(task, lambda: status_of(fake, "Degraded") == "False", what="the report cleared")


async def test_weights_keep_following_the_target_while_a_pool_is_stuck(fake: FakeApiServer, kimi_doc: JSON) -> None:
    doc = copy.deepcopy(kimi_doc)
    doc["spec"]["pools"]["speculative"] = {"replicas": 2}
    controller = ScalingController(fake)

    def target(speculative: int) -> None:  # the switching loop's decision, as it records it
        fake.patch_status(SPECSERVES, NS, NAME, {"switching": {
            "mode": "Speculative" if speculative >= 50 else "Baseline", "modeSince": "2026-12-01T00:00:00Z",
            "weights": {"speculative": speculative, "baseline": 100 - speculative}}})  # fmt: skip

    async with background(controller.run()), running(events=True) as task:
        await serving(fake, doc)
        controller.capacity[SPEC] = 1  # one speculative pod lost its node and cannot be rescheduled
        await eventually(lambda: pool_status(fake, SPEC).get("ready") == 1, what="1/2 Ready")
        failing_pod(fake, SPEC, unschedulable("0/4 nodes are available: 4 Insufficient nvidia.com/gpu."))
        await still_running(task, lambda: failure(fake, SPEC).get("reason") == "Unschedulable", what="named")
        for speculative in (40, 70):
            target(speculative)
            aim = {SPEC: speculative, BASE: 100 - speculative}
            await still_running(task, lambda: weights(fake) == aim, what=f"the route at {aim}")  # noqa: B023
        assert status_of(fake, "Ready") == "True"  # serving, one pod short


# ------------------------------------------------------------------------------------------ the roll budget


def image(api: FakeApiServer, name: str) -> str:
    d = api.get(DEPLOYMENTS, NS, name) or {}
    return str(d["spec"]["template"]["spec"]["containers"][0]["image"])


async def test_a_stuck_roll_does_not_hold_the_roll_budget_against_its_own_revert(
    fake: FakeApiServer, kimi_doc: JSON
) -> None:
    """Issue 31, 1: --max-concurrent-rolls 1, Restart, 1 replica: a bad image takes the model off the air
    (ImagePullBackOff); the user's revert applies at once (it replaces the stuck roll in the slot it holds), and
    another tenant's change, which waited for that slot, rolls once the revert is Ready."""
    restart = copy.deepcopy(kimi_doc)
    restart["spec"]["strategy"] = "Restart"
    other = copy.deepcopy(restart)  # another tenant, no route
    other["metadata"] = {"name": "other", "namespace": NS}
    other["spec"].pop("routing")
    kubelet = Kubelet(fake, load_seconds=0.2)
    config = OperatorConfig(namespaces=(NS,), resync_seconds=RESYNC, post_events=True, max_concurrent_rolls=1)
    async with background(kubelet.run()), running_operator(config) as task:
        await serving(fake, restart)
        fake.create(other)
        await eventually(lambda: other_progressing(fake) == ("False", None), timeout=30, what="the other tenant")
        good = image(fake, ENGINE)
        kubelet.hold.add(ENGINE)  # the bad image never pulls
        edit(fake, {"engine": {"image": "lmsysorg/sglang:v0.5.23-typo"}})
        await still_running(task, lambda: image(fake, ENGINE).endswith("typo"), timeout=30, what="the bad roll")
        failing_pod(fake, ENGINE, waiting("ImagePullBackOff", 'Back-off pulling image "lmsysorg/sglang:v0.5.23-typo"'))
        await eventually(lambda: failure(fake, ENGINE).get("reason") == "ImagePullBackOff", timeout=RESYNC * 6,
                         what="ImagePullBackOff in status")  # fmt: skip
        # The other tenant's change waits: the stuck roll holds the only slot.
        fake.patch(SPECSERVES, NS, "other", {"spec": {"engine": {"memFractionStatic": 0.8}}})
        await eventually(lambda: other_progressing(fake)[1] == "WaitingForRollSlot", what="the other waits")
        # The user reverts the image: applied within a few resyncs, not held for a second slot.
        kubelet.hold.clear()
        fake.delete(PODS, NS, f"{ENGINE}-7d9f-0")
        began = time.monotonic()
        edit(fake, {"engine": {"image": None}})
        try:
            await still_running(task, lambda: image(fake, ENGINE) == good, timeout=RESYNC * 20, what="the revert")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; Progressing: {condition(fake, 'Progressing')}") from None
        reverted = time.monotonic() - began
        await eventually(lambda: status_of(fake, "Ready") == "True", timeout=30, what="back on the air")
        # The slot is free: the other tenant's change rolls.
        await still_running(task, lambda: mem_fraction(fake, "other-engine") == "0.8",
                            timeout=60, what="the other tenant's change rolled")  # fmt: skip
    print(f"\nthe revert applied {reverted:.2f} s after the edit, under --max-concurrent-rolls 1")


def other_progressing(api: FakeApiServer) -> tuple[str | None, str | None]:
    obj = api.get(SPECSERVES, NS, "other") or {}
    c = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Progressing"), None)
    return (None, None) if c is None else (c.get("status"), c.get("reason") if c.get("status") == "True" else None)

"""The real operator against the fake API server: no finalizer, deletion while down, the Lease, bounded I/O."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest

from specserve.commands.supervisor import serve
from specserve.config import FINALIZER, LeaderElection, OperatorConfig
from specserve.kube.client import ClientOptions, KubeClient
from specserve.kube.rbac import REQUIRED_RULES, allows
from specserve_kubefake import EVENTS, LEASES, NAMESPACES, SPECSERVES, FakeApiServer, RecordedRequest, write_kubeconfig
from tests.integration.kube_emulator import eventually, running_operator

NS = "llm"
T = TypeVar("T")
RESYNC = 0.4


class ThreadedFake:
    """The fake API server on its own thread and loop: kopf's shutdown cancels every task it finds in its loop,
    and would cancel the server's too (in a cluster the API server is elsewhere). Calls run on the server's loop.
    `options` go to FakeApiServer (auto_ready defaults to True here)."""

    def __init__(self, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kubefake", daemon=True)
        self._thread.start()
        self.api = FakeApiServer(**{"auto_ready": True, **options})
        self.url = self._run(self.api.start())

    def stamped(self) -> list[tuple[float, RecordedRequest]]:
        """Every request so far with its arrival time."""
        return self.call(lambda: [(r.started, r) for r in self.api.requests])

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        async def run() -> T:
            return fn(*args)

        return self._run(run())

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.call(self.api.get, resource, namespace, name)

    def create(self, obj: dict[str, Any]) -> None:
        self.call(self.api.create, obj)

    def patch(self, resource: str, namespace: str | None, name: str, patch: dict[str, Any]) -> None:
        self.call(self.api.patch, resource, namespace, name, patch)

    def delete(self, resource: str, namespace: str | None, name: str) -> None:
        self.call(self.api.delete, resource, namespace, name)

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.call(lambda: list(self.api.requests))

    def add_fault(self, **rule: Any) -> None:
        self.call(lambda: self.api.faults.add(**rule))

    def close(self) -> None:
        self._run(self.api.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


@contextlib.contextmanager
def threaded_fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> Iterator[ThreadedFake]:
    """A ThreadedFake with the test namespaces, and KUBECONFIG pointing at it (for our client and kopf's login)."""
    api = ThreadedFake(**options)
    try:
        for ns in (NS, "specserve-system"):
            api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, api.url)
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        # kopf logs in through the client library, which read KUBECONFIG when it was imported.
        monkeypatch.setattr("kubernetes.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
        yield api
    finally:
        api.close()


@pytest.fixture()
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadedFake]:
    with threaded_fake(tmp_path, monkeypatch) as api:
        yield api


def seeded(doc: dict[str, Any], name: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    body = copy.deepcopy(doc)
    body["metadata"] = {"name": name, "namespace": NS, **({"finalizers": finalizers} if finalizers else {})}
    return body


def converged(api: ThreadedFake, name: str) -> bool:
    obj = api.get(SPECSERVES, NS, name)
    return bool(obj and (obj.get("status") or {}).get("observedGeneration") == obj["metadata"]["generation"])


async def create_converged(api: ThreadedFake, doc: dict[str, Any], *names: str) -> None:
    """SpecServes `names` created from `doc`, once the running operator has reconciled each one."""
    for name in names:
        api.create(seeded(doc, name))
    await eventually(lambda: all(converged(api, n) for n in names), what=f"{' and '.join(names)} reconciled")


def delete_unheld(api: ThreadedFake, name: str) -> None:
    """Deletes SpecServe `name`: no finalizer holds it, so it is gone at once."""
    api.delete(SPECSERVES, NS, name)
    assert api.get(SPECSERVES, NS, name) is None


def about(request: RecordedRequest, name: str) -> bool:
    """A request for the SpecServe `name` or its children (by name or by its instance label)."""
    selector = request.query.get("labelSelector", "")
    return bool(request.name and request.name.startswith(name)) or f"={name}" in selector


def config(**overrides: Any) -> OperatorConfig:
    return OperatorConfig(**{"namespaces": (NS,), "resync_seconds": RESYNC, "post_events": False, **overrides})


async def test_no_finalizer_is_added_and_an_old_one_is_removed(fake: ThreadedFake, kimi_doc: dict[str, Any]) -> None:
    fake.create(seeded(kimi_doc, "old", finalizers=[FINALIZER]))  # as an older operator version left it
    async with running_operator(config()):
        fake.create(seeded(kimi_doc, "new"))
        await eventually(lambda: converged(fake, "old") and converged(fake, "new"), what="both reconciled")
        await eventually(
            lambda: (
                not (fake.get(SPECSERVES, NS, "old") or {"metadata": {"finalizers": [1]}})["metadata"].get("finalizers")
            ),
            what="the old finalizer removed",
        )
        await asyncio.sleep(RESYNC * 3)  # several resyncs later still none
        for name in ("old", "new"):
            obj = fake.get(SPECSERVES, NS, name)
            assert obj is not None and not obj["metadata"].get("finalizers"), name


async def test_deletion_while_running_stops_the_resync_of_that_object(
    fake: ThreadedFake, kimi_doc: dict[str, Any]
) -> None:
    async with running_operator(config()):
        await create_converged(fake, kimi_doc, "gone", "kept")
        delete_unheld(fake, "gone")
        await asyncio.sleep(RESYNC * 3)  # in-flight reconciles end; the DELETED event reaches the operator
        start = len(fake.requests)
        await asyncio.sleep(RESYNC * 5)
        about_gone = [str(r) for r in fake.requests[start:] if about(r, "gone")]
        about_kept = [r for r in fake.requests[start:] if about(r, "kept")]
        assert about_gone == []  # its timer stopped: not even a read
        assert about_kept  # the other SpecServe's resync goes on


async def test_specserves_and_their_namespace_delete_while_the_operator_is_down(
    fake: ThreadedFake, kimi_doc: dict[str, Any]
) -> None:
    async with running_operator(config()):
        await create_converged(fake, kimi_doc, "a", "b")
    delete_unheld(fake, "a")
    fake.delete(NAMESPACES, None, NS)
    await eventually(lambda: fake.get(SPECSERVES, NS, "b") is None, what="the namespace's SpecServe to go")
    await eventually(lambda: fake.get(NAMESPACES, None, NS) is None, what="the namespace to go")


def lease_config(identity: str, liveness: str | None = None) -> OperatorConfig:
    return config(
        liveness_endpoint=liveness,
        leader_election=LeaderElection(
            namespace="specserve-system",
            identity=identity,
            lease_seconds=2,
            renew_deadline_seconds=1.4,
            retry_seconds=0.2,
        ),
    )


async def test_the_operator_acts_only_while_it_holds_the_lease(fake: ThreadedFake, kimi_doc: dict[str, Any]) -> None:
    fake.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "specserve-operator", "namespace": "specserve-system"},
            "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600},
        }
    )
    fake.create(seeded(kimi_doc, "kimi"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    liveness = f"http://127.0.0.1:{port}/healthz"
    async with running_operator(lease_config("pod-a", liveness)) as task, aiohttp.ClientSession() as http:
        await asyncio.sleep(1.5)
        assert not converged(fake, "kimi") and not task.done()  # standing by: nothing reconciled
        async with http.get(liveness) as response:
            assert response.status == 200  # a standby is alive: the kubelet must not restart it
        assert [r for r in fake.requests if r.resource == SPECSERVES] == []  # not even watched
        lease = fake.get(LEASES, "specserve-system", "specserve-operator")
        assert lease is not None
        fake.patch(LEASES, "specserve-system", "specserve-operator", {"spec": {"holderIdentity": ""}})  # released
        await eventually(lambda: converged(fake, "kimi"), what="the new leader's reconcile")
        held = fake.get(LEASES, "specserve-system", "specserve-operator")
        assert held is not None and held["spec"]["holderIdentity"] == "pod-a"
        async with http.get(liveness) as response:
            assert response.status == 200  # now kopf's own probe, on the same port
    released = fake.get(LEASES, "specserve-system", "specserve-operator")
    assert released is not None and not released["spec"].get("holderIdentity")  # handed over on a clean stop
    lease_calls = {r.verb for r in fake.requests if r.resource == LEASES}
    assert lease_calls == {"get", "update"}  # the Lease existed: read, taken over and renewed by PUT, released
    uncovered = {
        (r.group, r.plural, r.subresource, r.verb)
        for r in fake.requests
        if r.resource is not None
        and not allows(REQUIRED_RULES, r.group, r.plural + (f"/{r.subresource}" if r.subresource else ""), r.verb)
    }
    assert uncovered == set()  # specserve.kube.rbac (and so the chart) grants every call, the Lease's included


async def test_losing_the_lease_stops_the_operator_with_an_error(fake: ThreadedFake, kimi_doc: dict[str, Any]) -> None:
    from specserve.commands.supervisor import LeadershipLostError  # noqa: PLC0415

    fake.create(seeded(kimi_doc, "kimi"))
    async with running_operator(lease_config("pod-a")) as task:
        await eventually(lambda: converged(fake, "kimi"), what="reconciled as leader")
        fake.patch(LEASES, "specserve-system", "specserve-operator", {"spec": {"holderIdentity": "pod-b"}})
        await eventually(task.done, timeout=15, what="the operator to stop")
        assert isinstance(task.exception(), LeadershipLostError)
        start = len(fake.requests)
        await asyncio.sleep(RESYNC * 3)
        assert [str(r) for r in fake.requests[start:]] == []  # stopped acting: no calls at all
    lease = fake.get(LEASES, "specserve-system", "specserve-operator")
    assert lease is not None and lease["spec"]["holderIdentity"] == "pod-b"  # not released: it was not ours


async def test_a_hung_api_call_fails_that_reconcile_only(fake: ThreadedFake, kimi_doc: dict[str, Any]) -> None:
    fake.add_fault(method="PATCH", path=r"/deployments/stuck-", hang=True, times=None)
    kube_options = ClientOptions(request_timeout=0.5, attempts=1)
    stop = asyncio.Event()
    kube = KubeClient.from_environment(kube_options)
    task = asyncio.create_task(serve(config(), kube, stop_flag=stop))
    try:
        fake.create(seeded(kimi_doc, "stuck"))
        fake.create(seeded(kimi_doc, "fine"))
        await eventually(lambda: converged(fake, "fine"), what="the other SpecServe to converge")
        assert not converged(fake, "stuck")
        assert not task.done()  # nothing escaped to kill the operator
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=30)


def holder(api: ThreadedFake) -> str | None:
    """Who holds the operator's Lease ("" or None: nobody)."""
    lease = api.get(LEASES, "specserve-system", "specserve-operator") or {}
    return (lease.get("spec") or {}).get("holderIdentity")


def hanging(api: ThreadedFake) -> bool:
    """A Deployment apply of the SpecServe "stuck" is open (the fake answers a hung call when its client leaves)."""
    return any(r.method == "PATCH" and "/deployments/stuck-" in r.path and not r.finished for r in api.requests)


async def test_a_stopping_leader_hands_the_lease_over_while_a_call_still_hangs(
    fake: ThreadedFake, kimi_doc: dict[str, Any]
) -> None:
    """A stop (`specserve run` makes SIGTERM the same stop) hands the Lease over first: kopf's orderly shutdown
    waits for the handlers in progress, nothing acts meanwhile, so a standby must not wait for it to end."""
    fake.add_fault(method="PATCH", path=r"/deployments/stuck-", hang=True, times=None)
    stop = asyncio.Event()
    kube = KubeClient.from_environment(ClientOptions(request_timeout=30, attempts=1))
    task = asyncio.create_task(serve(lease_config("pod-a"), kube, stop_flag=stop))

    try:
        fake.create(seeded(kimi_doc, "stuck"))
        await eventually(
            lambda: holder(fake) == "pod-a" and hanging(fake), what="a leader's reconcile hung on an apply"
        )
        stop.set()
        await eventually(lambda: not holder(fake), timeout=5, what="the Lease handed over")
        assert hanging(fake) and not task.done(), "the shutdown was over first: this proves nothing"
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=60)


async def test_sigterm_hands_the_lease_over_before_kopf_has_shut_down(
    fake: ThreadedFake, kimi_doc: dict[str, Any], tmp_path: Path
) -> None:
    """`specserve run --leader-elect` as a process, as a rolling update of the operator stops it: SIGTERM hands
    the Lease over while a handler's call still hangs (kopf cancels such handlers only after its exit timeout,
    and the fake answers a hung call when its client gives up), and the process then ends cleanly."""
    fake.add_fault(method="PATCH", path=r"/deployments/stuck-", hang=True, times=None)
    args = ["run", "-n", NS, "--leader-elect", "--leader-election-namespace", "specserve-system",
            "--lease-seconds", "3", "--api-timeout-seconds", "30", "--log-level", "warning"]  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig"), "POD_NAME": "pod-a"}
    code = "import sys; from specserve.cli import main; sys.exit(main())"
    process = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stderr=subprocess.PIPE)

    try:
        fake.create(seeded(kimi_doc, "stuck"))
        await eventually(lambda: holder(fake) == "pod-a" and hanging(fake), timeout=60, what="the leader's apply hung")
        process.send_signal(signal.SIGTERM)
        await eventually(lambda: not holder(fake), timeout=5, what="the Lease handed over")
        assert hanging(fake), "kopf cancelled the hung handler before the Lease was handed over"
        code_ = await asyncio.to_thread(process.wait, 60)
        assert code_ == 0, process.stderr.read().decode() if process.stderr else ""
        assert not hanging(fake)  # the call ended when the process gave it up
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def operator_process(tmp_path: Path, url: str, identity: str, metrics_port: int) -> subprocess.Popen[bytes]:
    """`specserve run` without --leader-elect, as a laptop run or an old Deployment would be, with its own
    credentials (its token tells its requests apart in the fake's record)."""
    kubeconfig = tmp_path / f"kubeconfig-{identity}"
    write_kubeconfig(kubeconfig, url, token=identity)
    args = ["run", "-n", NS, "--leader-election-namespace", "specserve-system", "--lease-seconds", "3",
            "--resync-seconds", "1", "--metrics-port", str(metrics_port), "--log-level", "warning"]  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAME": identity}
    code = "import sys; from specserve.cli import main; sys.exit(main())"
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, stderr=subprocess.PIPE)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def metric(port: int, name: str) -> float | None:
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as response:
            text = await response.text()
    except aiohttp.ClientError:
        return None
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(f"{name} ")), None)


def writes_by(api: ThreadedFake, token: str, since: int = 0) -> list[str]:
    return [
        f"{r.method} {r.path}"
        for r in api.requests[since:]
        if r.is_write and r.headers.get("Authorization") == f"Bearer {token}"
    ]


async def test_a_second_operator_without_leader_election_refuses_to_act_loudly(
    fake: ThreadedFake, kimi_doc: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 31, 6: two `specserve run` processes without --leader-elect over the same namespace. The first holds
    the Lease while it acts; the second finds it, writes nothing (no fight over status fields or the route), says
    so loudly (error log, OperatorConflict Warning event on the Lease, specserve_operator_conflict 1), and takes
    over once the first is gone."""
    fake.create(seeded(kimi_doc, "kimi"))
    ports = {"pod-a": free_port(), "pod-b": free_port()}
    first = operator_process(tmp_path, fake.url, "pod-a", ports["pod-a"])
    second: subprocess.Popen[bytes] | None = None
    try:
        await eventually(lambda: converged(fake, "kimi"), timeout=60, what="pod-a acts")
        start = len(fake.requests)
        second = operator_process(tmp_path, fake.url, "pod-b", ports["pod-b"])
        await eventually(lambda: any(r.headers.get("Authorization") == "Bearer pod-b" for r in fake.requests[start:]),
                         timeout=60, what="pod-b started")  # fmt: skip
        await asyncio.sleep(3)  # time to reconcile, had it acted
        # A spec change: the first operator applies it; the second writes nothing (its one event aside).
        fake.patch(SPECSERVES, NS, "kimi", {"spec": {"pools": {"baseline": {"replicas": 2}}}})
        await eventually(lambda: converged(fake, "kimi"), timeout=30, what="the change applied")
        await asyncio.sleep(3)
        assert set(writes_by(fake, "pod-b", start)) <= {"POST /api/v1/namespaces/specserve-system/events"}
        assert holder(fake) == "pod-a" and second.poll() is None
        conflict = [
            e for e in fake.call(fake.api.list, EVENTS, "specserve-system") if e["reason"] == "OperatorConflict"
        ]
        assert len(conflict) == 1 and conflict[0]["type"] == "Warning"
        assert "pod-a" in conflict[0]["message"] and "pod-b refuses to act" in conflict[0]["message"]
        assert await _eventually_async(lambda: metric(ports["pod-b"], "specserve_operator_conflict"), 1.0)
        # The first operator stops (cleanly: it hands the Lease over): the second takes over and acts.
        first.send_signal(signal.SIGTERM)
        await asyncio.to_thread(first.wait, 60)
        await eventually(lambda: holder(fake) == "pod-b", timeout=30, what="pod-b holds the Lease")
        fake.patch(SPECSERVES, NS, "kimi", {"spec": {"pools": {"baseline": {"replicas": 1}}}})
        await eventually(lambda: converged(fake, "kimi"), timeout=30, what="the change applied by pod-b")
        assert await _eventually_async(lambda: metric(ports["pod-b"], "specserve_operator_conflict"), 0.0)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    await asyncio.to_thread(process.wait, 30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    log = second.stderr.read().decode() if second is not None and second.stderr else ""
    assert "refuses to act" in log  # loudly, in its log too


async def _eventually_async(read: Callable[[], Coroutine[Any, Any, float | None]], want: float) -> bool:
    for _ in range(300):
        if await read() == want:
            return True
        await asyncio.sleep(0.1)
    raise AssertionError(f"the metric never read {want}")

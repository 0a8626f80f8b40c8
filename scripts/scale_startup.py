"""Start-up at scale: how long an operator start takes to converge N SpecServes, its CPU per resync round, its RSS.

    .venv/bin/python scripts/scale_startup.py --count 200

This process hosts the fake API server (specserve_kubefake: its kubelet stand-in marks Deployments ready, its
Gateway controller stand-in accepts each HTTPRoute generation); the operator (`specserve run`) is a subprocess, so
its CPU and memory are its own (read from /proc). Figures:
- seconds from the operator's start until every SpecServe has status.observedGeneration == metadata.generation,
  and until every one is Ready=True;
- after convergence, over several resync rounds: operator CPU seconds per round, API requests and writes per round;
- the operator's RSS (VmRSS) at the end and its peak (VmHWM);
- with --failovers K: during those resync rounds, K SpecServes (at random moments) lose the Ready pod of the pool
  that holds their traffic; the time from that until the HTTPRoute gives the pool weight 0 (p50, p99, max): the
  priority lane at work (a failover must not queue behind a round);
- with --lease-loss: the operator runs with --leader-elect; once converged, a writer keeps making pools drift (so
  the leader keeps writing), then the lease is lost, twice over in two runs: stolen (another holder in the Lease)
  and lapsed (the API refuses the renewals). Printed: the last write after the loss and the process's exit.

    .venv/bin/python scripts/scale_startup.py --count 1000 --failovers 50
    .venv/bin/python scripts/scale_startup.py --count 50 --lease-loss

With --cluster, the same start-up on a real control plane (tests/cluster/controlplane.py: etcd, kube-apiserver with
TLS, RBAC and an audit log, the controller-manager, the scheduler, kwok; binaries from scripts/kube-binaries.sh):
the chart installed by helm, the operator run as the chart runs it (its ServiceAccount's token, over TLS), the
SpecServes' pods placed by the real scheduler on kwok GPU nodes and made Ready by kwok 1.5-3.5 s after they are
scheduled; a Gateway controller stand-in in this process accepts each HTTPRoute generation. Requests are counted
from the API server's audit log (the operator's ServiceAccount only) and apiserver_request_total (every client);
a failover takes the serving pool's pods away as kwok would (they turn NotReady). The load average of the machine is
printed beside the figures.

    .venv/bin/python scripts/scale_startup.py --cluster --count 1000 --failovers 50
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import cProfile
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from specserve_kubefake import DEPLOYMENTS, HTTPROUTES, LEASES, SPECSERVES, FakeApiServer, write_kubeconfig
from specserve_kubefake.recording import RecordedRequest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "kimi-k25-rtxpro6000.yaml"
NS = "llm"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def memory_mib(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def observed(obj: dict[str, Any]) -> bool:
    return bool((obj.get("status") or {}).get("observedGeneration") == obj["metadata"].get("generation"))


def seed(api: FakeApiServer, count: int) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for i in range(count):
        body = copy.deepcopy(doc)
        body["metadata"] = {"name": f"kimi-{i:04d}", "namespace": NS}
        body["spec"]["routing"]["hostnames"] = [f"kimi-{i:04d}.llm.example.com"]
        api.create(body)


def _items(api: FakeApiServer, resource: str) -> list[dict[str, Any]]:
    """The stored objects themselves, not copies (``api.list`` deep-copies: at 1000 SpecServes, polled twice a
    second, those copies were most of the CPU charged to the fake). Read only: stored dicts are never mutated."""
    rt = api.registry.get(resource)
    assert rt is not None
    return api.store.select(rt, NS)[0]


def _request_summary(requests: list[RecordedRequest]) -> str:
    """Requests by verb and resource, most frequent first."""
    counts = Counter(
        f"{r.verb} {(r.resource or r.path).rsplit('/', 1)[-1]}{'/' + r.subresource if r.subresource else ''}"
        for r in requests
    )
    return ", ".join(f"{what} {n}" for what, n in counts.most_common())


@contextlib.contextmanager
def kubeconfig_for(url: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kubeconfig"
        write_kubeconfig(path, url)
        yield path


async def measure(args: argparse.Namespace) -> int:
    # accept_routes=0: the fake's Gateway stand-in accepts each new HTTPRoute generation as it is written.
    api = FakeApiServer(auto_ready=True, accept_routes=0)
    log_ = api.requests
    async with api:
        seed(api, args.count)
        with kubeconfig_for(api.url) as kubeconfig:
            env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1", "POD_NAME": "operator-0"}
            env.pop("KUBERNETES_SERVICE_HOST", None)
            profile = ["-c", _PROFILED, args.profile] if args.profile else []
            if args.tracemalloc:
                profile = ["-c", _TRACED, args.tracemalloc]
            lease = ["--leader-elect", "--leader-election-namespace", NS] if args.lease_loss else []
            command = [
                sys.executable, *profile, "-m", "specserve.cli", "run", "--namespace", NS,
                "--resync-seconds", str(args.resync_seconds),
                "--max-concurrent-reconciles", str(args.max_concurrent_reconciles),
                "--full-resync-every", str(args.full_resync_every),
                "--log-level", "warning", *lease,
            ]  # fmt: skip
            log = open(args.log, "w", encoding="utf-8")  # noqa: SIM115 (closed below, after the process)
            start, fake_cpu0 = time.monotonic(), time.process_time()  # the seeding above is not the start-up's
            proc = await asyncio.create_subprocess_exec(*command, env=env, stdout=log, stderr=log)
            try:
                if args.lease_loss:
                    return await _lease_loss(args, api, log_, proc, start)
                return await _figures(args, api, proc.pid, start, fake_cpu0)
            finally:
                if proc.returncode is None:
                    proc.terminate()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), timeout=30)
                if proc.returncode is None:
                    proc.kill()
                log.close()


async def _figures(args: argparse.Namespace, api: FakeApiServer, pid: int, start: float, fake_cpu0: float) -> int:
    t_observed = t_ready = None
    profile = cProfile.Profile(time.process_time) if args.profile_fake else None
    if profile is not None:
        profile.enable()
    while time.monotonic() - start < args.timeout:
        items = _items(api, SPECSERVES)
        n_observed, n_ready = sum(map(observed, items)), sum(map(ready, items))
        now = time.monotonic() - start
        if t_observed is None and n_observed == args.count:
            t_observed = now
        if n_ready == args.count:
            t_ready = now
            break
        if args.verbose:
            print(f"{now:7.1f} s  observed {n_observed:4d}  ready {n_ready:4d}  requests {len(api.requests)}")
        await asyncio.sleep(0.5)
    startup_cpu, fake_cpu = cpu_seconds(pid), time.process_time() - fake_cpu0
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile_fake)
    print(f"SpecServes: {args.count}; max concurrent reconciles: {args.max_concurrent_reconciles}")
    print(f"all observedGeneration == generation after: {_fmt(t_observed)} s")
    print(
        f"all Ready=True after: {_fmt(t_ready)} s (CPU by then: operator {startup_cpu:.1f} s, "
        f"fake API server {fake_cpu:.1f} s)"
    )
    print(f"API requests during start-up: {len(api.requests)}: {_request_summary(api.requests)}")
    if t_ready is None:
        print(f"did not converge within {args.timeout} s")
        return 1
    # Let the start-up's own resyncs pass, then measure whole resync rounds.
    await asyncio.sleep(args.resync_seconds * args.settle_rounds)
    cpu0, requests0 = cpu_seconds(pid), len(api.requests)
    if not args.failovers:
        await asyncio.sleep(args.resync_seconds * args.rounds)
    cpu = (cpu_seconds(pid) - cpu0) / args.rounds
    window = api.requests[requests0:]
    writes = [r for r in window if r.is_write]
    if args.failovers:
        latencies = await _failovers(api, args)
        cpu = (cpu_seconds(pid) - cpu0) / args.rounds
        window = api.requests[requests0:]
        writes = [r for r in window if r.is_write]
        print(f"failovers during the rounds: {len(latencies)}; route off the dead pool after (s): "
              f"p50 {_pct(latencies, 50):.2f}, p99 {_pct(latencies, 99):.2f}, max {max(latencies):.2f}")  # fmt: skip
    print(
        f"steady state over {args.rounds} resync rounds of {args.resync_seconds:g} s: "
        f"operator CPU {cpu:.2f} s/round ({cpu / args.count * 1000:.1f} ms per SpecServe), "
        f"{len(window) / args.rounds:.0f} requests/round, {len(writes) / args.rounds:.1f} writes/round"
    )
    written = Counter(r.name for r in writes)
    if written:
        print(f"  writes touched {len(written)} objects, at most {max(written.values())} times each; first ones:")
    for write in writes[:3]:
        print(f"  write: {write}")
    if window:
        print(f"  requests: {_request_summary(window)}")
    mem = memory_mib(pid)
    print(f"operator RSS: {mem.get('VmRSS', 0):.0f} MiB (peak {mem.get('VmHWM', 0):.0f} MiB)")
    if args.tracemalloc:
        await _memory_by_file(pid, args.tracemalloc)
    return 0


# The operator under cProfile, timed by its own CPU time (wall time on a shared machine charges the waits for a
# core to whatever was running): the stats go to the file named by the first argument when it exits.
_PROFILED = """
import cProfile, runpy, sys, time
out = sys.argv.pop(1)
sys.argv[:] = ["specserve", *sys.argv[3:]]  # without "-m specserve.cli"
profile = cProfile.Profile(time.process_time)
try:
    profile.runcall(runpy.run_module, "specserve.cli", run_name="__main__")
finally:
    profile.dump_stats(out)
"""

# The operator under tracemalloc: SIGUSR1 writes a snapshot to the file named by the first argument.
_TRACED = """
import runpy, signal, sys, tracemalloc
tracemalloc.start(1)
out = sys.argv.pop(1)
signal.signal(signal.SIGUSR1, lambda *_: tracemalloc.take_snapshot().dump(out))
sys.argv[:] = ["specserve", *sys.argv[3:]]  # without "-m specserve.cli"
runpy.run_module("specserve.cli", run_name="__main__")
"""


async def _memory_by_file(pid: int, path: str) -> None:
    """Where the operator's Python memory is, by source file (the largest 20)."""
    import tracemalloc  # noqa: PLC0415

    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.kill(pid, signal.SIGUSR1)
    for _ in range(600):
        await asyncio.sleep(0.1)
        if os.path.exists(path) and os.path.getsize(path) > 0:
            await asyncio.sleep(1.0)  # the dump is written in one go; let it finish
            break
    stats = tracemalloc.Snapshot.load(path).statistics("filename")
    total = sum(s.size for s in stats)
    print(f"operator Python memory (tracemalloc): {total / 2**20:.1f} MiB in {sum(s.count for s in stats)} blocks")
    for stat in stats[:20]:
        name = stat.traceback[0].filename
        print(f"  {stat.size / 2**20:7.1f} MiB {stat.count:8d} blocks  {name}")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def _weights(api: FakeApiServer, name: str) -> dict[str, int]:
    rt = api.registry.get(HTTPROUTES)
    assert rt is not None
    route = api.store.get(rt, NS, name) or {}  # read only: no copy
    return {
        b["name"]: int(b.get("weight", 1))
        for rule in (route.get("spec") or {}).get("rules") or []
        for b in rule.get("backendRefs") or []
    }


async def _failovers(api: FakeApiServer, args: argparse.Namespace) -> list[float]:
    """Over the measured rounds, K SpecServes lose the Ready pod of their serving pool at random moments; the
    seconds until the route gives that pool no weight. Each pool gets its pod back afterwards."""
    window = args.resync_seconds * args.rounds
    rng = random.Random(7)
    names = rng.sample([f"kimi-{i:04d}" for i in range(args.count)], args.failovers)
    moments = sorted(rng.uniform(0.05 * window, 0.8 * window) for _ in names)
    began = time.monotonic()
    pending: dict[str, tuple[str, float]] = {}  # SpecServe -> (pool, when it lost its pod)
    latencies: list[float] = []
    queue = list(zip(moments, names, strict=True))
    while queue or pending:
        now = time.monotonic()
        while queue and now - began >= queue[0][0]:
            _, name = queue.pop(0)
            serving = [pool for pool, w in _weights(api, name).items() if w > 0]
            if len(serving) != 1:
                continue
            api.set_deployment_ready(NS, serving[0], ready=0)
            pending[name] = (serving[0], time.monotonic())
        for name, (pool, lost) in list(pending.items()):
            if _weights(api, name).get(pool, 1) == 0:
                latencies.append(time.monotonic() - lost)
                del pending[name]
                api.set_deployment_ready(NS, pool)  # the pod comes back
            elif time.monotonic() - lost > 120:
                print(f"  {name}: no failover within 120 s")
                del pending[name]
        await asyncio.sleep(0.02)
    rest = window - (time.monotonic() - began)
    if rest > 0:
        await asyncio.sleep(rest)
    return latencies


async def _converged(api: FakeApiServer, count: int, start: float, timeout: float) -> float | None:
    while time.monotonic() - start < timeout:
        if sum(map(ready, _items(api, SPECSERVES))) == count:
            return time.monotonic() - start
        await asyncio.sleep(0.5)
    return None


async def _lease_loss(
    args: argparse.Namespace,
    api: FakeApiServer,
    log_: list[RecordedRequest],
    proc: asyncio.subprocess.Process,
    start: float,
) -> int:
    """One loss (args.lease_loss: stolen or lapsed) while the leader keeps repairing drift."""
    t_ready = await _converged(api, args.count, start, args.timeout)
    if t_ready is None:
        print("did not converge")
        return 1
    lease = api.get(LEASES, NS, "specserve-operator") or {}
    duration = float((lease.get("spec") or {}).get("leaseDurationSeconds") or 15)
    pools = [d["metadata"]["name"] for d in api.list(DEPLOYMENTS, NS)]
    stop = asyncio.Event()

    async def drift() -> None:  # another writer: the leader repairs each change at once (a pool's event)
        i = 0
        while not stop.is_set():
            api.patch(DEPLOYMENTS, NS, pools[i % len(pools)], {"spec": {"replicas": 2 + i % 2}})
            i += 1
            await asyncio.sleep(0.05)

    drifting = asyncio.create_task(drift())
    await asyncio.sleep(3)
    if args.lease_loss == "stolen":
        lost = time.monotonic()
        api.patch(LEASES, NS, "specserve-operator", {"spec": {"holderIdentity": "operator-1"}})
    else:
        api.faults.add(method="PUT", path=r"/leases/", status=503, times=None)  # renewals refused from now on
        lost = time.monotonic()
    code = await asyncio.wait_for(proc.wait(), timeout=120)
    exited = time.monotonic()
    stop.set()
    await drifting
    stamped = [(r.started, r) for r in log_]  # each request with its arrival time
    renewed = [t for t, r in stamped if r.resource == LEASES and r.method == "PUT" and r.status == 200 and t < lost]
    writes = [t for t, r in stamped if r.is_write and r.resource != LEASES and r.method != "POST" and t >= lost - 5]
    last = max(writes) if writes else float("nan")
    base = lost if args.lease_loss == "stolen" else renewed[-1]
    what = "the steal" if args.lease_loss == "stolen" else "the last accepted renewal"
    print(f"lease {args.lease_loss}: SpecServes {args.count}; lease {duration:g} s")
    print(f"  last operator write {last - base:.2f} s after {what}; writes after the loss: "
          f"{sum(1 for t in writes if t > lost)}")  # fmt: skip
    print(f"  process exited (code {code}) {exited - base:.2f} s after {what}")
    if args.lease_loss == "lapsed":
        print(f"  a standby may take over {duration:g} s after the last renewal it saw")
    return 0


# ------------------------------------------------------------------------------------- on a real control plane


class _LoadAverage:
    """The machine's 1-minute load average, sampled every 5 s (a shared machine: the figures depend on it)."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    async def run(self) -> None:
        while True:
            self.samples.append(float(Path("/proc/loadavg").read_text().split()[0]))
            await asyncio.sleep(5)

    def summary(self) -> str:
        if not self.samples:
            return "-"
        return f"mean {sum(self.samples) / len(self.samples):.1f}, max {max(self.samples):.1f} (2 cores)"


class _Audit:
    """The operator's requests from the API server's audit log, read incrementally (one event per request: a watch
    is logged at ResponseStarted and at ResponseComplete, counted once by its auditID)."""

    def __init__(self, path: Path, user: str) -> None:
        self.path, self.user, self.offset = path, user, 0
        self.seen: set[str] = set()
        self.requests: list[str] = []  # "verb resource[/subresource]", in order

    def read(self) -> int:
        if not self.path.exists():
            return len(self.requests)
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            event = json.loads(line)
            if (event.get("user") or {}).get("username") != self.user or event["auditID"] in self.seen:
                continue
            self.seen.add(event["auditID"])
            ref = event.get("objectRef") or {}
            sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
            self.requests.append(f"{event.get('verb')} {ref.get('resource')}{sub}")
        return len(self.requests)

    @staticmethod
    def summary(requests: list[str]) -> str:
        return ", ".join(f"{what} {n}" for what, n in Counter(requests).most_common())


async def _apiserver_requests(admin: Any) -> int:
    """apiserver_request_total summed over every client and verb."""
    text = await admin.get_raw("/metrics")
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("apiserver_request_total{")))  # fmt: skip


async def measure_cluster(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))  # tests.cluster: the control plane's starter
    from tests.cluster import harness  # noqa: PLC0415
    from tests.cluster.controlplane import OPERATOR_USER, ControlPlane, find  # noqa: PLC0415

    assets = find()
    if isinstance(assets, str):
        print(f"no real control plane: {assets}")
        return 2
    # SIGTERM cancels the run: the control plane's processes are stopped on the way out, not orphaned.
    this = asyncio.current_task()
    assert this is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, this.cancel)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="scale-cluster-"))
    workdir.mkdir(parents=True, exist_ok=True)
    plane = ControlPlane(assets, workdir)
    load = _LoadAverage()
    loading = asyncio.create_task(load.run())
    try:
        t = time.monotonic()
        plane.start()
        plane.install_crds()
        plane.install_chart()
        # Every pool may surge one pod while it rolls: room for 3 pods per SpecServe.
        nodes = harness.add_gpu_capacity(plane, 3 * args.count)
        harness.prepare_namespace(plane, NS)
        print(f"control plane up in {time.monotonic() - t:.0f} s ({workdir}); {nodes} kwok nodes of "
              f"{harness.PODS_PER_NODE} pods x {harness.GPUS_PER_POD} GPUs added", flush=True)  # fmt: skip
        async with harness.Admin(plane) as admin:
            return await _figures_cluster(args, plane, admin, harness, _Audit(plane.audit_log, OPERATOR_USER), load)
    finally:
        loading.cancel()
        plane.stop()
        print(f"control plane logs and audit log: {workdir}")


def _bodies(count: int) -> list[dict[str, Any]]:
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    bodies = []
    for i in range(count):
        body = copy.deepcopy(doc)
        body["metadata"] = {"name": f"kimi-{i:04d}", "namespace": NS}
        body["spec"]["routing"]["hostnames"] = [f"kimi-{i:04d}.llm.example.com"]
        bodies.append(body)
    return bodies


async def _converge_cluster(args: argparse.Namespace, plane: Any, proc: Any, specserves: Any, audit: _Audit,
                            start: float) -> tuple[float | None, float | None]:  # fmt: skip
    """Seconds from the operator's start until every SpecServe is observed, and until every one is Ready."""
    t_observed = None
    while time.monotonic() - start < args.timeout:
        items = list(specserves.items.values())
        n_observed, n_ready = sum(map(observed, items)), sum(map(ready, items))
        now = time.monotonic() - start
        if t_observed is None and n_observed == args.count:
            t_observed = now
        if n_ready == args.count:
            return t_observed, now
        if proc.poll() is not None:
            print(f"the operator exited ({proc.returncode}):\n{plane.log_tail('operator-operator-0')}")
            break
        if args.verbose:
            print(f"{now:7.1f} s  observed {n_observed:4d}  ready {n_ready:4d}  operator requests {audit.read()}",
                  flush=True)  # fmt: skip
        await asyncio.sleep(1.0)
    return t_observed, None


async def _figures_cluster(args: argparse.Namespace, plane: Any, admin: Any, harness: Any, audit: _Audit,
                           load: _LoadAverage) -> int:  # fmt: skip
    gateway = harness.Gateway(admin, NS)
    specserves = harness.Cache(admin, harness.SPECSERVES, NS)
    deployments = harness.Cache(admin, harness.DEPLOYMENTS, NS)
    caches = [asyncio.create_task(c.run()) for c in (gateway.cache, specserves, deployments)]
    try:
        await harness.create_all(admin, harness.SPECSERVES, NS, _bodies(args.count))
        requests0 = await _apiserver_requests(admin)
        start = time.monotonic()
        proc = plane.run_operator(
            "operator-0", f"--resync-seconds={args.resync_seconds:g}",
            f"--max-concurrent-reconciles={args.max_concurrent_reconciles}",
            f"--full-resync-every={args.full_resync_every}", "--log-level=warning",
        )  # fmt: skip
        pids = {name: p.pid for name, p in plane.procs.items() if not name.startswith("operator-")}
        plane_cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        t_observed, t_ready = await _converge_cluster(args, plane, proc, specserves, audit, start)
        if proc.poll() is not None:
            return 1
        startup_cpu = cpu_seconds(proc.pid)
        plane_cpu = {name: cpu_seconds(pid) - plane_cpu0[name] for name, pid in pids.items()}
        audit.read()
        startup_requests = list(audit.requests)
        all_requests = await _apiserver_requests(admin) - requests0
        print(f"SpecServes: {args.count} on a real control plane (kube-apiserver, etcd, controller-manager, "
              f"scheduler, kwok); max concurrent reconciles: {args.max_concurrent_reconciles}")  # fmt: skip
        print(f"all observedGeneration == generation after: {_fmt(t_observed)} s")
        print(
            f"all Ready=True after: {_fmt(t_ready)} s (CPU by then: operator {startup_cpu:.1f} s; control plane "
            + ", ".join(f"{n} {c:.0f} s" for n, c in plane_cpu.items())
            + ")"
        )
        print(f"operator API requests during start-up (audit log): {len(startup_requests)}: "
              f"{audit.summary(startup_requests)}")  # fmt: skip
        print(f"API server requests from every client during start-up (apiserver_request_total): {all_requests}")
        print(f"load average during start-up: {load.summary()}")
        if t_ready is None:
            waiting = [o for o in specserves.items.values() if not ready(o)]
            print(
                f"did not converge within {args.timeout} s; {len(waiting)} not Ready, e.g. "
                f"{waiting[0]['metadata']['name']}: {(waiting[0].get('status') or {}).get('conditions')}"
            )
            return 1
        await asyncio.sleep(args.resync_seconds * args.settle_rounds)
        cpu0, n0 = cpu_seconds(proc.pid), audit.read()
        latencies: list[float] = []
        if args.failovers:
            latencies = await _failovers_cluster(args, admin, harness, gateway.cache, deployments)
        else:
            await asyncio.sleep(args.resync_seconds * args.rounds)
        cpu = (cpu_seconds(proc.pid) - cpu0) / args.rounds
        audit.read()
        window = audit.requests[n0:]
        writes = [r for r in window if r.split()[0] in ("create", "update", "patch", "delete")]
        if args.failovers:
            print(f"failovers during the rounds: {len(latencies)} of {args.failovers}; route off the dead pool after "
                  f"(s): p50 {_pct(latencies, 50):.2f}, p99 {_pct(latencies, 99):.2f}, max {max(latencies):.2f}"
                  if latencies else "failovers: none timed")  # fmt: skip
        print(
            f"steady state over {args.rounds} resync rounds of {args.resync_seconds:g} s: "
            f"operator CPU {cpu:.2f} s/round ({cpu / args.count * 1000:.1f} ms per SpecServe), "
            f"{len(window) / args.rounds:.0f} requests/round, {len(writes) / args.rounds:.1f} writes/round"
        )
        if window:
            print(f"  requests: {audit.summary(window)}")
        mem = memory_mib(proc.pid)
        print(f"operator RSS: {mem.get('VmRSS', 0):.0f} MiB (peak {mem.get('VmHWM', 0):.0f} MiB)")
        print(f"load average over the whole run: {load.summary()}")
        return 0
    finally:
        for task in caches:
            task.cancel()


async def _failovers_cluster(args: argparse.Namespace, admin: Any, harness: Any, routes: Any,
                             deployments: Any) -> list[float]:  # fmt: skip
    """As _failovers, on the real plane: the serving pool's pods are marked for kwok to turn NotReady (the real
    ReplicaSet and Deployment controllers then report readyReplicas 0); the seconds until the HTTPRoute gives that
    pool no weight (read from a watch). The pods are then deleted: the ReplicaSet replaces them and kwok makes the
    new ones Ready."""
    from tests.cluster.controlplane import FAIL_ANNOTATION  # noqa: PLC0415

    window = args.resync_seconds * args.rounds
    rng = random.Random(7)
    names = rng.sample([f"kimi-{i:04d}" for i in range(args.count)], args.failovers)
    moments = sorted(rng.uniform(0.05 * window, 0.8 * window) for _ in names)
    began = time.monotonic()
    pending: dict[str, tuple[str, str, float]] = {}  # SpecServe -> (pool, its selector, when its pods went)
    latencies: list[float] = []
    queue = list(zip(moments, names, strict=True))

    tasks: set[asyncio.Task[None]] = set()

    def spawn(coro: Any) -> None:  # API calls off the timing loop: it only reads the watch caches
        task = asyncio.ensure_future(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def take_pods(name: str, pool: str, selector: str) -> None:
        """Mark every pod of the pool; the failover is timed from when the last mark was accepted."""
        pods = await admin.request("GET", harness.PODS.format(ns=NS), params={"labelSelector": selector})
        for pod in pods.get("items") or []:
            await admin.merge_patch(harness.PODS, NS, pod["metadata"]["name"],
                                    {"metadata": {"annotations": {FAIL_ANNOTATION: "true"}}})  # fmt: skip
        pending[name] = (pool, selector, time.monotonic())

    while queue or pending or tasks:
        now = time.monotonic()
        while queue and now - began >= queue[0][0]:
            _, name = queue.pop(0)
            serving = [pool for pool, w in (harness.weights(routes.get(name)) or {}).items() if w > 0]
            dep = deployments.get(serving[0]) if len(serving) == 1 else None
            if dep is None:
                continue
            labels = dep["spec"]["selector"]["matchLabels"]
            spawn(take_pods(name, serving[0], ",".join(f"{k}={v}" for k, v in labels.items())))
        for name, (pool, selector, lost) in list(pending.items()):
            if (harness.weights(routes.get(name)) or {}).get(pool, 1) == 0:
                latencies.append(time.monotonic() - lost)
                del pending[name]
                spawn(admin.delete_pods(NS, selector))  # the ReplicaSet replaces them; kwok makes them Ready
            elif time.monotonic() - lost > 120:
                print(f"  {name}: no failover within 120 s")
                del pending[name]
                spawn(admin.delete_pods(NS, selector))
        await asyncio.sleep(0.02)
    rest = window - (time.monotonic() - began)
    if rest > 0:
        await asyncio.sleep(rest)
    return latencies


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--resync-seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle-rounds", type=int, default=2, help="resync rounds to wait before measuring")
    parser.add_argument("--max-concurrent-reconciles", type=int, default=8)
    parser.add_argument("--full-resync-every", type=int, default=4, help="the operator's flag (1: no skipping)")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--log", default=str(Path(tempfile.gettempdir()) / "scale_startup_operator.log"))
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--profile", metavar="FILE", help="run the operator under cProfile, stats to FILE")
    parser.add_argument(
        "--profile-fake",
        metavar="FILE",
        help="cProfile this process (the fake API server) from the operator's start to all Ready",
    )
    parser.add_argument(
        "--tracemalloc",
        metavar="FILE",
        help="run the operator under tracemalloc; at the end, its memory by source file",
    )
    parser.add_argument("--failovers", type=int, default=0, help="failovers injected during the measured rounds")
    parser.add_argument("--lease-loss", choices=["stolen", "lapsed"], help="measure the write fence and the exit")
    parser.add_argument("--cluster", action="store_true", help="on a real control plane with kwok (see above)")
    parser.add_argument("--workdir", help="--cluster: the control plane's directory (logs, audit log)")
    args = parser.parse_args()
    if args.cluster:
        return asyncio.run(measure_cluster(args))
    return asyncio.run(measure(args))


if __name__ == "__main__":
    sys.exit(main())

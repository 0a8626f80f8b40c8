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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import cProfile
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
    return asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())

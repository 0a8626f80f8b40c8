#!/usr/bin/env python3
"""Switching benchmarks (figures for the closing note; timing-sensitive, so not tests).

    .venv/bin/python scripts/bench_switching.py round      # one evaluation round of 1, 20, 200 SpecServes
    .venv/bin/python scripts/bench_switching.py reaction   # load step -> HTTPRoute weight change, vs the bound
    .venv/bin/python scripts/bench_switching.py rss        # the operator's RSS with 200 SpecServes
    .venv/bin/python scripts/bench_switching.py writes     # API writes per round, the soak's demand, an outage
    .venv/bin/python scripts/bench_switching.py all

round: a real Prometheus (Debian's, loopback) scrapes a synthetic exposition carrying the series of N SpecServes
(2 pools each, SpecServe labels honoured); the switching loop, with the real policy and an in-memory Kubernetes,
runs one round (first sight: writes the state) and a steady round. Reported: CPU seconds of the operator process
(process_time, queries' worker thread included), wall seconds, and Prometheus queries sent.
reaction: the integration environment (SGLang emulators, Prometheus, the fake API server, the real operator);
demand steps from 1 to 24 requests in flight; the time to the first HTTPRoute weight change is compared with the
bound evaluation interval + stabilization window + 2 scrape intervals, for a few settings.
rss: the fake API server and `specserve run` as separate processes, 200 SpecServes, the operator's VmRSS/VmHWM
after every SpecServe has been evaluated, and its CPU over a steady minute. The operator runs from a venv with what
the operator image installs (`pip install .`, no extras: .cache/bench/operator-venv, built on first use), since the
dev extras (kubernetes-validate, jsonschema: the fake's validators) are imported by the kubernetes client when
present; `--operator-python` runs it from another interpreter.
writes: the switching loop with the real policy over N SpecServes configured as the chaos soak configures them
(TrafficSplit, 2 s evaluations, each SpecServe's demand jumping among 1-20 requests every 15-45 s), on simulated
time with an in-memory load source and Kubernetes (no timing, so deterministic for a seed): the loop's status writes
and the reconciles it triggers per round, over the whole run and in the rounds around a Prometheus outage
(--outage-seconds long, starting half way). Counts, not seconds: what the rounds on a real API server cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the integration tests' environment (tests.integration.switching_env)

import yaml  # noqa: E402
from kubernetes.config import kube_config  # noqa: E402
from tests.integration.switching_env import Load, Prometheus, ScrapeTarget, emulators  # noqa: E402

from specserve.commands.supervisor import serve  # noqa: E402
from specserve.config import OperatorConfig  # noqa: E402
from specserve.kube.client import ClientOptions, KubeClient  # noqa: E402
from specserve.kube.kinds import DEPLOYMENT, Kind  # noqa: E402
from specserve.metrics.prometheus import PrometheusSource  # noqa: E402
from specserve.metrics.promql import PoolKey, Query, Signal, Windows  # noqa: E402
from specserve.metrics.results import QueryResult  # noqa: E402
from specserve.objects import Objects, ObjectState  # noqa: E402
from specserve.policy.switching import decide  # noqa: E402
from specserve.switching.loop import LoopConfig, SwitchingLoop  # noqa: E402
from specserve_kubefake import HTTPROUTES, FakeApiServer, write_kubeconfig  # noqa: E402
from specserve_tools.emulator.testing import free_port  # noqa: E402

NS = "bench"
JSON = dict[str, Any]
EXAMPLE = ROOT / "examples" / "kimi-k25-rtxpro6000.yaml"


def doc(name: str, **switching: Any) -> JSON:
    body: JSON = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    body["metadata"] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "generation": 1}
    body["spec"]["monitoring"] = {"podMonitor": True, "intervalSeconds": 1}
    body["spec"]["switching"] = {"initialMode": "Baseline", "crossoverConcurrency": 6, **switching}
    return body


# ------------------------------------------------------------------------------------------------------- round


def exposition(names: list[str]) -> str:
    """The engine series of every SpecServe's two pools, labelled as our PodMonitor labels them."""
    lines = []
    buckets = (0.1, 1.0, 10.0, "+Inf")
    for i, name in enumerate(names):
        for pool in ("speculative", "baseline"):
            labels = f'namespace="{NS}",specserve_instance="{name}",specserve_pool="{pool}",model_name="m"'
            lines += [
                f"sglang:num_running_reqs{{{labels}}} {i % 30}",
                f"sglang:num_queue_reqs{{{labels}}} {i % 3}",
                f"sglang:generation_tokens_total{{{labels}}} {1000 * i}",
                f"sglang:spec_accept_length{{{labels}}} 2.5",
                f"sglang:spec_num_steps{{{labels}}} 3",
            ]
            for hist in ("sglang:time_to_first_token_seconds", "sglang:request_time_per_output_token_seconds"):
                lines += [f'{hist}_bucket{{{labels},le="{le}"}} {10 * (k + 1)}' for k, le in enumerate(buckets)]
    return "\n".join(lines) + "\n"


def serve_dir(directory: Path, port: int) -> subprocess.Popen[bytes]:
    """A static file server in its own process (its CPU is not the operator's)."""
    return subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(directory)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def honour(prom: Prometheus) -> None:
    """Keep the labels the synthetic exposition carries (one target stands for every SpecServe's pods)."""
    text = prom.config.read_text().replace("- job_name: sglang\n", "- job_name: sglang\n  honor_labels: true\n")
    prom.config.write_text(text)


class MemoryKube:
    """In-memory Kubernetes for the round benchmark: Deployments ready, status applies stored, nothing else."""

    def __init__(self, registry: Objects, names: list[str]) -> None:
        self.registry = registry
        self.deployments = [
            {
                "metadata": {"name": f"{n}-{p}"},
                "spec": {"replicas": 1},
                "status": {"readyReplicas": 1, "updatedReplicas": 1},
            }
            for n in names
            for p in ("spec", "base")
        ]
        self.writes = 0

    async def list(self, kind: Kind, namespace: str, labels: dict[str, str]) -> list[JSON]:
        return self.deployments if kind is DEPLOYMENT else []

    async def apply_status(self, kind: Kind, namespace: str, name: str, status_body: JSON, field_manager: str) -> JSON:
        self.writes += 1
        tracked = self.registry.named((namespace, name))
        assert tracked is not None
        tracked.observe({**tracked.body, "status": {**(tracked.body.get("status") or {}), **status_body}})
        return tracked.body

    async def post_event(self, involved: JSON, *, reason: str, message: str, type_: str = "Normal") -> None:
        pass


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Readers:
    def __init__(self, source: PrometheusSource) -> None:
        self.source = source

    def prometheus(self, url: str) -> PrometheusSource:
        return self.source

    @property
    def direct(self) -> Any:
        raise NotImplementedError


async def one_round(loop: SwitchingLoop, source: PrometheusSource) -> tuple[float, float, int]:
    sent, cpu, wall = source.queries_sent, time.process_time(), time.perf_counter()
    await loop.run_round()
    return time.process_time() - cpu, time.perf_counter() - wall, source.queries_sent - sent


def bench_round(sizes: list[int]) -> list[JSON]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        names = [f"s{i}" for i in range(max(sizes))]
        (work / "www").mkdir()
        (work / "www" / "metrics").write_text(exposition(names), encoding="utf-8")
        port = free_port()
        web = serve_dir(work / "www", port)
        prom = Prometheus(work, [ScrapeTarget(f"http://127.0.0.1:{port}", NS, "ignored", "ignored")], interval=1.0)
        honour(prom)
        try:
            prom.start()
            time.sleep(6)  # a few scrapes: rates and averages have samples
            for index, n in enumerate([sizes[0], *sizes]):  # the first pass warms the code paths: not reported
                registry = Objects()
                for name in names[:n]:
                    registry.observe(doc(name, evaluationIntervalSeconds=15))
                source = PrometheusSource(prom.url)
                clock = Clock(time.time())

                async def trigger(item: ObjectState) -> None:
                    pass

                loop = SwitchingLoop(
                    registry, MemoryKube(registry, names[:n]), Readers(source), decide, trigger,
                    LoopConfig(prometheus_url=prom.url), clock=clock,
                )  # fmt: skip
                first = asyncio.run(one_round(loop, source))
                clock.t += 15
                steady = asyncio.run(one_round(loop, source))
                if index == 0:
                    continue
                rows.append({"specserves": n, "first": first, "steady": steady})
                print(
                    f"N={n:4d}: first round cpu {first[0]:.3f} s wall {first[1]:.3f} s queries {first[2]}; "
                    f"steady round cpu {steady[0]:.3f} s wall {steady[1]:.3f} s queries {steady[2]}",
                    flush=True,
                )
        finally:
            prom.stop()
            web.terminate()
    return rows


# ------------------------------------------------------------------------------------------------------ writes
SOAK_DEMANDS = (1, 2, 4, 8, 12, 20)  # scripts/chaos_soak.py's DEMANDS


def soak_doc(name: str) -> JSON:
    """A SpecServe as scripts/chaos_soak.py configures it (specserve_doc), already realised by a reconcile."""
    body = doc(name, hysteresis=0.2, evaluationIntervalSeconds=2, upStabilizationSeconds=0,
               downStabilizationSeconds=4, minDwellSeconds=0)  # fmt: skip
    body["status"] = {"weights": {"speculative": 0, "baseline": 100}, "activeMode": "Baseline"}
    return body


class ScriptedLoad:
    """Prometheus' answers on simulated time: each SpecServe's demand split over its pools by the route's weights
    (as the soak's exposition splits it); every query fails while `down`."""

    def __init__(self, registry: Objects, demand: dict[str, float]) -> None:
        self.registry, self.demand = registry, demand
        self.now, self.down, self.queries_sent = 0.0, False, 0

    def _share(self, name: str, pool: str) -> float:
        tracked = self.registry.named((NS, name))
        weights = ((tracked.body.get("status") or {}).get("weights") if tracked else None) or {}
        total = sum(weights.values()) or 1
        return float(self.demand[name] * weights.get(pool, 0) / total)

    async def read(self, queries: list[Query]) -> list[QueryResult]:
        self.queries_sent += len(queries)
        if self.down:
            return [QueryResult(q, error="connection refused (the outage)") for q in queries]
        out = []
        for q in queries:
            values: dict[PoolKey, float] = {}
            if q.signal is not Signal.LATENCY_IN_FLIGHT:  # too few finished requests: the gauges decide
                for name in self.demand:
                    for pool in ("speculative", "baseline"):
                        running = self._share(name, pool)
                        values[PoolKey(NS, name, pool)] = {
                            Signal.RUNNING: running, Signal.QUEUED: 0.0, Signal.FRESHNESS: self.now,
                            Signal.TOKENS: 40 * running, Signal.DECODE_TOKENS: 40 * running,
                        }.get(q.signal, 1.0)  # fmt: skip
            out.append(QueryResult(q, values, self.now))
        return out


def bench_writes(count: int, seconds: float, outage: float, seed: int) -> JSON:
    logging.getLogger("specserve").setLevel(logging.ERROR)  # an outage logs one line per SpecServe
    rng = random.Random(seed)
    names = [f"s{i}" for i in range(count)]
    registry = Objects()
    for name in names:
        registry.observe(soak_doc(name))
    kube = MemoryKube(registry, names)
    load = ScriptedLoad(registry, {n: float(rng.choice(SOAK_DEMANDS)) for n in names})
    change = {n: rng.uniform(15, 45) for n in names}
    triggered = [0]

    async def realise(item: ObjectState) -> None:
        # The reconcile: the route takes the target at once and status.weights says so.
        triggered[0] += 1
        weights = ((item.body.get("status") or {}).get("switching") or {}).get("weights")
        if weights is not None:
            item.observe({**item.body, "status": {**item.body["status"], "weights": weights}})

    start = 1_000_000.0
    clock = Clock(start)
    loop = SwitchingLoop(
        registry, kube, Readers(load), decide, realise,  # type: ignore[arg-type]
        LoopConfig(prometheus_url="http://prom:9090"), clock=clock,
    )  # fmt: skip
    down_from, down_to = seconds / 2, seconds / 2 + outage
    rows: list[tuple[float, int, int]] = []  # (time, loop writes, reconciles triggered)

    async def run() -> None:
        t = 0.0
        while t < seconds:
            for n in names:
                if t >= change[n]:
                    load.demand[n] = float(rng.choice(SOAK_DEMANDS))
                    change[n] = t + rng.uniform(15, 45)
            load.down = down_from <= t < down_to
            clock.t = load.now = start + t
            writes, fired = kube.writes, triggered[0]
            await loop.run_round()
            await loop.realised()
            rows.append((t, kube.writes - writes, triggered[0] - fired))
            t += 2.0

    asyncio.run(run())
    steady = [r for r in rows[30:] if not down_from - 2 <= r[0] < down_to + 8]  # start-up and outage left out
    around = [r for r in rows if down_from - 2 <= r[0] < down_to + 8]

    def q(values: list[int], p: float) -> int:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]

    result = {
        "specserves": count, "rounds": len(rows), "seed": seed,
        "writes_p50": statistics.median(r[1] for r in steady), "writes_p90": q([r[1] for r in steady], 0.9),
        "reconciles_p50": statistics.median(r[2] for r in steady),
        "writes_total": sum(r[1] for r in rows), "reconciles_total": sum(r[2] for r in rows),
        "outage_writes": sum(r[1] for r in around) - statistics.median(r[1] for r in steady) * len(around),
        "outage_rounds": [r[1] for r in around],
    }  # fmt: skip
    print(
        f"N={count} {len(rows)} rounds of 2 s (seed {seed}): loop status writes per round p50 {result['writes_p50']} "
        f"p90 {result['writes_p90']}, reconciles triggered p50 {result['reconciles_p50']}; total writes "
        f"{result['writes_total']}, reconciles {result['reconciles_total']}; a {outage:.0f} s outage: writes per "
        f"round around it {result['outage_rounds']} (~{result['outage_writes']:.0f} above the median)",
        flush=True,
    )
    return result


# ---------------------------------------------------------------------------------------------------- reaction


async def reaction_once(workdir: Path, interval: int, up: int, scrape: float) -> JSON:
    with emulators(2) as urls:
        name = "react"
        targets = [ScrapeTarget(urls[0], NS, name, "speculative"), ScrapeTarget(urls[1], NS, name, "baseline")]
        prom = Prometheus(workdir, targets, interval=scrape)
        prom.start()
        load = Load(urls[0])
        try:
            async with FakeApiServer(auto_ready=True) as api:
                api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
                kubeconfig = workdir / "kubeconfig"
                write_kubeconfig(kubeconfig, api.url)
                os.environ["KUBECONFIG"] = str(kubeconfig)
                kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(kubeconfig)
                stop = asyncio.Event()
                config = OperatorConfig(namespaces=(NS,), resync_seconds=30, prometheus_url=prom.url, post_events=False)
                task = asyncio.create_task(serve(config, KubeClient.from_environment(ClientOptions()), stop_flag=stop))
                body = doc(name, evaluationIntervalSeconds=interval, upStabilizationSeconds=up,
                           downStabilizationSeconds=0, minDwellSeconds=0, hysteresis=0.2)  # fmt: skip
                body["metadata"] = {"name": name, "namespace": NS}
                body["spec"]["monitoring"]["intervalSeconds"] = max(1, round(scrape))
                await load.set(1)
                api.create(body)

                def weight() -> int | None:
                    route = api.get(HTTPROUTES, NS, name)
                    if route is None:
                        return None
                    weights = {b["name"]: int(b["weight"]) for b in route["spec"]["rules"][0]["backendRefs"]}
                    return weights[f"{name}-spec"]

                deadline = time.monotonic() + 120
                while weight() != 100:  # settled at low load: all on speculative
                    assert time.monotonic() < deadline, f"never settled at low load: {weight()}"
                    await asyncio.sleep(0.05)
                await asyncio.sleep(2 * interval + 2 * scrape)  # let the smoothing window forget the start
                await load.set(24)
                step = time.monotonic()
                while weight() == 100:
                    assert time.monotonic() - step < 120, "the weight never moved"
                    await asyncio.sleep(0.02)
                reaction = time.monotonic() - step
                stop.set()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait_for(task, timeout=30)
        finally:
            await load.close()
            prom.stop()
    bound = interval + up + 2 * scrape
    return {"interval": interval, "up": up, "scrape": scrape, "reaction": reaction, "bound": bound}


def bench_reaction(settings: list[tuple[int, int, float]]) -> list[JSON]:
    rows = []
    for interval, up, scrape in settings:
        with tempfile.TemporaryDirectory() as tmp:
            row = asyncio.run(reaction_once(Path(tmp), interval, up, scrape))
        rows.append(row)
        print(
            f"interval {interval} s, up stabilization {up} s, scrape {scrape:g} s: reaction {row['reaction']:.2f} s "
            f"(bound {row['bound']:.1f} s)",
            flush=True,
        )
    return rows


# --------------------------------------------------------------------------------------------------------- rss


def _http(method: str, url: str, body: JSON | None = None) -> JSON:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        result: JSON = json.loads(response.read() or b"{}")
        return result


def _proc(pid: int) -> tuple[int, int, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(stat[11]) + int(stat[12])) / ticks
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0]), cpu


def operator_venv() -> str:
    """The interpreter of a venv holding specserve as the operator image installs it (no extras)."""
    venv = ROOT / ".cache" / "bench" / "operator-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"building {venv} (pip install ., as the operator image does)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(ROOT)], check=True)
    else:  # the source may have moved on since the venv was built
        reinstall = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(ROOT)]
        subprocess.run(reinstall, check=True)
    return str(python)


def bench_rss(count: int, steady_seconds: float, resync_seconds: float, operator_python: str) -> JSON:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        names = [f"s{i}" for i in range(count)]
        (work / "www").mkdir()
        (work / "www" / "metrics").write_text(exposition(names), encoding="utf-8")
        web_port, api_port = free_port(), free_port()
        web = serve_dir(work / "www", web_port)
        prom = Prometheus(work, [ScrapeTarget(f"http://127.0.0.1:{web_port}", NS, "ignored", "ignored")], interval=1.0)
        prom.config.write_text(
            prom.config.read_text().replace("- job_name: sglang\n", "- job_name: sglang\n  honor_labels: true\n")
        )
        kubeconfig = work / "kubeconfig"
        fake = subprocess.Popen(
            [sys.executable, "-m", "specserve_kubefake", "--port", str(api_port), "--auto-ready", "--namespace", NS,
             "--kubeconfig", str(kubeconfig)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        operator: subprocess.Popen[bytes] | None = None
        try:
            prom.start()
            base = f"http://127.0.0.1:{api_port}"
            for _ in range(100):
                try:
                    _http("GET", f"{base}/version")
                    break
                except OSError:
                    time.sleep(0.1)
            for name in names:
                body = copy.deepcopy(doc(name, evaluationIntervalSeconds=15))
                body["metadata"] = {"name": name, "namespace": NS}
                _http("POST", f"{base}/apis/specserve.io/v1alpha1/namespaces/{NS}/specserves", body)
            env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
            operator = subprocess.Popen(
                [operator_python, "-m", "specserve.cli", "run", "-n", NS, "--prometheus-url", prom.url,
                 "--log-level", "warning", "--resync-seconds", str(resync_seconds)],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            started = time.monotonic()
            while True:
                items = _http("GET", f"{base}/apis/specserve.io/v1alpha1/namespaces/{NS}/specserves")["items"]
                done = sum(1 for i in items if (i.get("status") or {}).get("switching"))
                if done == count:
                    break
                assert operator.poll() is None, "the operator exited"
                assert time.monotonic() - started < 600, f"only {done}/{count} evaluated"
                time.sleep(1)
            evaluated_after = time.monotonic() - started
            rss, _, cpu0 = _proc(operator.pid)
            time.sleep(steady_seconds)
            rss2, hwm2, cpu1 = _proc(operator.pid)
            row = {
                "specserves": count,
                "all_evaluated_seconds": evaluated_after,
                "rss_mb": rss / 1024,
                "rss_after_steady_mb": rss2 / 1024,
                "hwm_mb": hwm2 / 1024,
                "steady_cpu_seconds": cpu1 - cpu0,
                "steady_seconds": steady_seconds,
                "resync_seconds": resync_seconds,
                "operator_python": operator_python,
            }
            print(
                f"{count} SpecServes: all evaluated after {evaluated_after:.0f} s; RSS {rss / 1024:.0f} MB, after "
                f"{steady_seconds:.0f} s steady {rss2 / 1024:.0f} MB (peak {hwm2 / 1024:.0f} MB); steady CPU "
                f"{cpu1 - cpu0:.1f} s in {steady_seconds:.0f} s (resync every {resync_seconds:g} s)",
                flush=True,
            )
            return row
        finally:
            if operator is not None:
                operator.terminate()
                operator.wait(timeout=30)
            fake.terminate()
            prom.stop()
            web.terminate()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["round", "reaction", "rss", "writes", "all"])
    parser.add_argument("--sizes", default="1,20,200", help="round: SpecServe counts (default 1,20,200)")
    parser.add_argument("--count", type=int, default=200, help="rss: SpecServes (default 200)")
    parser.add_argument("--steady-seconds", type=float, default=60.0, help="rss: steady window (default 60)")
    parser.add_argument(
        "--resync-seconds", type=float, default=30.0, help="rss: the operator's resync (default 30, as deployed)"
    )
    parser.add_argument("--operator-python", help="rss: run the operator with this interpreter (default: see above)")
    parser.add_argument("--seconds", type=float, default=300.0, help="writes: simulated seconds (default 300)")
    parser.add_argument("--outage-seconds", type=float, default=20.0, help="writes: the outage (default 20)")
    parser.add_argument("--seed", type=int, default=1, help="writes: the demand's seed (default 1)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    out: JSON = {}
    if args.what in ("round", "all"):
        out["round"] = bench_round([int(s) for s in args.sizes.split(",")])
    if args.what in ("writes", "all"):
        out["writes"] = bench_writes(args.count, args.seconds, args.outage_seconds, args.seed)
    if args.what in ("reaction", "all"):
        out["reaction"] = bench_reaction([(1, 0, 1.0), (5, 0, 1.0), (2, 3, 1.0)])
    if args.what in ("rss", "all"):
        python = args.operator_python or operator_venv()
        out["rss"] = bench_rss(args.count, args.steady_seconds, args.resync_seconds, python)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")
    _ = Windows  # the query windows the round uses come from each SpecServe's interval (metrics.promql.Windows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

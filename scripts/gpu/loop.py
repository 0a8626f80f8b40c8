"""The loop on real engines: the real operator (`specserve run`) steering real SGLang pools through the demo's
HAProxy gateway, measured against static choices on the same load (docs/real-engine.md, "The loop on real engines").

usage (on the GPU machine, started by scripts/gpu/run_loop.sh once it has unpacked SGLang and the deps):
    python3 loop.py --out DIR [--policies specserve,baseline,speculative,split] [--curves CURVES.json]
                    [--ramp-seconds S] [--peak N] [--deadline S] [--restart [--restart-high N]]
On a CPU machine, with the emulator standing in for SGLang (the CI test, tests/e2e/test_gpu_loop.py):
    FAKE_ENGINE=<emulator profile> python3 loop.py --out DIR --ramp-seconds 20 --peak 24

What runs: the fake Kubernetes API (specserve_kubefake), the operator (`specserve run`, this checkout), the
demo's kubelet starting each rendered pod as a real `sglang.launch_server` process (every change to the rendered
container recorded per pod under `pods`), the demo's HAProxy gateway programmed from the operator's HTTPRoute,
and closed-loop clients. The SpecServe is examples/llama31-8b-h200.yaml made a TrafficSplit of a plain pool and
an NGRAM pool (4 draft tokens) on one GPU, reading its load signals with the Direct source (the operator scrapes
each Ready Pod's /metrics at podIP:30000; each pod gets a loopback address of its own, 127.0.x.y, as its IP).

Steps: both pools Ready -> calibrate as a user would (`specserve bench` on each pod, `specserve calibrate
--write`, the curves applied to the SpecServe) unless --curves gives them -> for each policy the same load
schedule: a ramp of greedy clients 1 -> peak -> 1, then a drift ramp with half of the requests sampled
(temperature 0.7). Policy `specserve` lets the gateway follow the HTTPRoute; the static ones pin the gateway's
weights (all baseline, all speculative, or the calibrated static split: the fixed share that serves the most
tokens over the schedule's demand by the calibrated curves) while the operator keeps running. With --restart, then
the Restart run (run_restart): one NGRAM pool restarted into plain under high load and back under low load.
Writes DIR/loop.json (everything, rewritten after every step), DIR/loop.png and DIR/restart.png (timelines).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from real_engine import set_flag  # the same recorded substitutions as the real-engine driver (a sibling script)

from specserve.kube.kinds import HTTPROUTE, POD, SPECSERVE
from specserve_tools.bench.client import sse_objects
from specserve_tools.bench.sweep import output_tokens
from specserve_tools.demo import cluster
from specserve_tools.demo.gateway import start_gateway
from specserve_tools.demo.kubeapi import ApiError, DemoApi
from specserve_tools.demo.kubelet import Kubelet, Launch, free_port
from specserve_tools.demo.podargs import emulator_argv
from specserve_tools.demo.procs import Supervisor, step
from specserve_tools.demo.rollout import Phase as PodPhase
from specserve_tools.demo.scenario import NAME, NAMESPACE
from specserve_tools.demo.wiring import NAMESPACES, Demo, Options, gateway_answers

MODEL = "/tmp/model"
ENGINE_PORT = 30000
# SGLang logs this once it has taken its GPU memory: the next pod on the same GPU may start.
MEMORY_TAKEN = r"KV Cache is allocated|Capture cuda graph begin"
MEM_FRACTIONS = (0.40, 0.82)  # cumulative, in start order: SGLang's fraction is of the whole GPU
TEMPERATURE_SAMPLED = 0.7
MAX_TOKENS = 128  # the mean output of the live load's requests, and each of the calibration bench's
# The live load's lengths spread +-this fraction around MAX_TOKENS (bench's output_tokens), as does the bench sweep
# recorded beside the calibration: with equal lengths the engine's batch advances in lockstep, so the closed loop's
# requests complete in waves of up to 128 at once and a stage counts a whole number of them (+-15 % between runs
# of identical routing; docs/real-engine.md, tenth session).
LENGTH_SPREAD = 0.5
TPOT_SLO = 0.05  # goodput counts the tokens of requests whose TPOT met this (50 ms)
POLICIES = ("specserve", "baseline", "speculative", "split")
# What `specserve calibrate --write` sets and the loop carries between runs (--curves): the accept length the
# speculative curve was measured at too, without which the operator takes its reference from live readings (the
# sixth session's sampled half left it at 1.53 against the bench's 3.98).
CALIBRATED = ("curves", "crossoverConcurrency", "initialMode", "calibratedAcceptLength")
# What a user may tune, set for phases of tens of seconds (docs/real-engine.md, "The loop on real engines"): an
# evaluation every 2 s, moves towards speculation after 2 s (not the default 60), the dominant pool may change
# every 2 s, and a weight change costs nothing (HAProxy's weights change in place, no reload).
SWITCHING = {
    "evaluationIntervalSeconds": 2,
    "upStabilizationSeconds": 0,
    "downStabilizationSeconds": 2,
    "minDwellSeconds": 2,
    "hysteresis": 0.1,
    "weightChangeCost": 0,
}
# Restart: each switch restarts a pod (tens of seconds on the GPU), so dwell and stabilization stay longer than a
# weight move's, short against the phases; the day's budget covers the run.
RESTART_SWITCHING = {"downStabilizationSeconds": 6, "minDwellSeconds": 10, "maxRestartsPerDay": 20}
PROMPT = "Explain speculative decoding to a new engineer, step by step, with an example."
T0 = time.monotonic()


def log(*parts: object) -> None:
    print(f"[{time.monotonic() - T0:7.1f}s]", *parts, flush=True)


# ------------------------------------------------------------------------------------------------ the SpecServe


def specserve_doc(example: Path, curves: dict[str, Any] | None, gpu_sharing: str = "Shared") -> dict[str, Any]:
    """The example made the loop's SpecServe: NGRAM-4 vs plain, TrafficSplit, Direct metrics, fast knobs; both
    pools' pods on the one GPU, declared as such (placement.gpuSharing Shared: a split serves less than either
    pool alone there, measured in the second session)."""
    doc: dict[str, Any] = yaml.safe_load(example.read_text())
    doc["metadata"] = {"name": NAME, "namespace": NAMESPACE}
    spec = doc["spec"]
    spec["placement"] = {**(spec.get("placement") or {}), "gpuSharing": gpu_sharing}
    spec["speculative"] = {"algorithm": "NGRAM", "numDraftTokens": 4}
    spec["engine"]["maxRunningRequests"] = 128
    spec["engine"]["startupTimeoutSeconds"] = 600
    spec["routing"] = {"gateway": {"name": "demo-gateway"}}
    # The Direct source smooths gauges over 2x and rates over 4x this interval (metrics.promql.Windows): at the
    # default 15 s its demand reading lagged the load by 20-30 s, longer than a phase. The operator scrapes every
    # evaluation, so the interval of the evaluations is the one to give.
    spec["monitoring"] = {**(spec.get("monitoring") or {}), "intervalSeconds": SWITCHING["evaluationIntervalSeconds"]}
    spec["switching"] = {
        "metrics": {"source": "Direct"},
        **SWITCHING,
        **(curves or {}),
    }
    return doc


def restart_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """The loop's SpecServe made a Restart one: one NGRAM pod that the operator restarts into plain and back. The
    GPU holds two pods (the TrafficSplit pools), so a restart starts the new pod beside the old one (maxSurge 1: a
    declared spare slot) and no request is refused; the operator prices that at its surge floor of the measured
    start-up (policy.restart)."""
    out: dict[str, Any] = json.loads(json.dumps(doc))
    spec = out["spec"]
    spec["strategy"] = "Restart"
    spec["pools"] = {"speculative": {"replicas": 1, "maxSurge": 1}, "baseline": {"replicas": 0}}
    spec["switching"].update(RESTART_SWITCHING)
    spec["switching"].pop("weightChangeCost", None)
    return out


# ------------------------------------------------------------------------------------------------ the pods


@dataclass
class SglangLauncher:
    """The kubelet's launcher: the rendered container as a real SGLang process (or, with `fake`, the emulator),
    each pod on a loopback address of its own, started once the previous pod took its GPU memory."""

    log_dir: Path
    fake: str | None  # an emulator profile: the CI's stand-in for SGLang
    subnet: str
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    previous: str | None = None
    # pods holding the GPU now (the kubelet's, terminating ones too); set once the kubelet exists
    on_gpu: Callable[[], int] = lambda: 0

    async def _wait_previous(self) -> None:
        if self.previous is None or self.fake:
            return
        path = self.log_dir / f"pod-{self.previous}.log"
        end = time.monotonic() + 300
        while time.monotonic() < end:
            text = path.read_text(errors="replace") if path.exists() else ""
            if re.search(MEMORY_TAKEN, text) or "Traceback" in text:
                return
            await asyncio.sleep(1)

    async def __call__(self, name: str, container: dict[str, Any], mounts: dict[str, str]) -> Launch:
        await self._wait_previous()
        index = len(self.records)
        host = f"{self.subnet}.{index + 2}"
        subst: list[str] = []
        args = list(container.get("args") or [])
        port = int(args[args.index("--port") + 1]) if "--port" in args else ENGINE_PORT
        args = set_flag(args, "--model-path", MODEL, subst, "no weights can be downloaded: 8B-shaped config")
        args = set_flag(args, "--load-format", "dummy", subst, "dummy weights: real compute, no checkpoint")
        args = set_flag(args, "--attention-backend", "triton", subst, "the offline overlay has no FlashAttention-3")
        args = set_flag(args, "--sampling-backend", "pytorch", subst, "as the overlay is known to run")
        args = set_flag(args, "--cuda-graph-backend-prefill", "disabled", subst,
                        "no prefill CUDA graph capture (~40 s of each start): every pod and policy alike")  # fmt: skip
        args = set_flag(args, "--host", host, subst, "one machine: each pod its own loopback address (its pod IP)")
        # the first pod on an empty GPU takes the lower fraction, any other the upper (SGLang's fraction is of the
        # whole GPU: the upper one leaves the first's share to it), so a restarted pod fits beside the one left
        fraction = MEM_FRACTIONS[0] if self.on_gpu() == 0 else MEM_FRACTIONS[1]
        args = set_flag(args, "--mem-fraction-static", f"{fraction:g}", subst, "two pods share one GPU (cumulative)")
        for src, dst in mounts.items():
            args = [dst + a[len(src) :] if a.startswith(src) else a for a in args]
            subst.append(f"ConfigMap mount {src} -> {dst}: the kubelet's volume")
        env: dict[str, str] = {}
        for e in container.get("env") or []:
            if "value" in e:
                env[e["name"]] = "/tmp/hf-home" if e["name"] == "HF_HOME" else str(e["value"])
                if e["name"] == "HF_HOME":
                    subst.append("env HF_HOME -> /tmp/hf-home: no model cache volume")
            else:
                subst.append(f"env {e['name']} (from a Secret) dropped: nothing is downloaded")
        command = list(container.get("command") or [])
        if command[:1] == ["python3"]:
            command[0] = sys.executable
            subst.append(f"command python3 -> {sys.executable}: the image's Python with the overlay on PYTHONPATH")
        argv = command + args
        if self.fake:
            argv = emulator_argv(args, port, self.fake, 2.0)
            argv[argv.index("--host") + 1] = host
            subst.append(f"FAKE_ENGINE: the emulator (profile {self.fake}) instead of SGLang")
        self.records[name] = {"pod": name, "host": host, "port": port, "argv": argv, "substituted": subst,
                              "launched_s": round(time.monotonic() - T0, 1)}  # fmt: skip
        self.previous = name
        log(f"launch {name}: {' '.join(argv)}")
        return Launch(argv, host, port, env)


def wall(mono: float) -> str:
    """A time.monotonic() reading as the API's timestamp (RFC 3339, UTC, milliseconds)."""
    at = time.time() - (time.monotonic() - mono)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1000):03d}Z"


def pod_doc(name: str, labels: dict[str, str], host: str, started: float, ready_at: float | None) -> dict[str, Any]:
    """The Pod object the kubelet reports for a running pod: what the operator's Direct source lists, with the
    engine container's start and the Ready transition, from which the operator measures a restart's cost
    (metrics.startup)."""
    ready = ready_at is not None
    cond = {"type": "Ready", "status": "True" if ready else "False",
            "lastTransitionTime": wall(ready_at if ready_at is not None else started)}  # fmt: skip
    engine = {"name": "sglang", "ready": ready, "restartCount": 0, "state": {"running": {"startedAt": wall(started)}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {"containers": [{"name": "sglang", "image": "lmsysorg/sglang:v0.5.17"}]},
        "status": {"phase": "Running", "podIP": host, "conditions": [cond], "containerStatuses": [engine]},
    }


async def mirror_pods(api: DemoApi, kubelet: Kubelet, stop: asyncio.Event) -> None:
    """Keep a Pod object per kubelet pod (Ready or not) in the API: the Direct source lists them."""
    known: dict[str, bool] = {}
    while not stop.is_set():
        try:
            live = {p.name: p for p in kubelet.pods.values() if p.phase != PodPhase.TERMINATING}
            for name in set(known) - set(live):
                with contextlib.suppress(ApiError):
                    await api.delete(POD, NAMESPACE, name)
                known.pop(name)
            for name, pod in live.items():
                ready = pod.phase == PodPhase.READY
                doc = pod_doc(name, pod.labels, pod.host, pod.started, pod.ready_at if ready else None)
                if name not in known:
                    await api.create(POD, NAMESPACE, doc)
                    await api.patch_status(POD, NAMESPACE, name, doc["status"])
                elif known[name] != ready:
                    await api.patch_status(POD, NAMESPACE, name, doc["status"])
                known[name] = ready
        except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
            log(f"pod mirror: {exc}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=0.5)


# ------------------------------------------------------------------------------------------------ the load


@dataclass(frozen=True)
class Stage:
    """A stretch of the schedule: clients in flight go linearly from `start` to `end`; `sampled` of the
    requests are sampled (temperature TEMPERATURE_SAMPLED), the rest greedy."""

    name: str
    seconds: float
    start: float
    end: float
    sampled: float = 0.0


# The shape of each half (fractions of it): a long stretch at 1 and at 8 in flight (where NGRAM-4 serves 2-2.5x),
# the rise to the peak, the peak, the fall and 1 in flight again. Each phase lasts many evaluation intervals.
SHAPE = (("low", 1, 1, 0.15), ("mid", 8, 8, 0.15), ("rise", 8, None, 0.15), ("peak", None, None, 0.25),
         ("fall", None, 1, 0.15), ("low2", 1, 1, 0.15))  # fmt: skip


def schedule(ramp_seconds: float, peak: int) -> list[Stage]:
    """The ramp 1 -> peak -> 1 of greedy clients, then the same demand with half of the requests sampled."""
    stages = []
    for prefix, sampled in (("ramp", 0.0), ("drift", 0.5)):
        for name, a, b, frac in SHAPE:
            start, end = peak if a is None else a, peak if b is None else b
            stages.append(Stage(f"{prefix}-{name}", ramp_seconds * frac, start, end, sampled))
    return stages


def demand_at(stages: list[Stage], t: float) -> tuple[Stage, float]:
    """The stage and the clients in flight wanted `t` seconds into the schedule (the last stage after it)."""
    for s in stages:
        if t < s.seconds:
            return s, s.start + (s.end - s.start) * t / s.seconds
        t -= s.seconds
    return stages[-1], stages[-1].end


@dataclass
class Request:
    stage: str
    sampled: bool
    start: float
    first: float | None = None
    last: float | None = None
    end: float | None = None
    tokens: int = 0
    server: str = ""
    error: str | None = None
    max_tokens: int = MAX_TOKENS

    @property
    def tpot(self) -> float | None:
        if self.first is None or self.last is None or self.tokens < 2:
            return None
        return (self.last - self.first) / (self.tokens - 1)


async def one_request(session: aiohttp.ClientSession, url: str, model: str, rec: Request) -> None:
    body = {
        "model": model,
        "prompt": PROMPT,
        "max_tokens": rec.max_tokens,
        "ignore_eos": True,
        "temperature": TEMPERATURE_SAMPLED if rec.sampled else 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    try:
        async with session.post(url + "/v1/completions", json=body) as resp:
            rec.server = resp.headers.get("X-Specserve-Server", "")
            if resp.status != 200:
                rec.error = f"HTTP {resp.status}: {(await resp.text())[:160]}"
                return
            async for obj in sse_objects(resp.content):
                if not isinstance(obj, dict):
                    continue
                usage = obj.get("usage")
                if isinstance(usage, dict) and usage.get("completion_tokens"):
                    rec.tokens = int(usage["completion_tokens"])
                if any((c.get("text") or "") for c in obj.get("choices") or []):
                    now = time.monotonic()
                    rec.first = rec.first or now
                    rec.last = now
        rec.end = time.monotonic()
        if rec.first is None:
            rec.error = "stream ended without a token"
    except (aiohttp.ClientError, TimeoutError, json.JSONDecodeError) as exc:
        rec.error = f"{type(exc).__name__}: {exc}"[:160]


Want = Callable[[float], tuple[Stage, float]]  # seconds into the run -> the stage and the clients wanted


async def run_schedule(
    url: str, model: str, stages: list[Stage], on_second: Callable[[float, str, float, int], Any],
    want: Want | None = None, done: Callable[[float], bool] | None = None,
) -> tuple[list[Request], float]:  # fmt: skip
    """Closed-loop clients through the gateway following `stages` (or `want`, until `done`); `on_second(t, stage,
    wanted, in_flight)` each second. Requests in flight at the end finish and count."""
    records: list[Request] = []
    rng = random.Random(7)  # the same greedy/sampled sequence for every policy
    issued = itertools.count()  # the n-th request's length is output_tokens(..., n): the same in every run
    t0 = time.monotonic()
    total = sum(s.seconds for s in stages)
    peak = int(max(max(s.start, s.end) for s in stages))
    in_flight = 0
    stop = asyncio.Event()
    wanted_at: Want = want or (lambda t: demand_at(stages, t))
    finished: Callable[[float], bool] = done or (lambda t: t >= total)

    async def client(i: int, session: aiohttp.ClientSession) -> None:
        nonlocal in_flight
        while not stop.is_set():
            stage, wanted = wanted_at(time.monotonic() - t0)
            if i >= round(wanted):
                await asyncio.sleep(0.1)
                continue
            rec = Request(stage.name, rng.random() < stage.sampled, time.monotonic() - t0,
                          max_tokens=output_tokens(MAX_TOKENS, LENGTH_SPREAD, next(issued)))  # fmt: skip
            in_flight += 1
            try:
                await one_request(session, url, model, rec)
            finally:
                in_flight -= 1
            for attr in ("first", "last", "end"):
                value = getattr(rec, attr)
                if value is not None:
                    setattr(rec, attr, value - t0)
            records.append(rec)
            if rec.error:
                await asyncio.sleep(0.2)

    timeout = aiohttp.ClientTimeout(total=120, sock_read=60)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:
        tasks = [asyncio.create_task(client(i, session)) for i in range(peak)]
        while not finished(t := time.monotonic() - t0):
            stage, wanted = wanted_at(t)
            await on_second(t, stage.name, wanted, in_flight)
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - t0 - t)))
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    return records, time.monotonic() - t0


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pool_of_server(server: str) -> str:
    """The pool a request went to, from the gateway's X-Specserve-Server header (TrafficSplit: the pool's name)."""
    return "speculative" if "-spec-" in server else "baseline" if "-base-" in server else "?"


def phase_table(
    records: list[Request], stages: list[Stage], pool_of: Callable[[str], str] = pool_of_server
) -> dict[str, dict[str, Any]]:
    """Per stage (and per half: ramp, drift, all): requests, failures, tokens, tokens/s, goodput, TPOT p50/p99,
    and the requests each pool served. A request belongs to the stage it started in."""
    groups: dict[str, list[Stage]] = {s.name: [s] for s in stages}
    for prefix in dict.fromkeys(s.name.split("-")[0] for s in stages):  # ramp, drift (restart)
        groups[prefix] = [s for s in stages if s.name.split("-")[0] == prefix]
    groups["all"] = list(stages)
    out = {}
    for name, members in groups.items():
        names = {s.name for s in members}
        seconds = sum(s.seconds for s in members)
        recs = [r for r in records if r.stage in names]
        ok = [r for r in recs if r.error is None]
        tpots = [t for r in ok if (t := r.tpot) is not None]
        tokens = sum(r.tokens for r in ok)
        good = sum(r.tokens for r in ok if (r.tpot or 0.0) <= TPOT_SLO)
        servers: dict[str, int] = {}
        for r in ok:
            pool = pool_of(r.server)
            servers[pool] = servers.get(pool, 0) + 1
        p50, p99 = percentile(tpots, 0.5), percentile(tpots, 0.99)
        out[name] = {
            "seconds": round(seconds, 1),
            "requests": len(recs),
            "failed": len(recs) - len(ok),
            "tokens": tokens,
            "tokens_per_s": round(tokens / seconds, 1) if seconds else None,
            "goodput_tokens_per_s": round(good / seconds, 1) if seconds else None,
            "tpot_p50_ms": round(p50 * 1000, 2) if p50 is not None else None,
            "tpot_p99_ms": round(p99 * 1000, 2) if p99 is not None else None,
            "served_by": servers,
        }
    return out


WARM_BATCHES = (1, 8, 32, 96, 128)


async def warm_up(hosts: dict[str, str], model: str, batches: tuple[int, ...] = WARM_BATCHES) -> dict[str, float]:
    """Greedy and sampled requests to each pod at several batch sizes before anything is measured: SGLang compiles
    kernels on first use per shape (the first sampled request to the NGRAM pod stalled its scheduler ~100 s on a
    cold JIT cache; the first policy measured on fresh pods met compiles the later ones did not)."""
    timeout = aiohttp.ClientTimeout(total=300)

    async def one_pod(session: aiohttp.ClientSession, host: str) -> float:
        t = time.monotonic()
        for n in batches:
            for mixed in (False, True):
                recs = [Request("warmup", mixed and i % 2 == 1, 0.0) for i in range(n)]
                await asyncio.gather(*(one_request(session, f"http://{host}:{ENGINE_PORT}", model, r) for r in recs))
        return round(time.monotonic() - t, 1)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:
        took = await asyncio.gather(*(one_pod(session, host) for host in hosts.values()))
    return dict(zip(hosts, took, strict=True))


# ------------------------------------------------------------------------------------------------ calibration


def curve_at(points: list[tuple[float, float]], c: float) -> float:
    """Tokens/s at concurrency c by linear interpolation (0 at 0, flat past the last point)."""
    if c <= 0 or not points:
        return 0.0
    xs = [p[0] for p in points]
    i = bisect.bisect_left(xs, c)
    if i == 0:
        return points[0][1] * c / points[0][0]
    if i >= len(points):
        return points[-1][1]
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (c - x0) / (x1 - x0)


def static_split(curves: dict[str, Any], stages: list[Stage]) -> int:
    """The fixed speculative weight (0-100, steps of 5) that serves the most tokens over the schedule's demand
    by the calibrated curves (a pool's clients are the weight's share of those in flight)."""
    spec = [(p["concurrency"], p["tokensPerSecond"]) for p in curves["curves"]["speculative"]]
    base = [(p["concurrency"], p["tokensPerSecond"]) for p in curves["curves"]["baseline"]]
    total = sum(s.seconds for s in stages)
    demands = [demand_at(stages, t + 0.5)[1] for t in range(int(total))]

    def served(w: int) -> float:
        return sum(curve_at(spec, d * w / 100) + curve_at(base, d * (100 - w) / 100) for d in demands)

    return max(range(0, 101, 5), key=served)


async def calibrate(hosts: dict[str, str], doc: dict[str, Any], out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """`specserve bench` on each pool's pod, then `specserve calibrate --write` on the SpecServe file: the
    switching fields it wrote (curves, crossover, initial mode). Falls back to the bench's curves if calibrate
    cannot run here (recorded)."""
    bench_dir = out / "bench"
    bench_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {}
    # The calibration is bench's fixed-length (lockstep) sweep: on the H200 it matched the live clients within
    # 5-12 % at 128 in flight (third session), while spread output lengths read 30-50 % lower from 64 up. The
    # spread sweep runs after it, for the record only.
    for name, spread in (("", 0.0), ("-spread", LENGTH_SPREAD)):
        for role, host in hosts.items():
            argv = [sys.executable, "-m", "specserve_tools", "bench", "--url", f"http://{host}:{ENGINE_PORT}",
                    "--levels", "1,4,16,64,128", "--max-tokens", str(MAX_TOKENS), "--ignore-eos", "--api",
                    "completions", "--repeats", "1", "--length-spread", str(spread), "--label", role, "--name",
                    role + name, "--output-dir", str(bench_dir), "--no-plot", "--quiet"]  # fmt: skip
            t = time.monotonic()
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
            record[f"bench{name}_{role}"] = {"argv": argv, "rc": proc.returncode,
                                             "seconds": round(time.monotonic() - t, 1),
                                             "stderr": proc.stderr[-2000:],
                                             "curve": bench_points(bench_dir / f"{role}{name}.json")
                                             if proc.returncode == 0 else None}  # fmt: skip
            log(f"bench{name} {role}: rc {proc.returncode} in {time.monotonic() - t:.0f} s")
    files = {role: bench_dir / f"{role}.json" for role in hosts}
    spec_file = out / "specserve-calibrated.yaml"
    spec_file.write_text(yaml.safe_dump(doc))
    argv = [sys.executable, "-m", "specserve_tools", "calibrate", str(files["speculative"]), str(files["baseline"]),
            "--write", str(spec_file)]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    record["calibrate"] = {"argv": argv, "rc": proc.returncode, "stdout": proc.stdout[-3000:],
                           "stderr": proc.stderr[-2000:]}  # fmt: skip
    switching: dict[str, Any] = {}
    if proc.returncode == 0:
        written = yaml.safe_load(spec_file.read_text())["spec"]["switching"]
        switching = {k: written[k] for k in CALIBRATED if k in written}
    else:
        switching = {"curves": {role: bench_points(files[role]) for role in ("speculative", "baseline")}}
        record["calibrate"]["fallback"] = "curves straight from the bench results (calibrate failed here)"
    return switching, record


def bench_points(path: Path) -> list[dict[str, float]]:
    data = json.loads(path.read_text())
    levels = data.get("levels") or data.get("results") or []
    points = []
    for lv in levels:
        c = lv.get("concurrency") or lv.get("level")
        tps = lv.get("output_tokens_per_s")
        if c and tps:
            points.append({"concurrency": float(c), "tokensPerSecond": round(float(tps), 1)})
    return points


# ------------------------------------------------------------------------------------------------ the run


@dataclass
class Result:
    started: str = field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    engine: str = "sglang"
    schedule: list[dict[str, Any]] = field(default_factory=list)
    pods: dict[str, Any] = field(default_factory=dict)
    ready_s: dict[str, float] = field(default_factory=dict)
    warmup_s: dict[str, float] = field(default_factory=dict)
    calibration: dict[str, Any] = field(default_factory=dict)
    switching: dict[str, Any] = field(default_factory=dict)
    policies: dict[str, Any] = field(default_factory=dict)
    restart: dict[str, Any] = field(default_factory=dict)
    not_run: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def role_weights(route: dict[str, int]) -> dict[str, int]:
    return {("speculative" if k.endswith("-spec") else "baseline"): v for k, v in route.items()}


async def read_status(api: DemoApi) -> dict[str, Any]:
    obj = await api.get(SPECSERVE, NAMESPACE, NAME) or {}
    status: dict[str, Any] = obj.get("status") or {}
    return status


def learning_row(status: dict[str, Any]) -> dict[str, Any]:
    """What the policy decided with, every 2 s: the sixth session could not tell why the weights stayed on NGRAM
    for most of a sampled half, because only the decisions were kept (status.learning is written every few
    evaluations; its accept length and crossover are the decision's inputs)."""
    learning = status.get("learning") or {}
    drift: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "CurveDrift"), {})
    return {
        "acceptLength": learning.get("acceptLength"),
        "acceptLengthReference": learning.get("acceptLengthReference"),
        "crossover": learning.get("crossover"),
        "lastUpdate": learning.get("lastUpdate"),
        "curveDrift": f"{drift.get('status')}/{drift.get('reason')}" if drift else None,
        "lastEvaluation": (status.get("switching") or {}).get("lastEvaluation"),
    }


async def run_policy(demo: Demo, api: DemoApi, policy: str, pin: dict[str, int] | None, stages: list[Stage],
                     model: str) -> dict[str, Any]:  # fmt: skip
    assert demo.gateway is not None
    demo.pinned = pin
    if pin is not None:
        demo.route = pin
        await demo.gateway.sync(pin, demo.endpoints)
    else:  # follow the route again at once
        demo.route = {}
    timeline: list[dict[str, Any]] = []
    # status.history is bounded: this policy's decisions are those stamped after it started
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())

    async def on_second(t: float, stage: str, wanted: float, in_flight: int) -> None:
        row: dict[str, Any] = {"t": round(t, 1), "stage": stage, "wanted": round(wanted, 1), "in_flight": in_flight,
                               "weights": role_weights(demo.route)}  # fmt: skip
        if int(t) % 2 == 0:
            with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
                status = await read_status(api)
                row["mode"] = status.get("activeMode")
                row["load"] = status.get("load")
                row["learning"] = learning_row(status)
        timeline.append(row)

    log(f"policy {policy}: pin {pin}")
    records, wall = await run_schedule(demo.gateway.url, model, stages, on_second)
    status = await read_status(api)
    table = phase_table(records, stages)
    log(f"policy {policy}: {json.dumps(table['all'])}")
    return {
        "pin": pin,
        "wall_s": round(wall, 1),
        "phases": table,
        "timeline": timeline,
        "history": [h for h in status.get("history") or [] if str(h.get("time", "")) >= started],
        "status": status,
        "requests": [asdict(r) for r in records],
    }


async def forget_learning(api: DemoApi, interval: float = SWITCHING["evaluationIntervalSeconds"]) -> dict[str, Any]:
    """Each SpecServe run on fresh learning, as a user would start it over: status.learning removed (the loop then
    starts from the calibrated curves, docs/learning.md). The static runs before it taught the curves and the
    accept length their own traffic (the sixth session's machine A decided a whole run on an all-speculative
    run's sampled accept length). Removed twice, two evaluations apart: a round that read status before the first
    patch may write what it remembered once more. Returns what was removed (its lastUpdate and accept length)."""
    before = (await read_status(api)).get("learning") or {}
    for _ in range(2):
        await api.patch_status(SPECSERVE, NAMESPACE, NAME, {"learning": None})
        await asyncio.sleep(2 * interval)
    return {"lastUpdate": before.get("lastUpdate"), "acceptLength": before.get("acceptLength"),
            "crossover": before.get("crossover")}  # fmt: skip


async def wait_ready(demo: Demo, api: DemoApi, timeout: float, pods: int = 2) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        demo.check()
        route = await api.get(HTTPROUTE, NAMESPACE, NAME)
        enough = len(demo.endpoints) >= pods
        if enough and route and demo.gateway and await gateway_answers(demo.session, demo.gateway.url):
            return
        await asyncio.sleep(1)
    raise RuntimeError(f"pools not Ready within {timeout:g} s (endpoints {len(demo.endpoints)})")


def pool_hosts(kubelet: Kubelet) -> dict[str, str]:
    return {p.labels.get("specserve.io/pool", "?"): p.host for p in kubelet.pods.values()}


def stage_record(stage: str, since: float, t: float, restarted_at: float | None) -> dict[str, Any]:
    return {"stage": stage, "from_s": round(since, 1), "to_s": round(t, 1), "restarted_at_s": restarted_at,
            "restarted": restarted_at is not None}  # fmt: skip


@dataclass
class RestartLoad:
    """The Restart run's demand, moved by what the operator does: `high` greedy clients until the NGRAM pool was
    restarted into plain and the plain pod served `settle` seconds, then 1 client until it was restarted back
    into NGRAM and served `settle` seconds. Each stage ends after `bound` seconds without its restart; the run
    ends by `until` (seconds into it) whatever happened."""

    high: int
    settle: float
    bound: float
    until: float
    stage: str = "restart-high"
    since: float = 0.0  # when this stage began (seconds into the run)
    restarted_at: float | None = None  # when this stage's restart completed (its new pod serving alone)
    over: bool = False
    stages: list[dict[str, Any]] = field(default_factory=list)  # what happened per stage

    def want(self, t: float) -> tuple[Stage, float]:
        clients = self.high if self.stage == "restart-high" else 1
        return Stage(self.stage, 0.0, clients, clients), float(clients)

    def done(self, t: float) -> bool:
        return self.over or t >= self.until

    def observe(self, t: float, mode: str | None, alone: str | None) -> None:
        """One reading: the status' mode, and the mode of the one pod when it serves alone (its argv's)."""
        target = "Baseline" if self.stage == "restart-high" else "Speculative"
        if self.restarted_at is None and mode == target and alone == target.lower():
            self.restarted_at = t
        settled = self.restarted_at is not None and t - self.restarted_at >= self.settle
        if not settled and t - self.since < self.bound:
            return
        self.stages.append(stage_record(self.stage, self.since, t, self.restarted_at))
        if self.stage == "restart-high":
            self.stage, self.since, self.restarted_at = "restart-low", t, None
        else:
            self.over = True


async def run_restart(  # noqa: PLR0915
    demo: Demo, api: DemoApi, launcher: SglangLauncher, doc: dict[str, Any], model: str, args: argparse.Namespace,
    deadline: float, out: dict[str, Any], save: Callable[[], None],
) -> None:  # fmt: skip
    """Restart on real engines: the TrafficSplit SpecServe (if any) goes with its pods, a Restart SpecServe with
    one NGRAM pod comes, sustained high load until the operator restarts it into plain, then low load until it
    restarts it back. Records the pods' start-ups (what the operator prices a restart at), the timeline of mode
    and pods, the decision history (the ski-rental numbers) and the requests per stage."""
    assert demo.kubelet is not None and demo.gateway is not None
    kubelet = demo.kubelet
    out["high"] = args.restart_high
    if await api.get(SPECSERVE, NAMESPACE, NAME) is not None:
        with step("delete the TrafficSplit SpecServe"):
            await api.delete(SPECSERVE, NAMESPACE, NAME)
            end = time.monotonic() + 240
            while (kubelet.pods or await api.get(SPECSERVE, NAMESPACE, NAME)) and time.monotonic() < end:
                await asyncio.sleep(1)
            if kubelet.pods:
                raise RuntimeError(f"the TrafficSplit pods did not stop: {sorted(kubelet.pods)}")
    demo.pinned, demo.route = None, {}
    body = restart_doc(doc)
    out["switching"] = {k: v for k, v in body["spec"]["switching"].items() if k not in ("curves", "metrics")}
    with step("apply the Restart SpecServe and wait for its pod"):
        await api.create(SPECSERVE, NAMESPACE, body)
        await wait_ready(demo, api, args.ready_timeout, pods=1)
    with step("warm up the Restart pod"):  # light: the JIT caches are warm by now, and load would be demand
        out["warmup_s"] = await warm_up(pool_hosts(kubelet), model, batches=(1, 4))
    started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    budget = deadline - time.monotonic() - 20
    load = RestartLoad(args.restart_high, settle=args.restart_settle, bound=max(30.0, budget / 2), until=budget)
    timeline: list[dict[str, Any]] = []
    pods: dict[str, dict[str, Any]] = {}

    async def on_second(t: float, stage: str, wanted: float, in_flight: int) -> None:
        for pod in kubelet.pods.values():
            seen = pods.setdefault(pod.name, {"launched": round(pod.started - T0, 1), "stage": stage})
            seen["phase"] = pod.phase.value
            if pod.ready_at is not None:
                seen["ready_s"] = round(pod.ready_at - pod.started, 1)
            seen["mode"] = "speculative" if "NGRAM" in " ".join(demo_argv(pod.name)) else "baseline"
        row: dict[str, Any] = {"t": round(t, 1), "stage": stage, "wanted": wanted, "in_flight": in_flight,
                               "pods": {n: p["phase"] for n, p in pods.items() if n in kubelet.pods}}  # fmt: skip
        if int(t) % 2 == 0:
            with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
                status = await read_status(api)
                row["mode"] = status.get("activeMode")
                row["switching"] = status.get("switching")
                ready = [p for p in kubelet.pods.values() if p.phase == PodPhase.READY]
                alone = pods[ready[0].name]["mode"] if len(kubelet.pods) == 1 and len(ready) == 1 else None
                load.observe(t, row["mode"], alone)
        timeline.append(row)
        if int(t) % 20 == 0:
            out.update(timeline=timeline, pods=pods, stages=load.stages)
            save()

    def demo_argv(name: str) -> list[str]:
        return list((launcher.records.get(name) or {}).get("argv") or [])

    stages = [Stage("restart-high", 0.0, args.restart_high, args.restart_high), Stage("restart-low", 0.0, 1, 1)]
    log(f"restart: high {args.restart_high} until the pool is plain, then 1 until it is NGRAM again")
    records, wall_s = await run_schedule(demo.gateway.url, model, stages, on_second, want=load.want, done=load.done)
    if not load.over:
        load.stages.append({**stage_record(load.stage, load.since, wall_s, load.restarted_at), "cut": "deadline"})
    spans = {st["stage"]: st["to_s"] - st["from_s"] for st in load.stages}
    measured = [Stage(name, spans.get(name, 0.0) or 1e-9, s.start, s.end) for name, s in zip(
        ("restart-high", "restart-low"), stages, strict=True)]  # fmt: skip
    status = await read_status(api)
    out.update(
        wall_s=round(wall_s, 1), stages=load.stages, timeline=timeline,
        phases=phase_table(records, measured, lambda server: (pods.get(server) or {}).get("mode", "?")),
        pods=pods, history=[h for h in status.get("history") or [] if str(h.get("time", "")) >= started],
        status=status, requests=[asdict(r) for r in records],
    )  # fmt: skip
    log(f"restart: {json.dumps(load.stages)}; {json.dumps(out['phases']['all'])}")


def save(res: Result, out: Path) -> None:
    """loop.json (and loop.png) as they stand: written after every step, so a run cut short still leaves its data."""
    data = asdict(res)
    tmp = out / "loop.json.tmp"
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(out / "loop.json")
    with contextlib.suppress(Exception):
        from loop_plot import plot  # noqa: PLC0415  (matplotlib only where it is installed)

        plot(data, out / "loop.png")


async def main_async(args: argparse.Namespace) -> Result:  # noqa: PLR0915
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    fake = os.environ.get("FAKE_ENGINE") or None
    res = Result(engine=f"emulator:{fake}" if fake else "sglang 0.5.17")
    stages = schedule(args.ramp_seconds, args.peak)
    policies = [p for p in args.policies.split(",") if p]
    res.schedule = [asdict(s) for s in stages] if policies else []
    workdir = Path(tempfile.mkdtemp(prefix="specserve-loop-"))
    sup = Supervisor(workdir / "logs")
    opts = Options(strategy="TrafficSplit", out=out, plain=True)
    demo = Demo(opts, sup, workdir, aiohttp.ClientSession())
    stop = asyncio.Event()
    curves = json.loads(args.curves.read_text()) if args.curves else None
    doc = specserve_doc(args.example, curves, args.gpu_sharing)
    deadline = T0 + args.deadline
    model = doc["spec"]["model"].get("servedName") or doc["spec"]["model"]["path"]
    try:
        with step("start the fake Kubernetes API"):
            _, api_url = await cluster.start_api(sup, free_port(), validate=not args.no_validate)
            demo.api = api = DemoApi(api_url, demo.session)
        with step("start HAProxy"):
            demo.gateway = await start_gateway(sup, workdir, free_port(), free_port())
        with step("start the operator"):
            await api.create(NAMESPACES, "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
            await cluster.start_operator(sup, workdir, api_url, NAMESPACE, "http://127.0.0.1:9", free_port())
        launcher = SglangLauncher(sup.log_dir, fake, f"127.0.{random.randint(2, 250)}")
        with step("start the kubelet"):
            demo.kubelet = kubelet = Kubelet(api, sup, NAMESPACE, fake or "", workdir, startup_seconds=2.0,
                                             launcher=launcher, on_endpoints=demo.on_endpoints,
                                             on_pod_gone=demo.on_pod_gone)  # fmt: skip
            launcher.on_gpu = lambda: len(kubelet.pods)
            demo.background.append(asyncio.create_task(demo.kubelet.run(stop), name="the kubelet"))
            demo.background.append(asyncio.create_task(demo.watch_route(stop), name="the gateway controller"))
            demo.background.append(asyncio.create_task(mirror_pods(api, demo.kubelet, stop), name="the pod mirror"))
        if policies:
            await traffic_split(demo, api, launcher, res, doc, stages, policies, model, args, deadline)
        if args.restart:
            if curves is None and not res.switching.get("curves"):
                raise RuntimeError("--restart alone needs --curves (they price the restart)")
            doc["spec"]["switching"].update({k: res.switching[k] for k in CALIBRATED if k in res.switching})
            res.pods = launcher.records
            await run_restart(demo, api, launcher, doc, model, args, deadline, res.restart, lambda: save(res, out))
            res.pods = launcher.records
    except Exception as exc:  # the record says what failed; the logs come back either way
        res.errors.append(f"{type(exc).__name__}: {exc}")
        log(f"FAILED: {exc}")
    finally:
        stop.set()
        for task in demo.background:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, timeout=10)
        await demo.session.close()
        await sup.stop_all()
        logs = out / "logs"
        shutil.copytree(sup.log_dir, logs, dirs_exist_ok=True)
        shutil.rmtree(workdir, ignore_errors=True)
    return res


async def traffic_split(demo: Demo, api: DemoApi, launcher: SglangLauncher, res: Result, doc: dict[str, Any],
                        stages: list[Stage], policies: list[str], model: str, args: argparse.Namespace,
                        deadline: float) -> None:  # fmt: skip
    """The TrafficSplit SpecServe: both pools Ready, warmed up, calibrated (unless --curves), then each policy on
    the schedule; loop.json is rewritten after each step."""
    assert demo.kubelet is not None
    out: Path = args.out
    with step("apply the SpecServe"):
        await api.create(SPECSERVE, NAMESPACE, doc)
    with step("wait for both pools to be Ready"):
        await wait_ready(demo, api, args.ready_timeout)
        res.pods = launcher.records
        res.ready_s = {p.name: round(p.ready_at - p.started, 1) for p in demo.kubelet.pods.values() if p.ready_at}
        log(f"ready: {res.ready_s}")
    hosts = pool_hosts(demo.kubelet)
    with step("warm up"):
        res.warmup_s = await warm_up(hosts, model)
        log(f"warm-up: {res.warmup_s}")
    save(res, out)
    if args.curves is None:
        with step("calibrate"):
            switching, res.calibration = await calibrate(hosts, doc, out)
            obj = await api.get(SPECSERVE, NAMESPACE, NAME) or {}
            obj["spec"]["switching"].update(switching)
            await api.patch(SPECSERVE, NAMESPACE, NAME, {"spec": {"switching": obj["spec"]["switching"]}})
            res.switching = switching
        save(res, out)  # a run cut later keeps its calibration
    else:
        res.switching = {k: v for k, v in doc["spec"]["switching"].items() if k in CALIBRATED}
        res.calibration = {"from": str(args.curves)}
    res.switching["knobs"] = {k: v for k, v in doc["spec"]["switching"].items() if k not in ("curves", "metrics")}
    split = static_split(res.switching, stages) if res.switching.get("curves") else 50
    pins: dict[str, dict[str, int] | None] = {
        "specserve": None,
        "baseline": {f"{NAME}-spec": 0, f"{NAME}-base": 100},
        "speculative": {f"{NAME}-spec": 100, f"{NAME}-base": 0},
        "split": {f"{NAME}-spec": split, f"{NAME}-base": 100 - split},
    }
    need = sum(s.seconds for s in stages) + 8  # the tail: requests in flight at the end finish (1-2 s at 1 in flight)
    for policy in policies:
        reserve = args.restart_reserve if args.restart else 0.0
        if time.monotonic() + need + reserve > deadline:
            res.not_run.append(f"{policy}: {need:.0f} s needed, {deadline - reserve - time.monotonic():.0f} s left")
            continue
        runs = sum(k.split("#")[0] == policy for k in res.policies)
        key = f"{policy}#{runs + 1}" if runs else policy  # a repeated policy: its second run is policy#2
        with step(f"policy {key}"):
            forgot = await forget_learning(api) if policy == "specserve" and res.policies else None
            res.policies[key] = await run_policy(demo, api, policy, pins[policy], stages, model)
            if forgot is not None:
                res.policies[key]["forgot_learning"] = forgot
            demo.check()
        save(res, out)
    res.switching["final_status"] = await read_status(api)


def main() -> int:
    parser = argparse.ArgumentParser(prog="loop.py", description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parents[2]
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--example", type=Path, default=root / "examples" / "llama31-8b-h200.yaml")
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated; empty: no TrafficSplit")
    parser.add_argument("--curves", type=Path, help="switching fields from an earlier calibration (skip bench)")
    parser.add_argument("--ramp-seconds", type=float, default=120.0, help="each of the two halves (greedy, drift)")
    parser.add_argument("--peak", type=int, default=128)
    parser.add_argument("--gpu-sharing", choices=["Shared", "Exclusive"], default="Shared",
                        help="spec.placement.gpuSharing of the SpecServe (its pods share the one GPU)")  # fmt: skip
    parser.add_argument("--deadline", type=float, default=520.0, help="seconds for the whole run")
    parser.add_argument("--ready-timeout", type=float, default=420.0)
    parser.add_argument("--no-validate", action="store_true", help="the fake API without schema validation")
    parser.add_argument("--restart", action="store_true", help="then the Restart run (one pool restarted)")
    parser.add_argument("--restart-high", type=int, default=64, help="clients in flight of the Restart's high load")
    parser.add_argument("--restart-settle", type=float, default=20.0, help="seconds served after each restart")
    parser.add_argument("--restart-reserve", type=float, default=360.0, help="seconds kept for the Restart run")
    args = parser.parse_args()
    res = asyncio.run(main_async(args))
    save(res, args.out)
    if res.restart.get("timeline"):
        with contextlib.suppress(Exception):
            from loop_plot import plot_restart  # noqa: PLC0415

            plot_restart(asdict(res), args.out / "restart.png")
    for policy, p in res.policies.items():
        print(policy, json.dumps({k: p["phases"][k] for k in ("ramp", "drift", "all")}))
    if res.restart.get("phases"):
        print("restart", json.dumps(res.restart["stages"]), json.dumps(res.restart["phases"]["all"]))
    print("errors:", res.errors, "not run:", res.not_run)
    return 1 if res.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Chaos soak (a benchmark, not a test): N SpecServes on specserve_kubefake with the real operator, changing
load, faults injected at random, invariants checked continuously by sampling the fake's store.

    .venv/bin/python scripts/chaos_soak.py --specserves 20 --minutes 3 --seed 1 [--json soak.json]

What runs:
- the fake API server (auto_ready: the Deployment controller stand-in, rollouts can be made to stall; a Gateway
  stand-in accepting each HTTPRoute generation 100 ms after it is written) and the sampler, in this process;
- the operator: two replicas of `specserve run --leader-elect` as subprocesses (logs under --workdir);
- load: a synthetic SGLang exposition (one target, labels honoured as the PodMonitor relabels them: namespace,
  specserve_instance, specserve_pool, one series set per Ready pod, the demand of a pool = its SpecServe's demand x
  its route weight) scraped every second by Debian's Prometheus; the operator's real switching loop reads it and
  moves the weights. Each SpecServe's demand changes every 15-45 s (1 to 20 requests in flight, crossover 6).
  Without a prometheus binary (--no-prometheus) the load does not move and only the failure paths are exercised.

Faults (one started every --fault-interval seconds on average, each lasting 10-40 s, then undone):
  refuse      writes of one pool's Deployment or the HTTPRoute refused (403/409/422/500), persistently
  stuck-roll  a user edit of spec.engine.env rolls the pools while their new pods fail (ImagePullBackOff,
              CrashLoopBackOff, OOMKilled, Unschedulable; ProgressDeadlineExceeded after 5 s); undone by
              reverting the edit after the cause is fixed
  strategy    a user switches the SpecServe to Restart and back; half the time another owner's Deployment
              already holds the new pool's name (<name>-engine)
  pods-lost   every pod of one pool stops being Ready (readyReplicas 0), preferably the pool holding weight
  hpa         an HPA writes spec.replicas of one pool with its own field manager
  prometheus  Prometheus stops (outage) / partial-series: some pods of a pool have no series
  latency     API calls for one kind answered 0.5-2 s late
  leader      the leading operator replica is killed (SIGKILL or SIGTERM) and a new replica started
  hostile-metric  one SpecServe's speculative pods publish sglang:num_running_reqs near 1e200 (varying: a count no
              deployment produces; docs/fault-tolerance.md)
  second-operator a `specserve run` without --leader-elect (a laptop run) starts against the same namespace and
              is stopped again (it must refuse to act while the other holds the Lease)

Invariants (each breach printed with its time; --reaction-bound seconds of grace where reacting takes time):
  dead-weight   weight on a pool with no Ready replica while another pool of the SpecServe is Ready
  no-weight     every weight 0 while a pool is Ready
  both-rolling  both pools of a SpecServe rolling at once (observedGeneration behind or updatedReplicas short)
  pruned-ready  a Ready pool's Deployment (or the route) deleted while no other pool of the SpecServe is Ready
  unnamed-stuck a stalled roll not named in status (status.pools[].failure, or a False condition naming the cause)
                within one resync interval (+2 s)
  hostile-unnamed  a SpecServe under a hostile-metric fault whose MetricsAvailable is not False (reason
                ImplausibleReading, unless Prometheus is down or its series partial) after 3 evaluations +
                --reaction-bound
  second-acted  the second operator acting (specserve_operator_conflict 0 on its metrics port) while another
                holds the Lease, or not refusing loudly (its log) within a lease + --reaction-bound
  converge      after the faults stop (all undone), every SpecServe observed (status.observedGeneration), Ready,
                pools updated and Ready, no <name>-engine left over, route weights = status.weights, no pool
                failure, for 5 s in a row, within --settle seconds

Summary: failovers (pods lost on the weighted pool -> weight off it, while the other pool was Ready) p50/p99,
leader takeovers, decisions of other SpecServes while a hostile metric was published (switching went on), faults
and violations by kind, the leader's switching rounds (its specserve_evaluation_round_seconds, read every 2 s) and
its CPU. The operator under test is the one on this branch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import aiohttp.web
import yaml

from specserve.layout import LABEL_INSTANCE
from specserve_kubefake import (
    DEPLOYMENTS,
    HTTPROUTES,
    LEASES,
    SPECSERVES,
    ApiError,
    FakeApiServer,
    write_kubeconfig,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "kimi-k25-rtxpro6000.yaml"
NS = "soak"
JSON = dict[str, Any]
POOLS = {"spec": "speculative", "base": "baseline"}  # TrafficSplit's pools
ALL_POOLS = {**POOLS, "engine": "engine"}  # and the one pool of Restart / Adaptive
DEMANDS = (1, 2, 4, 8, 12, 20)
STUCK_STATES = ("ImagePullBackOff", "CrashLoopBackOff", "OOMKilled", "Unschedulable")
STABLE = 5.0  # seconds a converged state must hold to count
FAULTS = ("refuse", "stuck-roll", "strategy", "pods-lost", "hpa", "prometheus", "partial-series", "latency", "leader",
          "hostile-metric", "second-operator")  # fmt: skip
NEEDS_PROMETHEUS = ("prometheus", "partial-series", "hostile-metric")
HOSTILE = 1e200  # the hostile gauge's order of magnitude


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def specserve_doc(name: str, replicas: int) -> JSON:
    body: JSON = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    body["metadata"] = {"name": name, "namespace": NS}
    body["spec"]["pools"] = {"speculative": {"replicas": replicas}, "baseline": {"replicas": replicas}}
    body["spec"]["monitoring"] = {"podMonitor": True, "intervalSeconds": 1}
    body["spec"]["switching"] = {"initialMode": "Baseline", "crossoverConcurrency": 6, "hysteresis": 0.2,
                                 "evaluationIntervalSeconds": 2, "upStabilizationSeconds": 0,
                                 "downStabilizationSeconds": 4, "minDwellSeconds": 0}  # fmt: skip
    return body


@dataclass
class Violation:
    at: float  # seconds since the soak started
    specserve: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"[+{self.at:7.1f}s] {self.specserve:10} {self.kind:13} {self.detail}"


# ------------------------------------------------------------------------------------------------ the world


class World:
    """Read access to the fake's store without copies (the sampler runs every 250 ms)."""

    def __init__(self, api: FakeApiServer) -> None:
        self.api = api

    def _get(self, resource: str, name: str) -> JSON | None:
        rt = self.api.registry.get(resource)
        return self.api.store.get(rt, NS, name) if rt is not None else None

    def deployment(self, name: str) -> JSON | None:
        return self._get(DEPLOYMENTS, name)

    def pool(self, name: str) -> JSON | None:
        """A Deployment the operator owns (another owner's Deployment of the same name is no pool)."""
        dep = self.deployment(name)
        if dep is None or LABEL_INSTANCE not in (dep["metadata"].get("labels") or {}):
            return None
        return dep

    def ready(self, name: str) -> int | None:
        dep = self.pool(name)
        return None if dep is None else int((dep.get("status") or {}).get("readyReplicas") or 0)

    def rolling(self, name: str) -> bool:
        dep = self.pool(name)
        if dep is None:
            return False
        if dep["metadata"].get("generation") == 1:
            return False  # its first spec: a pool being created has no pods to replace (not a roll)
        status = dep.get("status") or {}
        replicas = int((dep.get("spec") or {}).get("replicas", 1))
        behind = status.get("observedGeneration") != dep["metadata"].get("generation")
        return behind or int(status.get("updatedReplicas") or 0) < replicas

    def weights(self, name: str) -> dict[str, int] | None:
        route = self._get(HTTPROUTES, name)
        if route is None:
            return None
        refs = [r for rule in (route.get("spec") or {}).get("rules") or [] for r in rule.get("backendRefs") or []]
        return {r["name"]: int(r.get("weight", 1)) for r in refs}

    def specserve(self, name: str) -> JSON | None:
        return self._get(SPECSERVES, name)

    def leader(self) -> str | None:
        return self.lease_state()[0]

    def lease_state(self) -> tuple[str | None, str | None]:
        """The Lease's holder and its last renewTime."""
        lease = self._get(LEASES, "specserve-operator")
        spec = (lease or {}).get("spec") or {}
        return spec.get("holderIdentity"), spec.get("renewTime")


# --------------------------------------------------------------------------------------------------- load


class Exposition:
    """The engine series of every Ready pod, as the PodMonitor would label them; demand per SpecServe."""

    def __init__(self, world: World, names: list[str], rng: random.Random) -> None:
        self.world, self.names, self.rng = world, names, rng
        self.demand = {n: rng.choice(DEMANDS) for n in names}
        self.next_change = {n: time.monotonic() + rng.uniform(15, 45) for n in names}
        self.partial: set[tuple[str, str]] = set()  # (specserve, pool suffix): some pods have no series
        self.hostile: set[str] = set()  # SpecServes whose speculative pods publish a running count near 1e200
        self.tokens: Counter[str] = Counter()
        self.moves = 0  # demand changes
        self.started = time.monotonic()

    def step(self, now: float) -> None:
        for name in self.names:
            if now >= self.next_change[name]:
                self.demand[name] = self.rng.choice(DEMANDS)
                self.moves += 1
                self.next_change[name] = now + self.rng.uniform(15, 45)

    def text(self) -> str:
        lines = []
        for name in self.names:
            weights = self.world.weights(name) or {}
            total = sum(weights.values()) or 1
            for suffix, pool in ALL_POOLS.items():
                deployment = f"{name}-{suffix}"
                ready = self.world.ready(deployment) or 0
                share = self.demand[name] * weights.get(deployment, 0) / total
                pods = list(range(ready))
                if not ready:
                    continue
                if (name, suffix) in self.partial:
                    pods = pods[1:] if len(pods) > 1 else []
                for pod in pods:
                    # `instance` per pod, as each pod is its own scrape target (the pods-reporting count reads it)
                    labels = (f'namespace="{NS}",specserve_instance="{name}",specserve_pool="{pool}",'
                              f'pod="{deployment}-{pod}",instance="{deployment}-{pod}",model_name="m"')  # fmt: skip
                    running = share / max(ready, 1)
                    if name in self.hostile and pool == "speculative":
                        running = HOSTILE * self.rng.uniform(1, 3)
                    key = f"{deployment}-{pod}"
                    self.tokens[key] += int(40 * running) + 1
                    lines += [f"sglang:num_running_reqs{{{labels}}} {running:.6g}",
                              f"sglang:num_queue_reqs{{{labels}}} 0",
                              f"sglang:generation_tokens_total{{{labels}}} {self.tokens[key]}"]  # fmt: skip
                    if pool == "speculative":
                        lines += [f"sglang:spec_accept_length{{{labels}}} 2.5",
                                  f"sglang:spec_num_steps{{{labels}}} 3"]  # fmt: skip
        return "\n".join(lines) + "\n"

    async def handle(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text=self.text(), content_type="text/plain")


class Prometheus:
    """Debian's Prometheus on loopback, scraping the exposition every second (labels honoured)."""

    def __init__(self, workdir: Path, target: str) -> None:
        self.binary = shutil.which("prometheus")
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = workdir / "prometheus.yml"
        self.config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n- job_name: sglang\n"
            f"  honor_labels: true\n  static_configs:\n  - targets: ['{target}']\n",
            encoding="utf-8",
        )
        self.data = workdir / "prometheus-data"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.binary is not None
        self.process = subprocess.Popen(
            [self.binary, f"--config.file={self.config}", f"--storage.tsdb.path={self.data}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=20)
            if self.process.poll() is None:
                self.process.kill()
            self.process = None

    @property
    def running(self) -> bool:
        return self.process is not None


# ----------------------------------------------------------------------------------------------- operator


class Operators:
    """Replicas of `specserve run --leader-elect` against the fake; a leader change kills the leader."""

    def __init__(
        self,
        workdir: Path,
        kubeconfig: Path,
        prometheus_url: str | None,
        resync: float,
        lease: float,
        lease_namespace: str = NS,
    ) -> None:
        self.workdir, self.kubeconfig, self.lease_namespace = workdir, kubeconfig, lease_namespace
        self.prometheus_url, self.resync, self.lease = prometheus_url, resync, lease
        self.replicas: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, int] = {}  # replica -> its --metrics-port (RoundMeter reads the leader's rounds there)
        self.started = 0

    @classmethod
    def make(cls, kubeconfig: Path, lease_namespace: str) -> Callable[[Path, str | None, float, float], Operators]:
        def make(workdir: Path, prometheus_url: str | None, resync: float, lease: float) -> Operators:
            return cls(workdir, kubeconfig, prometheus_url, resync, lease, lease_namespace)

        return make

    def start_one(self) -> str:
        self.started += 1
        identity = f"operator-{self.started}"
        self.ports[identity] = _free_port()
        args = ["run", "-n", NS, "--resync-seconds", f"{self.resync:g}", "--leader-elect",
                "--leader-election-namespace", self.lease_namespace, "--lease-seconds", f"{self.lease:g}",
                "--metrics-port", str(self.ports[identity]), "--api-timeout-seconds", "5",
                "--log-level", "warning"]  # fmt: skip
        if self.prometheus_url:
            args += ["--prometheus-url", self.prometheus_url]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "POD_NAME": identity,
               "POD_NAMESPACE": self.lease_namespace, "PYTHONPATH": str(ROOT / "operator")}  # fmt: skip
        log = (self.workdir / f"{identity}.log").open("wb")
        code = "import sys; from specserve.cli import main; sys.exit(main())"
        self.replicas[identity] = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=log,
                                                   stderr=subprocess.STDOUT)  # fmt: skip
        return identity

    def start_unelected(self) -> tuple[str, subprocess.Popen[bytes], int]:
        """A `specserve run` without --leader-elect (a laptop run) against the same namespace and Lease."""
        self.started += 1
        identity = f"laptop-{self.started}"
        port = _free_port()
        args = ["run", "-n", NS, "--resync-seconds", f"{self.resync:g}",
                "--leader-election-namespace", self.lease_namespace, "--lease-seconds", f"{self.lease:g}",
                "--metrics-port", str(port), "--api-timeout-seconds", "5", "--log-level", "warning"]  # fmt: skip
        if self.prometheus_url:
            args += ["--prometheus-url", self.prometheus_url]
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "POD_NAME": identity,
               "PYTHONPATH": str(ROOT / "operator")}  # fmt: skip
        log = (self.workdir / f"{identity}.log").open("wb")
        code = "import sys; from specserve.cli import main; sys.exit(main())"
        process = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=log, stderr=subprocess.STDOUT)
        return identity, process, port

    def reap(self) -> list[str]:
        """Replicas that exited (a lost lease ends the process: it is restarted, as a Deployment would)."""
        gone = [i for i, p in self.replicas.items() if p.poll() is not None]
        for identity in gone:
            del self.replicas[identity]
        return gone

    def kill(self, identity: str, sig: int) -> bool:
        process = self.replicas.get(identity)
        if process is None:
            return False
        process.send_signal(sig)
        return True

    def stop(self) -> None:
        for process in self.replicas.values():
            process.terminate()
        for process in self.replicas.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        self.replicas.clear()


ROUND_METRIC = "specserve_evaluation_round_seconds"  # the switching loop's round wall time (telemetry)
METER_EVERY = 2.0  # seconds between two reads of the leader's metrics (an exposition costs it a few ms)


def round_totals(text: str) -> tuple[float, float] | None:
    """(rounds, seconds) of the switching loop from an operator's metrics exposition (None: not in it)."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        for suffix in ("_count", "_sum"):
            if line.startswith(f"{ROUND_METRIC}{suffix} "):
                values[suffix] = float(line.split()[1])
    return (values["_count"], values["_sum"]) if len(values) == 2 else None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (None: gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Round:
    seen: float  # monotonic time of the read that saw it end
    seconds: float  # its wall time (the mean, when more than one round ended between two reads)
    rounds: int
    leader: str


class RoundMeter:
    """The leader's switching rounds, from the histogram it exports (specserve_evaluation_round_seconds), read every
    METER_EVERY s: each read's increase of _sum over that of _count is the mean of the rounds that ended since the
    last read, so a round longer than METER_EVERY (the ones that delay a reaction) is timed exactly. Beside it, the
    leader process's CPU share between reads and the machine's load average: a slow round beside an idle CPU waits
    on the API server, one at a full core is the operator's own work or its share of a saturated machine."""

    def __init__(self, world: World, operators: Operators) -> None:
        self.world, self.operators = world, operators
        self.rounds: list[Round] = []
        self.cpu: list[float] = []  # the leader's CPU share between two reads (1.0: one core)
        self.load: list[float] = []  # the 1-minute load average at each read
        self._totals: dict[str, tuple[float, float]] = {}  # replica -> (rounds, seconds) at its last read
        self._cpu: dict[str, tuple[float, float]] = {}  # replica -> (monotonic, CPU seconds) at its last read

    async def run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=METER_EVERY)) as session:
            while True:
                await asyncio.sleep(METER_EVERY)
                with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                    await self.read(session)

    async def read(self, session: aiohttp.ClientSession) -> None:
        leader = self.world.leader() or ""
        port, process = self.operators.ports.get(leader), self.operators.replicas.get(leader)
        if port is None or process is None:
            return
        now = time.monotonic()
        self.load.append(os.getloadavg()[0])
        used = cpu_seconds(process.pid)
        if used is not None:
            last = self._cpu.get(leader)
            if last is not None and now > last[0]:
                self.cpu.append((used - last[1]) / (now - last[0]))
            self._cpu[leader] = (now, used)
        # Only the round histogram's two series: the whole exposition (per-SpecServe families, ~0.7 MB at 200
        # SpecServes) took the leader 0.2-0.5 s to build, every read (the fourth real-plane run paid that).
        names = [("name[]", f"{ROUND_METRIC}_count"), ("name[]", f"{ROUND_METRIC}_sum")]
        async with session.get(f"http://127.0.0.1:{port}/metrics", params=names) as response:
            totals = round_totals(await response.text())
        if totals is None:
            return
        # A replica's histogram starts at zero with its process, and only a leader runs rounds.
        count, seconds = self._totals.get(leader, (0.0, 0.0))
        self._totals[leader] = totals
        if totals[0] > count:
            n = round(totals[0] - count)
            self.rounds.append(Round(time.monotonic(), (totals[1] - seconds) / n, n, leader))

    def since(self, start: float) -> list[float]:
        """The rounds seen ending since `start` (monotonic), in seconds: what a late reaction waited on."""
        return [round(r.seconds, 1) for r in self.rounds if r.seen >= start]

    def figures(self, t0: float) -> JSON:
        each = [r.seconds for r in self.rounds for _ in range(r.rounds)]

        def q(values: list[float], p: float) -> float | None:
            got = _percentile(values, p)
            return None if got is None else round(got, 2)

        return {
            "switching_rounds_timed": len(each),
            "switching_round_seconds": {"p50": q(each, 0.5), "p90": q(each, 0.9), "p99": q(each, 0.99),
                                        "max": q(each, 1.0), "over_2s": sum(1 for x in each if x > 2.0)},
            "leader_cpu_share": {"p50": q(self.cpu, 0.5), "p90": q(self.cpu, 0.9), "max": q(self.cpu, 1.0)},
            "load_average_1m": {"p50": q(self.load, 0.5), "p90": q(self.load, 0.9), "max": q(self.load, 1.0)},
            # [seconds since the faults started (negative: start-up), round seconds, rounds it averages, leader]
            "switching_rounds": [[round(r.seen - t0, 1), round(r.seconds, 2), r.rounds, r.leader]
                                 for r in self.rounds],
        }  # fmt: skip


# ----------------------------------------------------------------------------------------------- invariants


# A takeover slower than this is itself the failure: the reaction bound applies again.
LEADERLESS_LIMIT = 30.0


@dataclass
class Episode:
    since: float
    reported: bool = False
    injected: bool = False  # started by a pods-lost fault on the weighted pool (a failover to time)
    leader_change: bool = False  # a leader change overlapped it (its failover waited for the new leader)
    # When the fault was injected, for the failover's time (on the real control plane, before `since`: the bound
    # counts from the pool seen without a Ready replica, the failover's time from the pods' loss)
    injected_at: float | None = None


@dataclass
class Checker:
    world: World
    names: list[str]
    bound: float
    resync: float
    t0: float
    violations: list[Violation] = field(default_factory=list)
    failovers: list[float] = field(default_factory=list)
    recovered_before_failover: int = 0
    dead: dict[str, Episode] = field(default_factory=dict)  # deployment -> episode of weight on a dead pool
    no_weight: dict[str, Episode] = field(default_factory=dict)
    both_rolling: dict[str, Episode] = field(default_factory=dict)
    stuck: dict[str, Episode] = field(default_factory=dict)  # deployment -> stalled roll seen since
    last_ready: dict[str, int | None] = field(default_factory=dict)
    stalled: dict[str, str] = field(default_factory=dict)  # deployment -> the pod state of its stall
    # deployment -> when its pods were taken, until the sampler sees its readiness drop (on the real control plane
    # the ReplicaSet and Deployment controllers report it a moment after kwok turns the pods NotReady)
    expected: dict[str, float] = field(default_factory=dict)
    context: Callable[[], str] = lambda: ""  # the faults active now, for the report
    # Leader changes: nothing reacts between a kill and the takeover (a SIGKILLed leader's Lease must expire), so
    # the reaction bound counts from the takeover for an episode that overlaps one; the takeover times are their
    # own figure.
    leaderless: bool = False
    leader_killed_at: float = 0.0
    leader_since: float = 0.0
    failovers_across_leader_change: list[float] = field(default_factory=list)

    def leader_killed(self, now: float) -> None:
        self.leaderless, self.leader_killed_at = True, now
        for episode in [*self.dead.values(), *self.no_weight.values()]:
            episode.leader_change = True

    def leader_took_over(self, now: float) -> None:
        self.leaderless, self.leader_since = False, now

    def _late(self, episode: Episode, now: float) -> bool:
        """Past the reaction bound, counted from when a leader could react."""
        if self.leaderless and now - self.leader_killed_at < LEADERLESS_LIMIT:
            episode.leader_change = True
            return False
        return not episode.reported and now - max(episode.since, self.leader_since) > self.bound

    def report(self, now: float, name: str, kind: str, detail: str) -> None:
        active = self.context()
        violation = Violation(now - self.t0, name, kind, f"{detail} [faults active: {active or 'none'}]")
        self.violations.append(violation)
        print(violation, flush=True)

    def sample(self, now: float) -> None:
        for name in self.names:
            self._sample_one(name, now)

    def _sample_one(self, name: str, now: float) -> None:
        pools = [f"{name}-{s}" for s in ALL_POOLS]
        ready = {p: self.world.ready(p) for p in pools}
        weights = self.world.weights(name)
        self._check_pruned(name, now, pools, ready, weights)
        if weights is None:
            return
        self._check_dead_weight(name, now, pools, ready, weights)
        self._check_no_weight(name, now, ready, weights)
        self._check_rolling(name, now, pools)
        self._check_stuck(name, now, pools)

    def _check_pruned(
        self, name: str, now: float, pools: list[str], ready: dict[str, int | None], weights: dict[str, int] | None
    ) -> None:
        """A pool Ready at the last sample is gone, and nothing else of the SpecServe is Ready."""
        for pool in pools:
            before = self.last_ready.get(pool)
            if before and ready[pool] is None and not any(ready[p] for p in pools if p != pool):
                self.report(now, name, "pruned-ready", f"{pool} (Ready {before}) deleted with no other Ready pool")
            self.last_ready[pool] = ready[pool]
        if weights is None and any(ready.values()) and self.last_ready.get(name):
            self.report(now, name, "pruned-ready", "the HTTPRoute was deleted while a pool was Ready")
        self.last_ready[name] = None if weights is None else 1

    def _check_dead_weight(
        self, name: str, now: float, pools: list[str], ready: dict[str, int | None], weights: dict[str, int]
    ) -> None:
        """Weight on a pool without a Ready replica while another is Ready; times the failovers."""
        for pool in pools:
            others_ready = any(ready.get(p) for p in pools if p != pool)
            bad = weights.get(pool, 0) > 0 and not ready.get(pool) and others_ready
            episode = self.dead.get(pool)
            if bad and episode is None:
                injected_at = self.expected.pop(pool, None)
                self.dead[pool] = Episode(now, injected=injected_at is not None, injected_at=injected_at)
            elif bad and episode is not None and self._late(episode, now):
                episode.reported = True
                self.report(now, name, "dead-weight", f"{weights.get(pool)}% on {pool} (0 Ready) for more than "
                            f"{self.bound:g}s while another pool is Ready; weights {weights}")  # fmt: skip
            elif not bad and episode is not None:
                del self.dead[pool]
                if weights.get(pool, 0) == 0 and episode.injected:
                    timed = self.failovers_across_leader_change if episode.leader_change else self.failovers
                    timed.append(now - (episode.since if episode.injected_at is None else episode.injected_at))
                elif episode.injected:
                    self.recovered_before_failover += 1

    def _check_no_weight(self, name: str, now: float, ready: dict[str, int | None], weights: dict[str, int]) -> None:
        episode = self.no_weight.get(name)
        if sum(weights.values()) == 0 and any(ready.values()):
            if episode is None:
                self.no_weight[name] = Episode(now)
            elif self._late(episode, now):
                episode.reported = True
                self.report(now, name, "no-weight", f"every weight is 0 while a pool is Ready: {ready}")
        else:
            self.no_weight.pop(name, None)

    def _check_rolling(self, name: str, now: float, pools: list[str]) -> None:
        """Reported at once: rolling both is the operator's decision, nothing has to react first."""
        rolling = sum(1 for p in pools if self.world.rolling(p)) >= 2
        if rolling and name not in self.both_rolling:
            self.both_rolling[name] = Episode(now, reported=True)
            self.report(now, name, "both-rolling", "both pools are rolling at once")
        elif not rolling:
            self.both_rolling.pop(name, None)

    def _check_stuck(self, name: str, now: float, pools: list[str]) -> None:
        for pool in pools:
            state = self.stalled.get(pool)
            if state is None or not self.world.rolling(pool):
                self.stuck.pop(pool, None)
                continue
            episode = self.stuck.setdefault(pool, Episode(now))
            # Nothing names it while no replica leads: as for dead weight, the bound counts from the takeover.
            waiting = self.leaderless and now - self.leader_killed_at < LEADERLESS_LIMIT
            late = not episode.reported and not waiting
            late = late and now - max(episode.since, self.leader_since) > self.resync + 2
            if late and not self._named(name, pool, state):
                episode.reported = True
                self.report(now, name, "unnamed-stuck", f"{pool}: a roll stuck on {state} is not named in status "
                            f"after {now - episode.since:.1f}s (resync {self.resync:g}s)")  # fmt: skip

    def _named(self, name: str, pool: str, state: str) -> bool:
        status = (self.world.specserve(name) or {}).get("status") or {}
        for entry in status.get("pools") or []:
            if entry.get("name") == pool and (entry.get("failure") or {}).get("reason"):
                return True
        for cond in status.get("conditions") or []:
            text = f"{cond.get('reason', '')} {cond.get('message', '')}"
            if cond.get("status") == "False" and (state in text or "ProgressDeadlineExceeded" in text):
                return True
        return False

    def converged(self, name: str) -> str | None:
        """Why this SpecServe has not converged (None: it has)."""
        world = self.world
        obj = world.specserve(name)
        if obj is None:
            return "the SpecServe is gone"
        status = obj.get("status") or {}
        if status.get("observedGeneration") != obj["metadata"].get("generation"):
            return (
                f"status.observedGeneration {status.get('observedGeneration')} != {obj['metadata'].get('generation')}"
            )
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is None or ready.get("status") != "True":
            return f"Ready is {ready and ready.get('status')}: {ready and ready.get('message')}"
        for suffix in POOLS:
            pool = f"{name}-{suffix}"
            dep = world.pool(pool)
            if dep is None:
                return f"{pool} is missing"
            replicas = int((dep.get("spec") or {}).get("replicas", 1))
            if world.rolling(pool) or (world.ready(pool) or 0) < replicas:
                return f"{pool} not settled: {dep.get('status')}"
        if world.pool(f"{name}-engine") is not None:
            return f"{name}-engine is left over from the strategy change"
        for entry in status.get("pools") or []:
            if entry.get("failure"):
                return f"status.pools[{entry.get('name')}].failure still set: {entry['failure']}"
        weights = world.weights(name) or {}
        want = status.get("weights")
        if want is not None:
            live = {"speculative": weights.get(f"{name}-spec", 0), "baseline": weights.get(f"{name}-base", 0)}
            if live != want:
                return f"route weights {live} != status.weights {want}"
        if sum(weights.values()) != 100:
            return f"route weights {weights} do not sum to 100"
        return None


# --------------------------------------------------------------------------------------------------- chaos


@dataclass
class Active:
    kind: str
    target: str
    ends: float
    undo: Callable[[], None]


GLOBAL_FAULTS = ("leader", "prometheus", "latency", "second-operator")  # not about one SpecServe


class Chaos:
    def __init__(self, api: FakeApiServer, world: World, checker: Checker, exposition: Exposition,
                 prometheus: Prometheus | None, operators: Operators, rng: random.Random,
                 kinds: tuple[str, ...] = FAULTS) -> None:  # fmt: skip
        self.api, self.world, self.checker, self.exposition = api, world, checker, exposition
        self.prometheus, self.operators, self.rng = prometheus, operators, rng
        self.active: list[Active] = []
        self.kinds = kinds  # the faults to draw from (--faults)
        self.started: Counter[str] = Counter()
        self.takeovers: list[float] = []
        self.lapsed = False  # the leader change in progress is a lapse, not an injected kill
        self.lapses: list[float] = []  # leader changes nobody injected: the holder stopped renewing (slow API)
        self.renewed: tuple[str | None, str | None, float] = (None, None, 0.0)  # holder, renewTime, seen at
        self.leader_killed_at: tuple[float, str] | None = None
        self.edits: Counter[str] = Counter()
        self.detail = ""  # what the last fault did, in words
        self.hostile_since: dict[str, float] = {}  # SpecServe -> when its hostile metric started
        self.hostile_masked: dict[str, float] = {}  # SpecServe -> when Prometheus or its series last hid its load
        self.decisions: dict[str, str | None] = {}  # SpecServe -> its lastDecision time, last seen
        self.decisions_during_hostile = 0  # other SpecServes' decisions while a hostile metric was published
        self.second: tuple[str, subprocess.Popen[bytes], int, float] | None = None  # identity, process, port, since
        self.second_checked = 0.0
        self.refused_seen: set[float] = set()  # second operators (by start) seen refusing: metric 1, logged
        self.meter: RoundMeter | None = None  # the leader's switching rounds (a late naming's explanation)

    async def drain(self) -> None:
        """Until every fault's write has landed (none here: the fake's are synchronous)."""

    def busy(self, target: str) -> bool:
        return any(a.target == target for a in self.active)

    def inject(self, now: float) -> None:
        kinds = [k for k in self.kinds if k not in NEEDS_PROMETHEUS or self.prometheus is not None]
        if not kinds:
            return
        kind = self.rng.choice(kinds)
        free = [n for n in self.checker.names if not self.busy(n)]
        if not free and kind not in GLOBAL_FAULTS:
            return
        name = self.rng.choice(free) if free else ""
        # A leader change is instant: it stays "active" (in violation reports) while the Lease changes hands.
        duration = self.operators.lease + 2 if kind == "leader" else self.rng.uniform(10, 40)
        self.detail = ""
        undo = getattr(self, "_" + kind.replace("-", "_"))(name, now)
        if undo is None:
            return
        self.started[kind] += 1
        target = name if kind not in GLOBAL_FAULTS else kind
        self.active.append(Active(kind, target, now + duration, undo))
        print(
            f"[+{now - self.checker.t0:7.1f}s] fault   {kind:14} {target} for {duration:.0f}s {self.detail}", flush=True
        )

    def expire(self, now: float, everything: bool = False) -> None:
        for active in [a for a in self.active if everything or a.ends <= now]:
            self.active.remove(active)
            try:
                active.undo()
            except ApiError as exc:
                print(f"undo of {active.kind} on {active.target} failed: {exc}", flush=True)

    # The faults: each returns its undo (None: not applicable now).

    def _refuse(self, name: str, now: float) -> Callable[[], None] | None:
        status = self.rng.choice((403, 409, 422, 500))
        if self.rng.random() < 0.3:
            self.detail = f"(HTTPRoute {name}: {status})"
            fault = self.api.faults.refuse("HTTPRoute", name=name, status=status,
                                           message=f"injected: route {name} refused")  # fmt: skip
        else:
            pool = self.rng.choice(
                [f"{name}-{s}" for s in ALL_POOLS if self.world.deployment(f"{name}-{s}")] or [f"{name}-spec"]
            )
            self.detail = f"(Deployment {pool}: {status})"
            fault = self.api.faults.refuse("Deployment", name=pool, status=status,
                                           message=f'admission webhook "soak" denied {pool}')  # fmt: skip
        return lambda: self.api.faults.remove(fault)

    def _stuck_roll(self, name: str, now: float) -> Callable[[], None] | None:
        state = self.rng.choice(STUCK_STATES)
        self.detail = f"(new pods {state})"
        pools = [f"{name}-{s}" for s in POOLS]
        for pool in pools:
            self.api.stall_rollouts(NS, pool, state, deadline=5)
            self.checker.stalled[pool] = state
        obj = self.api.get(SPECSERVES, NS, name)
        if obj is None:
            return None
        env = copy.deepcopy(obj["spec"].get("engine", {}).get("env") or [])
        self.edits[name] += 1
        edited = [*env, {"name": "SOAK_EDIT", "value": str(self.edits[name])}]
        self.api.write_as("kubectl-edit", SPECSERVES, NS, name, {"spec": {"engine": {"env": edited}}}, verb="update")

        def undo() -> None:
            for pool in pools:
                self.api.unstall_rollouts(NS, pool)
                self.checker.stalled.pop(pool, None)
            self.api.write_as("kubectl-edit", SPECSERVES, NS, name, {"spec": {"engine": {"env": env or None}}},
                              verb="update")  # fmt: skip

        return undo

    def _strategy(self, name: str, now: float) -> Callable[[], None] | None:
        """A user switches the SpecServe to Restart (one pool, <name>-engine) and back; half the time a Deployment
        of another owner already holds the new pool's name (a conflict on the new side)."""
        conflict = self.rng.random() < 0.5
        engine = f"{name}-engine"
        if conflict and self.world.deployment(engine) is None:
            labels = {"app": f"other-{name}"}
            template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "x", "image": "busybox"}]}}
            meta = {"name": engine, "namespace": NS, "labels": labels}
            spec = {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}
            self.api.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec})
            self.detail = f"(another owner's {engine} exists)"
        self.api.write_as("kubectl-edit", SPECSERVES, NS, name, {"spec": {"strategy": "Restart"}}, verb="update")

        def undo() -> None:
            self.api.write_as("kubectl-edit", SPECSERVES, NS, name, {"spec": {"strategy": "TrafficSplit"}},
                              verb="update")  # fmt: skip
            foreign = self.world.deployment(engine)
            if conflict and foreign is not None and not foreign["metadata"].get("ownerReferences"):
                self.api.delete(DEPLOYMENTS, NS, engine)

        return undo

    def _lost_pool(self, name: str) -> tuple[str, list[str], dict[str, int]] | None:
        """The pool whose pods are lost: a Ready one, preferring one the route weights; with the Ready pools and the
        weights it was chosen by."""
        weights = self.world.weights(name) or {}
        pools = [f"{name}-{s}" for s in ALL_POOLS if self.world.ready(f"{name}-{s}")]
        if not pools:
            return None
        weighted = [p for p in pools if weights.get(p, 0) > 0]
        return self.rng.choice(weighted or pools), pools, weights

    def _pods_lost(self, name: str, now: float) -> Callable[[], None] | None:
        chosen = self._lost_pool(name)
        if chosen is None:
            return None
        pool, pools, weights = chosen
        self.detail = f"({pool}, {weights.get(pool, 0)}% of the route)"
        others_ready = any(self.world.ready(p) for p in pools if p != pool)
        self.api.lose_pods(NS, pool)
        if weights.get(pool, 0) > 0 and others_ready:
            self.checker.dead[pool] = Episode(now, injected=True)

        def undo() -> None:
            if self.world.deployment(pool) is not None and pool not in self.checker.stalled:
                self.api.set_deployment_ready(NS, pool)

        return undo

    def _hpa(self, name: str, now: float) -> Callable[[], None] | None:
        pool = f"{name}-{self.rng.choice(list(POOLS))}"
        if self.world.deployment(pool) is None:
            return None
        self.api.hpa_scale(NS, pool, self.rng.randint(2, 4))
        return lambda: None

    def _prometheus(self, name: str, now: float) -> Callable[[], None] | None:
        prometheus = self.prometheus
        if prometheus is None or not prometheus.running or self.busy("prometheus"):
            return None
        prometheus.stop()
        return prometheus.start

    def _partial_series(self, name: str, now: float) -> Callable[[], None] | None:
        key = (name, self.rng.choice(list(POOLS)))
        self.exposition.partial.add(key)
        return lambda: self.exposition.partial.discard(key)

    def _latency(self, name: str, now: float) -> Callable[[], None] | None:
        kind = self.rng.choice(("Deployment", "HTTPRoute", "SpecServe", None))
        delay = self.rng.uniform(0.5, 2.0)
        self.detail = f"({kind or 'every kind'}, {delay:.1f}s)"
        fault = self.api.faults.slow(kind, delay)
        return lambda: self.api.faults.remove(fault)

    def _leader(self, name: str, now: float) -> Callable[[], None] | None:
        leader = self.world.leader()
        if leader is None or leader not in self.operators.replicas:
            return None
        sig = self.rng.choice((signal.SIGKILL, signal.SIGTERM))
        self.detail = f"({leader}, {signal.Signals(sig).name})"
        self.operators.kill(leader, sig)
        self.leader_killed_at = (now, leader)
        self.lapsed = False
        self.checker.leader_killed(now)
        return lambda: None

    def _hostile_metric(self, name: str, now: float) -> Callable[[], None] | None:
        self.exposition.hostile.add(name)
        self.hostile_since[name] = now

        def undo() -> None:
            self.exposition.hostile.discard(name)
            self.hostile_since.pop(name, None)

        return undo

    def _second_operator(self, name: str, now: float) -> Callable[[], None] | None:
        if self.second is not None:
            return None
        identity, process, port = self.operators.start_unelected()
        self.second = (identity, process, port, now)
        self.detail = f"({identity}, no --leader-elect)"

        def undo() -> None:
            if self.second is None:
                return
            _, running, _, _ = self.second
            self.second = None
            running.terminate()
            try:
                running.wait(timeout=20)
            except subprocess.TimeoutExpired:
                running.kill()

        return undo

    def watch_hostile(self, now: float) -> None:
        """The hostile SpecServe's status names why its load is unknown; the others' decisions go on."""
        interval = 2.0  # specserve_doc's evaluationIntervalSeconds
        for name in self.checker.names:
            obj = self.world.specserve(name) or {}
            status = obj.get("status") or {}
            decided = (status.get("lastDecision") or {}).get("time")
            if self.hostile_since and name not in self.hostile_since and decided != self.decisions.get(name, decided):
                self.decisions_during_hostile += 1
            self.decisions[name] = decided
            since = self.hostile_since.get(name)
            # While Prometheus is down or the pool's series are partial, those name the unknown load instead.
            masked = self.busy("prometheus") or any((name, suffix) in self.exposition.partial for suffix in POOLS)
            if masked:
                self.hostile_masked[name] = now
            # As for dead weight: nothing evaluates while no replica leads, and a new leader's switching loop starts
            # its three evaluations afresh, so the bound counts from the takeover when one came in between. Nor can
            # the hostile value be read while Prometheus is down (or the series partial): the bound counts from the
            # end of that too (a breach was reported 0.3 s after an outage ended, the status still naming it).
            if since is None or self.checker.leaderless:
                continue
            start = max(since, self.checker.leader_since, self.hostile_masked.get(name, since))
            if now - start < 3 * interval + self.checker.bound:
                continue
            cond: JSON = next((c for c in status.get("conditions") or [] if c.get("type") == "MetricsAvailable"), {})
            if cond.get("status") != "False" or (cond.get("reason") != "ImplausibleReading" and not masked):
                rounds = f"; the leader's rounds since: {self.meter.since(start)} s" if self.meter else ""
                self.checker.report(now, name, "hostile-unnamed", f"MetricsAvailable {cond.get('status')} "
                                    f"{cond.get('reason')} {now - since:.0f}s into a hostile metric "
                                    f"({now - start:.0f}s from the bound's start){rounds}")  # fmt: skip
                self.hostile_since[name] = now  # once per window

    async def watch_second(self, now: float) -> None:
        """The second operator refuses to act while another holds the Lease (its metric), and says so (its log)."""
        if self.second is None or now - self.second_checked < 1.0:
            return
        self.second_checked = now
        identity, process, port, since = self.second
        if now - since < self.operators.lease + self.checker.bound:
            return
        holder, _ = self.world.lease_state()
        if holder == identity or process.poll() is not None:
            return  # it took a lapsed Lease (the elected replicas were down): then it is the one acting
        conflict = await _metric(port, "specserve_operator_conflict")
        log = (self.operators.workdir / f"{identity}.log").read_text(encoding="utf-8", errors="replace")
        if conflict != 1.0 or "refuses to act" not in log:
            self.checker.report(now, identity, "second-acted", f"specserve_operator_conflict {conflict} while "
                                f"{holder} holds the Lease; refusal logged: {'refuses to act' in log}")  # fmt: skip
            self.second = (identity, process, port, now)  # once per lease
        else:
            self.refused_seen.add(since)  # this second operator was seen refusing, as it must

    def watch_leader(self, now: float) -> None:
        holder, renewed = self.world.lease_state()
        if (holder, renewed) != self.renewed[:2]:
            self.renewed = (holder, renewed, now)
        if self.leader_killed_at is None:
            # A holder that has not renewed for its renew deadline has stopped acting (it fences its own writes):
            # a leader change nobody injected, e.g. renewals that a slow API made miss their deadline.
            if holder is not None and now - self.renewed[2] > self.operators.lease * 2 / 3:
                self.leader_killed_at = (self.renewed[2], holder)
                self.lapsed = True
                self.checker.leader_killed(now)
            return
        killed_at, old = self.leader_killed_at
        if holder is not None and holder != old:
            (self.lapses if self.lapsed else self.takeovers).append(now - killed_at)
            self.leader_killed_at = None
            self.lapsed = False
            self.checker.leader_took_over(now)


# ------------------------------------------------------------------------------------------------- the soak


async def _metric(port: int, name: str) -> float | None:
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as response:
            text = await response.text()
    except (aiohttp.ClientError, OSError):
        return None
    return next((float(line.split()[-1]) for line in text.splitlines() if line.startswith(f"{name} ")), None)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _serve_exposition(exposition: Exposition) -> tuple[aiohttp.web.AppRunner, int]:
    app = aiohttp.web.Application()
    app.router.add_get("/metrics", exposition.handle)
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    port = _free_port()
    await aiohttp.web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port


async def soak(args: argparse.Namespace) -> JSON:
    if args.cluster:
        return await soak_cluster(args)
    rng = random.Random(args.seed)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="chaos-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    names = [f"soak-{i:03d}" for i in range(args.specserves)]
    async with FakeApiServer(auto_ready=True, record_requests=False, accept_routes=0.1) as api:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        world = World(api)
        kubeconfig = workdir / "kubeconfig"
        write_kubeconfig(kubeconfig, api.url)

        async def create(docs: list[JSON]) -> None:
            for doc in docs:
                api.create(doc)

        def routes() -> list[JSON]:
            return api.list(HTTPROUTES, NS) if api.registry.get(HTTPROUTES) else []

        def chaos(checker: Checker, exposition: Exposition, prometheus: Prometheus | None,
                  operators: Operators, kinds: tuple[str, ...]) -> Chaos:  # fmt: skip
            return Chaos(api, world, checker, exposition, prometheus, operators, rng, kinds)

        return await _soak(args, rng, workdir, names, world, Operators.make(kubeconfig, NS), create, routes, chaos,
                           FAULTS, {})  # fmt: skip


async def _soak(args: argparse.Namespace, rng: random.Random, workdir: Path, names: list[str], world: World,
                make_operators: Callable[[Path, str | None, float, float], Operators],
                create: Callable[[list[JSON]], Any], routes: Callable[[], list[JSON]],
                make_chaos: Callable[[Checker, Exposition, Prometheus | None, Operators, tuple[str, ...]], Chaos],
                available: tuple[str, ...], extra: JSON) -> JSON:  # fmt: skip
    """The soak on either API server: load, two operator replicas, N SpecServes, converge, faults, converge."""
    exposition = Exposition(world, names, rng)
    runner, port = await _serve_exposition(exposition)
    prometheus: Prometheus | None = None
    if not args.no_prometheus:
        prometheus = Prometheus(workdir, f"127.0.0.1:{port}")
        if prometheus.binary is None:
            print("no prometheus binary: load stays flat (failure paths only)", flush=True)
            prometheus = None
        else:
            prometheus.start()
    operators = make_operators(workdir, prometheus.url if prometheus else None, args.resync, args.lease)
    operators.start_one()
    operators.start_one()
    await create([specserve_doc(name, 2 if i % 2 else 1) for i, name in enumerate(names)])
    t0 = time.monotonic()
    checker = Checker(world, names, args.reaction_bound, args.resync, t0)
    kinds = tuple(k for k in (args.faults.split(",") if args.faults else FAULTS) if k in available)
    chaos = make_chaos(checker, exposition, prometheus, operators, kinds)
    checker.context = lambda: ", ".join(f"{a.kind}:{a.target}" for a in chaos.active)
    chaos.meter = RoundMeter(world, operators)
    metering = asyncio.create_task(chaos.meter.run(), name="round meter")
    report: JSON = {"specserves": args.specserves, "minutes": args.minutes, "seed": args.seed,
                    "resync_seconds": args.resync, "reaction_bound_seconds": args.reaction_bound,
                    "prometheus": prometheus is not None, "workdir": str(workdir), "fault_kinds": list(kinds),
                    **extra}  # fmt: skip
    try:
        # Start-up: every SpecServe converged before any fault.
        startup = await _settle(checker, names, args.settle_startup or args.settle, operators)
        report["startup_seconds"] = startup
        print(f"start-up: {len(names)} SpecServes converged in {startup:.1f}s" if startup is not None else
              "start-up: not every SpecServe converged; faults start anyway", flush=True)  # fmt: skip
        await _chaos_phase(args, rng, checker, chaos, exposition, operators)
        chaos.expire(time.monotonic(), everything=True)
        await chaos.drain()
        settle = await _settle(checker, names, args.settle, operators, sample=True)
        report["convergence_seconds"] = settle
        if settle is None:
            for name in names:
                why = checker.converged(name)
                if why is not None:
                    checker.report(time.monotonic(), name, "converge", why)
        report["route_writes"] = sum(int(r["metadata"].get("generation", 1)) - 1 for r in routes())
        report["weight_changes_by_load"] = exposition.moves
    finally:
        metering.cancel()
        operators.stop()
        if prometheus is not None:
            prometheus.stop()
        await runner.cleanup()
    report.update(_figures(checker, chaos, operators))
    report.update(chaos.meter.figures(checker.t0))
    return report


# ------------------------------------------------------------------------------- on a real control plane

# The faults the real control plane shows for real; the others need the fake (a refused write needs a validating
# webhook, API latency a proxy in front of the API server: neither is wired into the soak yet).
CLUSTER_FAULTS = ("stuck-roll", "strategy", "pods-lost", "hpa", "prometheus", "partial-series", "leader",
                  "hostile-metric", "second-operator")  # fmt: skip
ABSENT_PRODUCT = "NVIDIA-B200"  # no kwok node has it: a roll to it stalls Unschedulable, as the real scheduler says


class ClusterWorld(World):
    """The same reads from watch caches of the real API server (tests/cluster/harness.py)."""

    def __init__(self, caches: dict[str, Any]) -> None:
        self.caches = caches

    def _get(self, resource: str, name: str) -> JSON | None:
        cache = self.caches.get(resource)
        if resource == LEASES:
            name = "specserve-operator"
        return None if cache is None else cast("JSON | None", cache.get(name))


class ClusterChaos(Chaos):
    """The faults on the real control plane. pods-lost: kwok turns the pool's pods NotReady (the real ReplicaSet and
    Deployment controllers report it), undone by deleting them (the ReplicaSet replaces them); stuck-roll: a user
    edit moves the SpecServe to a GPU product no node has (the real scheduler leaves the new pods Unschedulable),
    undone by reverting it; strategy and hpa: the same writes, by other field managers, to the real API server;
    leader, second-operator: processes, as on the fake. Writes go out as tasks (the sampler does not wait on them)."""

    def __init__(self, admin: Any, harness: Any, fail_annotation: str, world: World, checker: Checker,
                 exposition: Exposition, prometheus: Prometheus | None, operators: Operators, rng: random.Random,
                 kinds: tuple[str, ...]) -> None:  # fmt: skip
        # The fake is never reached: every fault that would touch it is overridden below or not drawn.
        super().__init__(cast(FakeApiServer, None), world, checker, exposition, prometheus, operators, rng, kinds)
        self.admin, self.harness, self.fail_annotation = admin, harness, fail_annotation
        self.tasks: set[asyncio.Task[Any]] = set()

    async def drain(self) -> None:
        """Until the undo writes sent as tasks have landed (convergence is measured from there)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    def _spawn(self, what: str, coro: Any) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self.tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self.tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                print(f"fault write failed ({what}): {t.exception()}", flush=True)

        task.add_done_callback(done)

    def _edit(self, name: str, spec: JSON) -> None:
        self._spawn(f"edit {name}", self.admin.merge_patch(self.harness.SPECSERVES, NS, name, {"spec": spec},
                                                           params={"fieldManager": "kubectl-edit"}))  # fmt: skip

    def _selector(self, pool: str) -> str | None:
        dep = self.world.pool(pool)
        if dep is None:
            return None
        return ",".join(f"{k}={v}" for k, v in dep["spec"]["selector"]["matchLabels"].items())

    async def _mark_pods(self, selector: str) -> None:
        pods = await self.admin.request("GET", self.harness.PODS.format(ns=NS), params={"labelSelector": selector})
        for pod in pods.get("items") or []:
            await self.admin.merge_patch(self.harness.PODS, NS, pod["metadata"]["name"],
                                         {"metadata": {"annotations": {self.fail_annotation: "true"}}})  # fmt: skip

    def _pods_lost(self, name: str, now: float) -> Callable[[], None] | None:
        chosen = self._lost_pool(name)
        if chosen is None:
            return None
        pool, pools, weights = chosen
        selector = self._selector(pool)
        if selector is None:
            return None
        self.detail = f"({pool}, {weights.get(pool, 0)}% of the route; kwok turns its pods NotReady)"
        others_ready = any(self.world.ready(p) for p in pools if p != pool)
        self._spawn(f"pods of {pool}", self._mark_pods(selector))
        if weights.get(pool, 0) > 0 and others_ready:
            self.checker.expected[pool] = now

        def undo() -> None:
            self.checker.expected.pop(pool, None)
            self._spawn(f"delete pods of {pool}", self.admin.delete_pods(NS, selector))

        return undo

    def _stuck_roll(self, name: str, now: float) -> Callable[[], None] | None:
        obj = self.world.specserve(name)
        if obj is None:
            return None
        product = obj["spec"]["placement"]["gpuProduct"]
        self.detail = f"(gpuProduct {product} -> {ABSENT_PRODUCT}: new pods Unschedulable)"
        for pool in (f"{name}-{s}" for s in POOLS):
            self.checker.stalled[pool] = "Unschedulable"
        self._edit(name, {"placement": {"gpuProduct": ABSENT_PRODUCT}})

        def undo() -> None:
            for pool in (f"{name}-{s}" for s in POOLS):
                self.checker.stalled.pop(pool, None)
            self._edit(name, {"placement": {"gpuProduct": product}})

        return undo

    def _strategy(self, name: str, now: float) -> Callable[[], None] | None:
        conflict = self.rng.random() < 0.5
        engine = f"{name}-engine"
        if conflict and self.world.deployment(engine) is None:
            labels = {"app": f"other-{name}"}
            template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "x", "image": "busybox"}]}}
            meta = {"name": engine, "namespace": NS, "labels": labels}
            spec = {"replicas": 1, "selector": {"matchLabels": labels}, "template": template}
            body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}
            self._spawn(f"create {engine}", self.admin.create(self.harness.DEPLOYMENTS, NS, body))
            self.detail = f"(another owner's {engine} exists)"
        self._edit(name, {"strategy": "Restart"})

        def undo() -> None:
            self._edit(name, {"strategy": "TrafficSplit"})
            foreign = self.world.deployment(engine)
            if conflict and foreign is not None and not foreign["metadata"].get("ownerReferences"):
                self._spawn(f"delete {engine}", self.admin.delete(self.harness.DEPLOYMENTS, NS, engine))

        return undo

    def _hpa(self, name: str, now: float) -> Callable[[], None] | None:
        pool = f"{name}-{self.rng.choice(list(POOLS))}"
        if self.world.deployment(pool) is None:
            return None
        patch = {"spec": {"replicas": self.rng.randint(2, 4)}}
        self._spawn(
            f"hpa {pool}",
            self.admin.merge_patch(
                self.harness.DEPLOYMENTS, NS, pool, patch, params={"fieldManager": "horizontal-pod-autoscaler"}
            ),
        )
        return lambda: None


async def soak_cluster(args: argparse.Namespace) -> JSON:
    """The soak on a real control plane (tests/cluster/controlplane.py), the operators run as the chart runs them."""
    sys.path.insert(0, str(ROOT))  # tests.cluster: the control plane's starter
    from tests.cluster import harness  # noqa: PLC0415
    from tests.cluster.controlplane import FAIL_ANNOTATION, OPERATOR_NS, ControlPlane, find  # noqa: PLC0415

    assets = find()
    if isinstance(assets, str):
        raise SystemExit(f"no real control plane: {assets}")
    # SIGTERM cancels the run: the control plane's processes are stopped on the way out, not orphaned.
    this = asyncio.current_task()
    assert this is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, this.cancel)
    rng = random.Random(args.seed)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="chaos-soak-cluster-"))
    workdir.mkdir(parents=True, exist_ok=True)
    names = [f"soak-{i:03d}" for i in range(args.specserves)]
    plane = ControlPlane(assets, workdir / "control-plane")
    plane.workdir.mkdir(parents=True, exist_ok=True)
    try:
        started = time.monotonic()
        plane.start()
        plane.install_crds()
        plane.install_chart()
        # Pools of 1-2 replicas, HPA faults up to 4, a surge pod per roll: room for 8 pods per SpecServe.
        nodes = harness.add_gpu_capacity(plane, 8 * args.specserves)
        harness.prepare_namespace(plane, NS)
        print(f"control plane up in {time.monotonic() - started:.0f}s ({plane.workdir}), {nodes} kwok GPU nodes",
              flush=True)  # fmt: skip
        async with harness.Admin(plane) as admin:
            gateway = harness.Gateway(admin, NS, delay=0.1)
            caches = {DEPLOYMENTS: harness.Cache(admin, harness.DEPLOYMENTS, NS), HTTPROUTES: gateway.cache,
                      SPECSERVES: harness.Cache(admin, harness.SPECSERVES, NS),
                      LEASES: harness.Cache(admin, harness.LEASES, OPERATOR_NS)}  # fmt: skip
            tasks = [asyncio.create_task(c.run()) for c in caches.values()]
            try:
                await asyncio.gather(*(c.synced.wait() for c in caches.values()))
                world = ClusterWorld(caches)
                kubeconfig = plane.operator_kubeconfig("soak")

                async def create(docs: list[JSON]) -> None:
                    await harness.create_all(admin, harness.SPECSERVES, NS, docs)

                def chaos(checker: Checker, exposition: Exposition, prometheus: Prometheus | None,
                          operators: Operators, kinds: tuple[str, ...]) -> Chaos:  # fmt: skip
                    return ClusterChaos(admin, harness, FAIL_ANNOTATION, world, checker, exposition, prometheus,
                                        operators, rng, kinds)  # fmt: skip

                extra = {"control_plane": "kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok",
                         "faults_needing_the_fake": [k for k in FAULTS if k not in CLUSTER_FAULTS]}  # fmt: skip
                return await _soak(
                    args,
                    rng,
                    workdir,
                    names,
                    world,
                    Operators.make(kubeconfig, OPERATOR_NS),
                    create,
                    lambda: list(caches[HTTPROUTES].items.values()),
                    chaos,
                    CLUSTER_FAULTS,
                    extra,
                )
            finally:
                for task in tasks:
                    task.cancel()
    finally:
        plane.stop()


async def _chaos_phase(args: argparse.Namespace, rng: random.Random, checker: Checker, chaos: Chaos,
                       exposition: Exposition, operators: Operators) -> None:  # fmt: skip
    chaos_start = time.monotonic()
    checker.t0 = chaos_start
    chaos_end = chaos_start + args.minutes * 60
    next_fault = chaos_start + rng.expovariate(1 / args.fault_interval)
    while (now := time.monotonic()) < chaos_end:
        exposition.step(now)
        if now >= next_fault:
            chaos.inject(now)
            next_fault = now + rng.expovariate(1 / args.fault_interval)
        chaos.expire(now)
        _keep_replicas(operators)
        chaos.watch_leader(now)
        chaos.watch_hostile(now)
        await chaos.watch_second(now)
        checker.sample(now)
        await asyncio.sleep(0.25)
    print(f"[+{time.monotonic() - chaos_start:7.1f}s] faults stop; waiting for convergence", flush=True)


def _figures(checker: Checker, chaos: Chaos, operators: Operators) -> JSON:
    return {
        "faults": dict(chaos.started),
        "violations": [asdict(v) for v in checker.violations],
        "violations_by_kind": dict(Counter(v.kind for v in checker.violations)),
        "failovers": len(checker.failovers),
        "failover_p50_seconds": _percentile(checker.failovers, 0.5),
        "failover_p99_seconds": _percentile(checker.failovers, 0.99),
        "failovers_across_leader_change_seconds": [round(t, 2) for t in checker.failovers_across_leader_change],
        "recovered_before_failover": checker.recovered_before_failover,
        "leader_takeovers_seconds": [round(t, 2) for t in chaos.takeovers],
        "lease_lapses_seconds": [round(t, 2) for t in chaos.lapses],
        "operator_replicas_started": operators.started,
        "decisions_during_hostile_metrics": chaos.decisions_during_hostile,
        "second_operators_refusing": len(chaos.refused_seen),
    }


def _keep_replicas(operators: Operators) -> None:
    """Two replicas, as a Deployment with replicas: 2 keeps them (an exited one is replaced)."""
    operators.reap()
    while len(operators.replicas) < 2:
        operators.start_one()


async def _settle(checker: Checker, names: list[str], limit: float, operators: Operators,
                  sample: bool = False) -> float | None:  # fmt: skip
    """Seconds until every SpecServe converged and stayed so for STABLE seconds (None: not within ``limit``)."""
    start = time.monotonic()
    since: float | None = None
    while time.monotonic() - start < limit:
        _keep_replicas(operators)
        now = time.monotonic()
        if sample:
            checker.sample(now)
        if all(checker.converged(n) is None for n in names):
            since = now if since is None else since
            if now - since >= STABLE:
                return since - start
        else:
            since = None
        await asyncio.sleep(0.5)
    return None


def _print_summary(report: JSON) -> None:
    def ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value * 1000:.0f} ms"

    print("\n== chaos soak summary ==")
    print(f"SpecServes {report['specserves']}, {report['minutes']} min of faults, seed {report['seed']}, "
          f"resync {report['resync_seconds']:g}s, reaction bound {report['reaction_bound_seconds']:g}s, "
          f"Prometheus {'on' if report['prometheus'] else 'off'}")  # fmt: skip
    print(f"start-up to converged: {report.get('startup_seconds')}; after the faults: "
          f"{report.get('convergence_seconds')}")  # fmt: skip
    print(f"faults injected: {report['faults']}")
    print(f"failovers timed: {report['failovers']} (p50 {ms(report['failover_p50_seconds'])}, p99 "
          f"{ms(report['failover_p99_seconds'])}); pods back before any failover: "
          f"{report['recovered_before_failover']}")  # fmt: skip
    print(f"failovers across a leader change (s, from the pods' loss): "
          f"{report['failovers_across_leader_change_seconds']}")  # fmt: skip
    print(f"leader takeovers (s): {report['leader_takeovers_seconds']}")
    print(f"leases lapsed without a kill (s from the last renewal to the takeover): {report['lease_lapses_seconds']}")
    print(
        f"HTTPRoute spec changes: {report.get('route_writes')}; demand changes: {report.get('weight_changes_by_load')}"
    )
    print(f"other SpecServes' decisions while a hostile metric was published: "
          f"{report['decisions_during_hostile_metrics']}; second operators seen refusing to act: "
          f"{report['second_operators_refusing']}")  # fmt: skip
    print(f"switching rounds timed: {report.get('switching_rounds_timed')} "
          f"(s: {report.get('switching_round_seconds')}); leader CPU share: {report.get('leader_cpu_share')}; "
          f"load average: {report.get('load_average_1m')}")  # fmt: skip
    print(f"violations: {len(report['violations'])} {report['violations_by_kind']}")
    print(f"operator logs: {report['workdir']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--specserves", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=3.0, help="minutes of faults (then convergence)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the report here")
    parser.add_argument("--resync", type=float, default=10.0, help="the operator's --resync-seconds")
    parser.add_argument("--lease", type=float, default=6.0, help="the operator's --lease-seconds")
    parser.add_argument("--reaction-bound", type=float, default=5.0, help="grace before dead-weight is a breach")
    parser.add_argument("--fault-interval", type=float, default=6.0, help="mean seconds between new faults")
    parser.add_argument("--settle", type=float, default=90.0, help="seconds allowed to converge")
    parser.add_argument("--no-prometheus", action="store_true", help="no load signal (failure paths only)")
    parser.add_argument("--faults", help=f"only these faults, comma-separated (default: all of {', '.join(FAULTS)})")
    parser.add_argument("--workdir", help="where the operator logs and Prometheus data go (default: a temp dir)")
    parser.add_argument("--cluster", action="store_true", help="on a real control plane with kwok (see above)")
    parser.add_argument("--settle-startup", type=float, help="seconds allowed to converge at start (default --settle)")
    args = parser.parse_args()
    report = asyncio.run(soak(args))
    _print_summary(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())

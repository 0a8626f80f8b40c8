"""SpecServe's pods against real SGLang on one GPU machine (no cluster, no network): the driver of docs/real-engine.md.

usage (on the GPU machine, after scripts/gpu/run.sh has unpacked SGLang and made /tmp/model):
    python3 real_engine.py PHASE --example EXAMPLE.yaml --out DIR [--deadline SECONDS]
PHASE: core      baseline + EAGLE-3 speculative pods of the example (TrafficSplit): Ready via the probes, the
                 operator's Direct metrics read under load, `specserve bench` on both, a preStop drain check
       adaptive  the example as strategy: Adaptive: the command line the 0.5.17 rule refuses (expected to crash at
                 start), one the rule accepts (crossoverConcurrency), and STANDALONE (draft = target: accepts all),
                 each benched when Ready

Each pod is rendered by `specserve render` (this repository's operator, PYTHONPATH), its container command, args
and env are taken from the Deployment and launched as the kubelet would, with only these substitutions (SUBST, also
written to the results): the model and draft paths point at a local config of the same architecture with dummy
weights (no network, no weights), `--load-format dummy` is added, the attention backend is triton and the sampling
backend pytorch (the offline SGLang overlay carries no FlashAttention-3), the port and --mem-fraction-static differ
per pod (several pods share one GPU here, each started after the previous one took its memory), Secret-backed env
vars are dropped (nothing is downloaded) and the model cache points at a local folder.
Writes DIR/PHASE.json (everything measured) and DIR/bench/*.json (the raw bench results).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from specserve.metrics.direct import DirectSource
from specserve.metrics.promql import PoolKey, Signal, Windows, grouped_queries
from specserve.metrics.signal import PoolTarget, ReadTarget, index, read

MODEL, DRAFT_EAGLE3 = "/tmp/model", "/tmp/model-eagle3"
NAMESPACE = "llm"
T0 = time.monotonic()
# The server's log line once it has taken its GPU memory: the next pod on the same GPU may start.
MEMORY_TAKEN = r"KV Cache is allocated|Capture cuda graph begin"


def now() -> float:
    return round(time.monotonic() - T0, 1)


def log(*parts: object) -> None:
    print(f"[{now():7.1f}s]", *parts, flush=True)


# ------------------------------------------------------------------------------------------------ rendering


def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


ONE_POOL = {"pools": {"baseline": {"replicas": 0}}}
ADAPTIVE = {"spec": {"strategy": "Adaptive", **ONE_POOL}}
# SGLang's built-in adaptive config, as rendered for a release without the 0.5.17 limit.
ADAPTIVE_BUILTIN = deep_merge(ADAPTIVE, {"spec": {"engine": {"sglangVersion": "0.5.23"}}})
# The target as its own draft: identical dummy weights, so it accepts ~all.
STANDALONE = {"spec": {"speculative": {"algorithm": "STANDALONE", "draftModelPath": MODEL}, **ONE_POOL}}


@dataclass
class Pod:
    name: str
    role: str
    command: list[str]
    args: list[str]
    env: list[dict[str, Any]]
    startup: dict[str, Any]
    readiness: dict[str, Any]
    liveness: dict[str, Any]
    pre_stop: list[str]
    grace: int
    config_maps: dict[str, dict[str, str]] = field(default_factory=dict)  # mount path -> ConfigMap data


def render(example: Path, patch: dict[str, Any], out: Path, tag: str) -> tuple[list[Pod], str]:
    """`specserve render` of the example with `patch` merged into it; the Deployments as Pods."""
    doc = deep_merge(yaml.safe_load(example.read_text()), patch)
    spec_file = out / f"spec-{tag}.yaml"
    spec_file.write_text(yaml.safe_dump(doc))
    proc = subprocess.run(
        [sys.executable, "-m", "specserve.cli", "render", str(spec_file)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return [], proc.stderr.strip()
    (out / f"rendered-{tag}.yaml").write_text(proc.stdout)
    objs = [o for o in yaml.safe_load_all(proc.stdout) if o]
    cms = {o["metadata"]["name"]: o.get("data", {}) for o in objs if o["kind"] == "ConfigMap"}
    pods = []
    for o in objs:
        if o["kind"] != "Deployment":
            continue
        tpl = o["spec"]["template"]["spec"]
        c = next(c for c in tpl["containers"] if c["name"] == "sglang")
        vols = {v["name"]: v for v in tpl.get("volumes", [])}
        mounted = {
            m["mountPath"]: cms[vols[m["name"]]["configMap"]["name"]]
            for m in c.get("volumeMounts", [])
            if "configMap" in vols.get(m["name"], {})
        }
        pods.append(
            Pod(
                name=o["metadata"]["name"],
                role=o["spec"]["template"]["metadata"]["labels"]["specserve.io/pool"],
                command=c["command"],
                args=c["args"],
                env=c.get("env", []),
                startup=c["startupProbe"],
                readiness=c["readinessProbe"],
                liveness=c["livenessProbe"],
                pre_stop=c["lifecycle"]["preStop"]["exec"]["command"],
                grace=tpl.get("terminationGracePeriodSeconds", 30),
                config_maps=mounted,
            )
        )
    return pods, ""


# ------------------------------------------------------------------------------------------------ launching


def flag_value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def set_flag(args: list[str], flag: str, value: str | None, subst: list[str], why: str) -> list[str]:
    """Replace (or add) `flag value`; value None adds a bare flag. Every change is recorded with its reason."""
    args = list(args)
    if flag in args:
        i = args.index(flag)
        old = args[i + 1] if value is not None else ""
        if value is not None:
            args[i + 1] = value
        subst.append(f"{flag} {old} -> {value}: {why}")
    else:
        args += [flag] if value is None else [flag, value]
        subst.append(f"+{flag} {value or ''}: {why}".replace(" :", ":"))
    return args


@dataclass
class Running:
    pod: Pod
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    argv: list[str]
    subst: list[str]
    started: float
    result: dict[str, Any] = field(default_factory=dict)

    def record(self, name: str, probes: dict[str, Any]) -> None:
        """The pod's entry in the results: its name, command line, substitutions and the kubelet's probes."""
        self.result = {"pod": name, "argv": self.argv, "substituted": self.subst, **probes}


def launch(
    pod: Pod,
    port: int,
    mem_fraction: float,
    draft: str | None,
    out: Path,
    tag: str,
    vary: dict[str, str | None] | None = None,
) -> Running:
    """vary: flags changed on purpose (the isolation runs), after the standard substitutions."""
    subst: list[str] = []
    args = set_flag(pod.args, "--model-path", MODEL, subst, "no weights can be downloaded: same-shape config")
    args = set_flag(args, "--load-format", "dummy", subst, "dummy weights: real compute, no checkpoint")
    if "--speculative-draft-model-path" in args and draft:
        args = set_flag(args, "--speculative-draft-model-path", draft, subst, "local draft config")
        args = set_flag(args, "--speculative-draft-load-format", "dummy", subst, "dummy draft weights")
    args = set_flag(args, "--attention-backend", "triton", subst, "the offline overlay has no FlashAttention-3")
    args = set_flag(args, "--sampling-backend", "pytorch", subst, "as the overlay is known to run (shared README)")
    args = set_flag(args, "--host", "127.0.0.1", subst, "one machine, loopback")
    args = set_flag(args, "--port", str(port), subst, "several pods share this machine")
    args = set_flag(
        args, "--mem-fraction-static", f"{mem_fraction:g}", subst, "several pods share one GPU (cumulative fraction)"
    )
    for mount, data in pod.config_maps.items():
        local = out / f"cm-{tag}"
        local.mkdir(exist_ok=True)
        for key, text in data.items():
            (local / key).write_text(text)
        args = [a.replace(mount, str(local)) if a.startswith(mount) else a for a in args]
        subst.append(f"ConfigMap mount {mount} -> {local}: the kubelet's volume")
    for flag, value in (vary or {}).items():
        args = set_flag(args, flag, value, subst, "isolation variant")
    env = dict(os.environ)
    for e in pod.env:
        if "value" in e:
            env[e["name"]] = "/tmp/hf-home" if e["name"] == "HF_HOME" else str(e["value"])
        else:
            subst.append(f"env {e['name']} (from a Secret) dropped: nothing is downloaded")
    argv = pod.command + args
    if os.environ.get("FAKE_ENGINE"):  # a dry run of this script on a CPU machine: the emulator, same port
        from specserve_tools.demo.podargs import emulator_argv  # noqa: PLC0415  (the dry run only)

        argv = emulator_argv(args, port, "eagle3-llama31-8b-h100", 3.0, time_scale=float(os.environ["FAKE_ENGINE"]))
    log_path = out / f"server-{tag}.log"
    log(f"launch {tag}: {' '.join(argv)}")
    proc = subprocess.Popen(argv, stdout=log_path.open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return Running(pod, port, proc, log_path, argv, subst, time.monotonic())


def error_lines(path: Path, n: int = 12) -> list[str]:
    lines = path.read_text(errors="replace").splitlines()
    hits = [ln for ln in lines if re.search(r"Error|error:|Traceback|illegal|CUDA|Exception|RuntimeError", ln)]
    return (hits or lines)[-n:]


async def http_get(session: aiohttp.ClientSession, url: str, timeout: float) -> int:
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout)) as r:
            await r.read()
            return r.status
    except (aiohttp.ClientError, TimeoutError, OSError):
        return 0


async def kubelet_start(
    run: Running, session: aiohttp.ClientSession, budget: float, out: Path, tag: str
) -> dict[str, Any]:
    """The kubelet's probes, with their own periods: startup until success or failureThreshold (then the
    container would be restarted: recorded as the failure), then readiness and liveness once."""
    p, base = run.pod.startup, f"http://127.0.0.1:{run.port}"
    res: dict[str, Any] = {"startup_probe": p["httpGet"]["path"], "polls": 0}
    await asyncio.sleep(p.get("initialDelaySeconds", 0))
    fails = 0
    while True:
        if run.proc.poll() is not None:
            res.update(
                ready=False,
                failure=f"process exited with {run.proc.returncode} before Ready",
                log=error_lines(run.log_path),
                exited_after_s=round(time.monotonic() - run.started, 1),
            )
            return res
        res["polls"] += 1
        code = await http_get(session, base + p["httpGet"]["path"], p.get("timeoutSeconds", 1))
        if code == 200:
            break
        fails += 1
        if fails >= p.get("failureThreshold", 3) or time.monotonic() - run.started > budget:
            res.update(
                ready=False,
                failure=f"startupProbe failed {fails} times (last HTTP {code})",
                log=error_lines(run.log_path),
            )
            return res
        await asyncio.sleep(p.get("periodSeconds", 10))
    res["startup_s"] = round(time.monotonic() - run.started, 1)
    for name, probe in (("readiness", run.pod.readiness), ("liveness", run.pod.liveness)):
        code = await http_get(session, base + probe["httpGet"]["path"], probe.get("timeoutSeconds", 1))
        res[f"{name}_probe"] = {"path": probe["httpGet"]["path"], "http": code}
    res["ready"] = res["readiness_probe"]["http"] == 200 and res["liveness_probe"]["http"] == 200
    with contextlib.suppress(aiohttp.ClientError, TimeoutError, OSError):  # the raw exposition, for the docs
        async with session.get(base + "/metrics", timeout=aiohttp.ClientTimeout(total=10)) as r:
            (out / f"metrics-{tag}.txt").write_text(await r.text())
    if not res["ready"]:
        res["failure"] = "readiness/liveness probe failed after startup"
    log(f"{run.pod.role}: {res}")
    return res


def wait_log(run: Running, pattern: str, timeout: float) -> bool:
    """Until the server logged `pattern` (its memory is taken), it died, or timeout."""
    end = time.monotonic() + (3 if os.environ.get("FAKE_ENGINE") else timeout)
    while time.monotonic() < end:
        if run.proc.poll() is not None:
            return False
        if re.search(pattern, run.log_path.read_text(errors="replace")):
            return True
        time.sleep(1)
    return False


def stop(run: Running, grace: float = 10) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.proc.pid, signal.SIGTERM)
    try:
        run.proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.proc.pid, signal.SIGKILL)
        run.proc.wait()


@dataclass(frozen=True)
class Launch:
    """One pod of a phase's plan: its port, cumulative memory fraction and tag in the results."""

    pod: Pod
    port: int
    mem_fraction: float
    tag: str
    draft: str | None = DRAFT_EAGLE3
    vary: dict[str, str | None] | None = None


async def start_in_turn(session: aiohttp.ClientSession, out: Path, plan: list[Launch]) -> list[Running]:
    """The plan's pods on one GPU (cumulative memory fractions), each launched once the one before has taken its
    memory (or died: its crash frees it), through the kubelet's probes; each one's result recorded under its tag."""
    running: list[Running] = []
    starts = []
    for step in plan:
        if running:
            await asyncio.to_thread(wait_log, running[-1], MEMORY_TAKEN, 150)
        r = launch(step.pod, step.port, step.mem_fraction, step.draft, out, step.tag, step.vary)
        running.append(r)
        starts.append(asyncio.create_task(kubelet_start(r, session, 400, out, step.tag)))
    for r, task, step in zip(running, starts, plan, strict=True):
        r.record(step.tag, await task)
    return running


# ------------------------------------------------------------------------------------------------ metrics


class Sampler:
    """The operator's Direct metrics path (specserve.metrics.direct + signal.read) against the live pods."""

    def __init__(self, name: str, scrape_seconds: float = 2.0) -> None:
        self.name, self.scrape = name, scrape_seconds
        self.windows = Windows.of(evaluation_seconds=10, scrape_seconds=scrape_seconds)
        self.pools: dict[str, Running] = {}
        self.rows: list[dict[str, Any]] = []
        self.phase = ""
        self._task: asyncio.Task[None] | None = None

    async def _loop(self, session: aiohttp.ClientSession) -> None:
        async def fetch(url: str) -> str:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=5)) as r:
                r.raise_for_status()
                return await r.text()

        source = DirectSource(fetch, time.time)
        while True:
            pools = {k: v for k, v in self.pools.items() if v.proc.poll() is None}
            if pools:
                keys = {
                    PoolKey(NAMESPACE, self.name, role): [f"http://127.0.0.1:{r.port}/metrics"]
                    for role, r in pools.items()
                }
                results = await source.read(keys, self.windows)
                target = ReadTarget(
                    NAMESPACE, self.name, tuple(PoolTarget(role, 1, role != "baseline") for role in pools), self.scrape
                )
                reading = read(target, index(results), time.time())
                row: dict[str, Any] = {
                    "t": now(),
                    "phase": self.phase,
                    "demand": reading.sample.demand,
                    "reason": reading.reason,
                    "signals": {},
                }
                for r in results:
                    assert r.query.key is not None
                    row["signals"].setdefault(r.query.key.pool, {})[r.query.signal.value] = (
                        r.error if r.error else next(iter(r.values.values()), None)
                    )
                self.rows.append(row)
            await asyncio.sleep(self.scrape)

    def start(self, session: aiohttp.ClientSession) -> None:
        self._task = asyncio.create_task(self._loop(session))

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def summary(self) -> dict[str, Any]:
        """Per phase and pool: each signal's value at the sample with the most running requests."""
        out: dict[str, Any] = {}
        for row in self.rows:
            for pool, sig in row["signals"].items():
                slot = out.setdefault(row["phase"], {}).setdefault(pool, {"samples": 0, "peak": None})
                slot["samples"] += 1
                running = sig.get(Signal.RUNNING.value)
                best = slot["peak"]
                if isinstance(running, float) and (best is None or running > (best.get("running") or 0)):
                    slot["peak"] = dict(sig, demand=row["demand"], t=row["t"])
        return out


@contextlib.asynccontextmanager
async def sampled(res: dict[str, Any]) -> AsyncIterator[tuple[aiohttp.ClientSession, Sampler]]:
    """A client session with the sampler reading on it; what it read goes to res["metrics"] when the block ends."""
    sampler = Sampler("llama31-8b-h200")
    async with aiohttp.ClientSession() as session:
        sampler.start(session)
        yield session, sampler
        await sampler.close()
    res["metrics"] = {"summary": sampler.summary(), "timeline": sampler.rows}


# ------------------------------------------------------------------------------------------------ bench


async def bench(run: Running, label: str, name: str, out: Path, levels: str, max_tokens: int) -> dict[str, Any]:
    help_text = subprocess.run(
        [sys.executable, "-m", "specserve_tools", "bench", "--help"], capture_output=True, text=True, check=False
    ).stdout
    repeat = ["--repeats", "3"] if "--repeats" in help_text else []
    runs = 1 if repeat else 2  # without the repeats flag, two plain sweeps (the calibrate branch compares them)
    done = []
    for i in range(runs):
        stem = name if runs == 1 else f"{name}-r{i + 1}"
        argv = [  # the tools' own entry (the GPU machine runs a checkout on PYTHONPATH: no installed entry points)
            sys.executable,
            "-m",
            "specserve_tools",
            "bench",
            "--url",
            f"http://127.0.0.1:{run.port}",
            "--levels",
            levels,
            "--max-tokens",
            str(max_tokens),
            "--ignore-eos",
            "--api",
            "completions",
            "--label",
            label,
            "--name",
            stem,
            "--output-dir",
            str(out / "bench"),
            "--wait-ready",
            "30",
            "--no-plot",
            "--quiet",
            *repeat,
        ]
        t = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        text = (await proc.communicate())[0].decode(errors="replace")
        done.append(
            {
                "name": stem,
                "rc": proc.returncode,
                "seconds": round(time.monotonic() - t, 1),
                "argv": argv[1:],
                "tail": text.splitlines()[-12:],
            }
        )
        log(f"bench {stem}: rc={proc.returncode} in {done[-1]['seconds']} s")
    return {"runs": done}


# ------------------------------------------------------------------------------------------------ drain


async def bench_recorded(
    sampler: Sampler, run: Running, label: str, name: str, a: argparse.Namespace, out: Path, res: dict[str, Any]
) -> None:
    """`bench` of `run` in the sampler's phase `bench NAME`, its result in res["bench"][name]."""
    sampler.phase = f"bench {name}"
    res.setdefault("bench", {})[name] = await bench(run, label, name, out, a.levels, a.max_tokens)


async def drain_check(
    run: Running, session: aiohttp.ClientSession, concurrency: int, lag: float, max_tokens: int = 128
) -> dict[str, Any]:
    """Terminate a pod under load as the kubelet does: preStop (the rendered exec command), then SIGTERM to the
    container's process, SIGKILL at the grace period. New requests keep arriving for `lag` seconds after the
    preStop starts (the endpoint removal reaching the gateway); every request sent must complete."""
    url = f"http://127.0.0.1:{run.port}/v1/completions"
    model = flag_value(run.argv, "--served-model-name") or MODEL
    sending = True
    stats = {"sent": 0, "ok": 0, "failed": 0}
    errors: list[str] = []

    async def worker(i: int) -> None:
        n = 0
        while sending:
            n += 1
            stats["sent"] += 1
            body = {"model": model, "prompt": f"drain {i} {n} " * 20, "max_tokens": max_tokens, "ignore_eos": True}
            try:
                async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=120)) as r:
                    await r.read()
                    ok = r.status == 200
                    err = f"HTTP {r.status}"
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                ok, err = False, f"{type(exc).__name__}: {exc}"
            stats["ok" if ok else "failed"] += 1
            if not ok and len(errors) < 5:
                errors.append(err)

    workers = [asyncio.create_task(worker(i)) for i in range(concurrency)]
    await asyncio.sleep(8)
    t = time.monotonic()
    pre = await asyncio.create_subprocess_exec(*run.pod.pre_stop)
    await asyncio.sleep(lag)
    sending = False
    rc = await pre.wait()
    pre_s = time.monotonic() - t
    run.proc.send_signal(signal.SIGTERM)  # the container's PID 1
    try:
        await asyncio.wait_for(asyncio.to_thread(run.proc.wait), max(1.0, run.pod.grace - pre_s))
        how = "exited after SIGTERM"
    except TimeoutError:
        os.killpg(run.proc.pid, signal.SIGKILL)
        how = "SIGKILL at the grace period"
    await asyncio.gather(*workers)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(run.proc.pid, signal.SIGKILL)
    return dict(
        stats,
        errors=errors,
        concurrency=concurrency,
        max_tokens=max_tokens,
        endpoint_lag_s=lag,
        prestop_rc=rc,
        prestop_s=round(pre_s, 1),
        termination=how,
        lost=stats["sent"] - stats["ok"],
    )


# ------------------------------------------------------------------------------------------------ phases


async def phase_core(a: argparse.Namespace, out: Path, res: dict[str, Any]) -> list[Running]:
    pods, err = render(a.example, {}, out, "trafficsplit")
    res["render"] = err or [p.name for p in pods]
    by_role = {p.role: p for p in pods}
    running: list[Running] = []
    async with sampled(res) as (session, sampler):
        res["promql"] = {q.signal.value: q.promql for q in grouped_queries(sampler.windows)}
        base = launch(by_role["baseline"], 30001, 0.3, None, out, "baseline")
        running.append(base)
        await asyncio.to_thread(wait_log, base, MEMORY_TAKEN, 150)
        spec = launch(by_role["speculative"], 30000, 0.7, DRAFT_EAGLE3, out, "eagle3")
        running.append(spec)
        ready = await asyncio.gather(*(kubelet_start(r, session, 400, out, r.pod.role) for r in running))
        for r, st in zip(running, ready, strict=True):
            r.record(r.pod.name, st)
            if st.get("ready"):
                sampler.pools[r.pod.role] = r
        res["pods"] = [r.result for r in running]
        for r, label, name in ((base, "baseline", "h200-baseline"), (spec, "speculative", "h200-eagle3")):
            if r.result.get("ready") and time.monotonic() - T0 < a.deadline - 150:
                await bench_recorded(sampler, r, label, name, a, out, res)
        sampler.phase = "idle"
        if spec.result.get("ready") and time.monotonic() - T0 < a.deadline - 60:
            sampler.phase = "drain"
            res["drain"] = await drain_check(spec, session, concurrency=16, lag=2.0)
            log(f"drain: {res['drain']}")
        await asyncio.sleep(2 * sampler.scrape)
    return running


async def phase_adaptive(a: argparse.Namespace, out: Path, res: dict[str, Any]) -> list[Running]:
    # (1) what the 0.5.17 rule now refuses: numSteps 3 with SGLang's built-in config (candidates up to 7).
    refused = deep_merge(ADAPTIVE, {"spec": {"engine": {"sglangVersion": "0.5.17"}}})
    _, err = render(a.example, refused, out, "adaptive-refused")
    res["refused_render"] = err
    # The same command line as rendered for a release without the limit (0.5.23 renders the same flags here).
    old, _ = render(a.example, ADAPTIVE_BUILTIN, out, "adaptive-builtin")
    # (2) accepted on 0.5.17: the operator's own config from crossoverConcurrency (candidates numSteps and 0).
    ok, err2 = render(
        a.example,
        deep_merge(ADAPTIVE, {"spec": {"switching": {"crossoverConcurrency": 16}}}),
        out,
        "adaptive-crossover",
    )
    res["accepted_render"] = err2 or [p.name for p in ok]
    # (3) STANDALONE with the target as its own draft: identical dummy weights, so it accepts ~all.
    sa, err3 = render(a.example, STANDALONE, out, "standalone")
    res["standalone_render"] = err3 or [p.name for p in sa]
    # (4) the built-in config at its largest candidate (numSteps 7): what the rule accepts without a crossover.
    at_max, err4 = render(
        a.example, deep_merge(ADAPTIVE, {"spec": {"speculative": {"numSteps": 7}}}), out, "adaptive-max"
    )
    res["max_render"] = err4 or [p.name for p in at_max]
    running: list[Running] = []
    async with sampled(res) as (session, sampler):
        plan = [
            Launch(old[0], 30010, 0.15, "adaptive-builtin"),
            Launch(at_max[0], 30011, 0.3, "adaptive-max"),
            Launch(ok[0], 30012, 0.45, "adaptive"),
        ]
        running += await start_in_turn(session, out, plan)
        for r in running[:2]:
            if r.proc.poll() is None:
                stop(r)
        ad = running[2]
        if ad.result.get("ready"):
            sampler.pools = {"engine": ad}
            await bench_recorded(sampler, ad, "adaptive", "h200-adaptive", a, out, res)
            sampler.pools = {}
            stop(ad)
        sa_pod = next(p for p in sa if p.role == "speculative")
        st = launch(sa_pod, 30013, 0.85, MODEL, out, "standalone")
        running.append(st)
        st.record("standalone", await kubelet_start(st, session, 300, out, "standalone"))
        res["pods"] = [r.result for r in running]
        if st.result.get("ready") and time.monotonic() - T0 < a.deadline - 80:
            sampler.pools = {"speculative": st}
            await bench_recorded(sampler, st, "speculative", "h200-standalone", a, out, res)
    return running


async def phase_isolate(a: argparse.Namespace, out: Path, res: dict[str, Any]) -> list[Running]:
    """The refused Adaptive command line with one thing changed at a time, then STANDALONE benched."""
    old, _ = render(a.example, ADAPTIVE_BUILTIN, out, "adaptive-builtin")
    sa, _ = render(a.example, STANDALONE, out, "standalone")
    running: list[Running] = []
    async with sampled(res) as (session, sampler):
        plan = [
            Launch(old[0], 30020, 0.15, "adaptive-nocudagraph", vary={"--disable-cuda-graph": None}),
            Launch(old[0], 30021, 0.3, "adaptive-flashinfer", vary={"--attention-backend": "flashinfer"}),
            Launch(next(p for p in sa if p.role == "speculative"), 30022, 0.85, "standalone", MODEL, {}),
        ]
        running += await start_in_turn(session, out, plan)
        res["pods"] = [r.result for r in running]
        st = running[2]
        if st.result.get("ready"):
            sampler.pools = {"speculative": st}
            await bench_recorded(sampler, st, "speculative", "h200-standalone", a, out, res)
    return running


async def phase_extra(a: argparse.Namespace, out: Path, res: dict[str, Any]) -> list[Running]:
    """The flashinfer isolation case alone, then a drain whose requests outlast the preStop's first wait."""
    old, _ = render(a.example, ADAPTIVE_BUILTIN, out, "adaptive-builtin")
    pods, _ = render(a.example, {}, out, "trafficsplit")
    base_pod = next(p for p in pods if p.role == "baseline")
    running: list[Running] = []
    async with aiohttp.ClientSession() as session:
        fi = launch(old[0], 30030, 0.3, DRAFT_EAGLE3, out, "adaptive-flashinfer", {"--attention-backend": "flashinfer"})
        running.append(fi)
        fi_task = asyncio.create_task(kubelet_start(fi, session, 300, out, "adaptive-flashinfer"))
        # the next pod starts once this one has its memory, or has died (its crash frees it)
        await asyncio.to_thread(wait_log, fi, r"Capture cuda graph end|Capture draft extend CUDA graph begin", 150)
        base = launch(base_pod, 30000, 0.75, None, out, "baseline")  # port 30000: the preStop's own URL
        running.append(base)
        base_task = asyncio.create_task(kubelet_start(base, session, 300, out, "baseline"))
        fi.record("adaptive-flashinfer", await fi_task)
        base.record("baseline", await base_task)
        res["pods"] = [r.result for r in running]
        if base.result.get("ready"):
            res["drain"] = await drain_check(base, session, concurrency=16, lag=2.0, max_tokens=1024)
            log(f"drain: {res['drain']}")
    return running


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("phase", choices=["core", "adaptive", "isolate", "extra"])
    p.add_argument("--example", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--deadline", type=float, default=540, help="seconds this phase may take; later steps skip")
    p.add_argument("--levels", default="1,2,4,8,16,32,64")
    p.add_argument("--max-tokens", type=int, default=128)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"phase": a.phase, "example": str(a.example), "started": time.time()}
    running: list[Running] = []
    try:
        fn = {"core": phase_core, "adaptive": phase_adaptive, "isolate": phase_isolate, "extra": phase_extra}[a.phase]
        running = asyncio.run(fn(a, a.out, res))
    except Exception as exc:  # the results so far still go back
        res["error"] = traceback.format_exc()
        log("error", exc)
    finally:
        for r in running:
            if r.proc.poll() is None:
                stop(r, grace=5)
        res["seconds"] = now()
        (a.out / f"{a.phase}.json").write_text(json.dumps(res, indent=1, default=str))
        log(f"wrote {a.out / (a.phase + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

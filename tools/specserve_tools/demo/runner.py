"""`specserve demo` step by step: start every piece, run the load, report, and stop everything it started.

Each step has a name; a failure says which one ("step 'start HAProxy' failed: ..."). Whatever happens (an
error, Ctrl-C, SIGTERM) the finally block stops every process group the supervisor started."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from specserve.api.validation import parse_object
from specserve.kube.kinds import PODMONITOR, SPECSERVE
from specserve.plugin import view as plugin_view
from specserve.render import render
from specserve_tools.demo import cluster, realplane
from specserve_tools.demo.gateway import start_gateway
from specserve_tools.demo.kubeapi import DemoApi
from specserve_tools.demo.kubelet import Kubelet, free_port
from specserve_tools.demo.load import LoadGenerator, ramp
from specserve_tools.demo.procs import StepFailedError, Supervisor, step
from specserve_tools.demo.prometheus import start_prometheus
from specserve_tools.demo.report import Summary, lines, plot, summarize
from specserve_tools.demo.sampling import gateway_responses, sample
from specserve_tools.demo.scenario import NAME, NAMESPACE, Scenario
from specserve_tools.demo.view import View, make_view
from specserve_tools.demo.wiring import NAMESPACES, Demo, Options, gateway_answers
from specserve_tools.emulator.profile import Profile, load_profile

READY_TIMEOUT = 120.0
SCRAPE_SECONDS = 1.0
DEMO_EXTRA = ("matplotlib", "jsonschema", "celpy", "kubernetes_validate")  # the `demo` extra's modules


async def _wait_ready(demo: Demo, timeout: float) -> dict[str, Any]:
    """Until the SpecServe says Ready and the gateway has an endpoint to send traffic to."""
    assert demo.api is not None
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        obj = await demo.api.get(SPECSERVE, NAMESPACE, NAME) or {}
        status = obj.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        serving = demo.gateway is not None and any(demo.gateway.weights.values())
        if ready and serving and demo.gateway and await gateway_answers(demo.session, demo.gateway.url):
            return status
        demo.check()
        await asyncio.sleep(0.25)
    conditions = {c.get("type"): f"{c.get('status')} ({c.get('reason')})" for c in status.get("conditions") or []}
    raise RuntimeError(f"not Ready within {timeout:g} s: conditions {conditions}, endpoints {len(demo.endpoints)}")


async def _run_load(demo: Demo, scenario: Scenario, view: View) -> LoadGenerator:
    assert demo.gateway is not None
    low, high = scenario.demand_range()
    load = LoadGenerator(demo.gateway.url, "demo", ramp(scenario.duration, low, high), scenario.max_tokens)
    stop = asyncio.Event()
    task = asyncio.create_task(load.run(stop, clients=int(high) + 1))
    try:
        end = time.monotonic() + scenario.duration
        while time.monotonic() < end:
            demo.check()
            if task.done():
                task.result()  # raises what stopped it
            now, new = await sample(demo, load, time.monotonic())
            ok = sum(r.error is None for r in load.records)
            view.update(now, ok, new)
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - load.t0 - now.t)))
    finally:
        stop.set()
        await task
    return load


async def _start(demo: Demo, profile: Profile, view: View, stop: asyncio.Event) -> Scenario:
    """Every step up to Ready pools: the API, the gateway, Prometheus, the SpecServe, the operator, the kubelet."""
    sup, workdir, opts = demo.sup, demo.workdir, demo.opts
    with step("check the tools"):
        for tool in ("haproxy", "prometheus"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} not found: apt-get install -y {tool} (scripts/test.sh does)")
        missing = [m for m in DEMO_EXTRA if importlib.util.find_spec(m) is None]
        if missing:
            raise RuntimeError(f"{', '.join(missing)} not installed: pip install 'specserve-tools[demo]'")
    kubeconfig = None
    if opts.cluster:
        with step("start the real control plane"):
            view.note("starting a real control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok)")
            demo.real = real = await realplane.start(workdir / "control-plane")
            demo.api_session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=real.ssl_context()))
            demo.api = api = DemoApi(real.server, demo.api_session)
            kubeconfig = real.operator_kubeconfig()
            view.note(f"Kubernetes API: kube-apiserver on {real.server} (TLS, RBAC; the chart installed by helm)")
    else:
        with step("start the fake Kubernetes API"):
            _, api_url = await cluster.start_api(sup, free_port())
            demo.api = api = DemoApi(api_url, demo.session)
            view.note(f"fake Kubernetes API on {api_url}")
    with step("start HAProxy"):
        demo.gateway = gateway = await start_gateway(sup, workdir, free_port(), free_port())
        view.note(f"gateway (HAProxy) on {gateway.url}, its exporter on :{gateway.exporter_port}")
    with step("start Prometheus"):
        demo.prometheus = prom = await start_prometheus(
            sup, workdir / "prometheus", free_port(), gateway.exporter_port, SCRAPE_SECONDS
        )
        view.note(f"Prometheus on {prom.url}")
    scenario = Scenario(opts.strategy, profile, opts.duration, opts.compression, prom.url)
    doc = scenario.specserve()
    with step("apply the SpecServe"):
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        await api.create(NAMESPACES, "", namespace)
        await api.create(SPECSERVE, NAMESPACE, doc)
        demo.pod_monitor = next(m for m in render(parse_object(doc)) if m["kind"] == "PodMonitor")
    with step("start the operator"):
        await cluster.start_operator(sup, workdir, api.base, NAMESPACE, prom.url, free_port(), kubeconfig)
        where = "the real API server, as the chart's ServiceAccount" if opts.cluster else "the fake API"
        view.note(f"operator: `specserve run` against {where}")
    with step("start the kubelet"):
        demo.kubelet = Kubelet(
            api,
            sup,
            NAMESPACE,
            profile.name,
            workdir,
            compression=opts.compression,
            startup_seconds=scenario.startup_seconds,
            on_endpoints=demo.on_endpoints,
            on_pod_gone=demo.on_pod_gone,
            on_pods=demo.on_pods,
        )
        demo.background.append(asyncio.create_task(demo.kubelet.run(stop), name="the kubelet"))
        demo.background.append(asyncio.create_task(demo.watch_route(stop), name="the gateway controller"))
    with step("wait for the pools to be Ready"):
        await _wait_ready(demo, READY_TIMEOUT)
        live = await api.get(PODMONITOR, NAMESPACE, NAME)
        demo.pod_monitor = live or demo.pod_monitor  # what the operator applied, when it did
        low, high = scenario.demand_range()
        view.note(f"pools Ready; load ramps {low:g} -> {high:g} -> {low:g} over {opts.duration:g} s")
    return scenario


async def _report(demo: Demo, load: LoadGenerator, title: str) -> Summary:
    assert demo.api is not None
    opts = demo.opts
    obj = await demo.api.get(SPECSERVE, NAMESPACE, NAME) or {}
    history = (obj.get("status") or {}).get("history") or []
    window = max(5.0, opts.duration / 12)
    summary = summarize(load.records, load.t0, demo.timeline, history, window)
    summary.gateway_responses = await gateway_responses(demo, SCRAPE_SECONDS)
    summary.status_view = status_view(obj)
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "summary.json").write_text(summary.to_json(), encoding="utf-8")
    plot(demo.timeline, opts.out / "timeline.png", title)
    return summary


async def run_demo(opts: Options, view: View | None = None) -> Summary:
    profile = load_profile(opts.profile)
    workdir = Path(tempfile.mkdtemp(prefix="specserve-demo-"))
    title = f"specserve demo: {opts.strategy}, {profile.name}"
    view = view or make_view(title, opts.duration, opts.plain)
    stop = asyncio.Event()
    demo = Demo(opts, Supervisor(workdir / "logs"), workdir, aiohttp.ClientSession())
    try:
        scenario = await _start(demo, profile, view, stop)
        with step("run the load"):
            load = await _run_load(demo, scenario, view)
        with step("write the report"):
            return await _report(demo, load, title)
    finally:
        view.close()
        stop.set()
        for task in demo.background:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, timeout=10)
        await demo.session.close()
        if demo.api_session is not None:
            await demo.api_session.close()
        await demo.sup.stop_all()
        if demo.real is not None:
            await asyncio.to_thread(demo.real.stop)
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "pids.json").write_text(json.dumps(demo.sup.started), encoding="utf-8")
        if not opts.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def status_view(obj: dict[str, Any]) -> list[str]:
    """What `kubectl specserve status` shows for the demo's SpecServe at its end."""
    try:
        return plugin_view.status_text(plugin_view.status_data(plugin_view.load(obj))).splitlines()
    except plugin_view.ViewError as exc:
        return [f"(no status view: {exc})"]


def print_summary(summary: Summary, view: View, out: Path) -> None:
    for line in lines(summary):
        view.note(line)
    view.note(f"timeline: {out / 'timeline.png'}; summary: {out / 'summary.json'}")


__all__ = ["Options", "StepFailedError", "print_summary", "run_demo"]

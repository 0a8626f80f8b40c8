"""How fast is specserve_kubefake? Seeds N SpecServes and their rendered children over HTTP, then measures
requests/s and the server's CPU seconds per request for GET, LIST, apply (no-op and changing) and status patches.

The server runs in its own process (`python -m specserve_kubefake`) so its CPU is measured alone (from /proc).

    .venv/bin/python scripts/kubefake_bench.py [--specserves 200] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from specserve.api.models import SpecServe
from specserve.kube.kinds import kind_of
from specserve.render import render

ROOT = Path(__file__).resolve().parent.parent
NS = "bench"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}
SPECSERVES = f"/apis/specserve.io/v1alpha1/namespaces/{NS}/specserves"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _wait_ready(session: aiohttp.ClientSession) -> None:
    for _ in range(200):
        try:
            async with session.get("/healthz") as resp:
                if resp.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit("kubefake did not start")


async def _check(resp: aiohttp.ClientResponse) -> None:
    if resp.status >= 300:
        raise SystemExit(f"{resp.method} {resp.url} -> {resp.status}: {(await resp.text())[:300]}")
    await resp.read()


async def _run_all(calls: list[Callable[[], Awaitable[None]]], concurrency: int) -> None:
    queue = list(reversed(calls))

    async def worker() -> None:
        while queue:
            await queue.pop()()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _phase(name: str, pid: int, calls: list[Callable[[], Awaitable[None]]], concurrency: int) -> dict[str, float]:
    cpu, wall = _cpu_seconds(pid), time.perf_counter()
    await _run_all(calls, concurrency)
    cpu, wall = _cpu_seconds(pid) - cpu, time.perf_counter() - wall
    result = {"requests": len(calls), "req_per_s": len(calls) / wall, "server_cpu_ms_per_req": 1000 * cpu / len(calls)}
    print(f"{name:<24} {len(calls):>6} req  {result['req_per_s']:>8.0f} req/s  "
          f"{result['server_cpu_ms_per_req']:>7.2f} ms server CPU/req", flush=True)  # fmt: skip
    return result


def _object_path(manifest: dict[str, Any]) -> str:
    return kind_of(manifest).object_path(NS, manifest["metadata"]["name"])


async def bench(count: int, concurrency: int) -> dict[str, Any]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "specserve_kubefake", "--port", str(port), "--namespace", NS],
        stdout=subprocess.DEVNULL,
    )
    try:
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", connector=connector) as session:
            await _wait_ready(session)
            await asyncio.sleep(0.5)  # the namespace is created after the port opens
            return await _measure(session, server.pid, count, concurrency)
    finally:
        server.terminate()
        server.wait(timeout=10)


async def _measure(session: aiohttp.ClientSession, pid: int, count: int, concurrency: int) -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "examples" / "kimi-k25-rtxpro6000.yaml").read_text(encoding="utf-8"))
    results: dict[str, Any] = {"specserves": count}

    def create(i: int) -> Callable[[], Awaitable[None]]:
        body = copy.deepcopy(doc)
        body["metadata"] = {"name": f"model-{i:03d}", "namespace": NS}

        async def call() -> None:
            async with session.post(SPECSERVES, json=body) as resp:
                await _check(resp)

        return call

    results["create_specserve"] = await _phase("POST SpecServe", pid, [create(i) for i in range(count)], concurrency)
    async with session.get(SPECSERVES) as resp:
        owners = (await resp.json())["items"]
    children = [m for owner in owners for m in render(SpecServe.model_validate(owner))]
    results["objects"] = count + len(children)

    def apply(manifest: dict[str, Any]) -> Callable[[], Awaitable[None]]:
        url = _object_path(manifest) + "?fieldManager=specserve&force=true"
        data = json.dumps(manifest)

        async def call() -> None:
            async with session.patch(url, data=data, headers=APPLY) as resp:
                await _check(resp)

        return call

    results["apply_create"] = await _phase("apply (create)", pid, [apply(m) for m in children], concurrency)
    results["apply_noop"] = await _phase("apply (no change)", pid, [apply(m) for m in children], concurrency)
    changed = copy.deepcopy(children)
    for manifest in changed:
        manifest["metadata"].setdefault("annotations", {})["bench/round"] = "2"
    results["apply_change"] = await _phase("apply (change)", pid, [apply(m) for m in changed], concurrency)

    def get(path: str, params: dict[str, str] | None = None) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            async with session.get(path, params=params) as resp:
                await _check(resp)

        return call

    gets = [get(_object_path(m)) for m in children]
    results["get"] = await _phase("GET object", pid, gets, concurrency)
    deployments = f"/apis/apps/v1/namespaces/{NS}/deployments"
    lists = [get(deployments, {"labelSelector": f"specserve.io/instance=model-{i % count:03d}"}) for i in range(count)]
    results["list_selector"] = await _phase(f"LIST deployments (of {2 * count})", pid, lists, concurrency)

    def status(owner: dict[str, Any], round_: int) -> Callable[[], Awaitable[None]]:
        url = f"{SPECSERVES}/{owner['metadata']['name']}/status"
        body = {"status": {"observedGeneration": 1, "activeMode": "Baseline",
                           "weights": {"speculative": round_, "baseline": 100 - round_}}}  # fmt: skip

        async def call() -> None:
            async with session.patch(url, json=body, headers=MERGE) as resp:
                await _check(resp)

        return call

    results["status_patch"] = await _phase("PATCH SpecServe status", pid, [status(o, 1) for o in owners], concurrency)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--specserves", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    results = asyncio.run(bench(args.specserves, args.concurrency))
    print(f"objects stored: {results['objects']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

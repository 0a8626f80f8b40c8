"""`python -m specserve_kubefake`: the standalone runner writes a kubeconfig and serves until cancelled."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import aiohttp
import yaml

from specserve_kubefake.__main__ import parse_args, run


async def test_the_runner_serves_and_writes_a_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    args = parse_args(["--port", "0", "--namespace", "llm", "--kubeconfig", str(kubeconfig), "--auto-ready"])
    task = asyncio.create_task(run(args))
    try:
        for _ in range(100):
            if kubeconfig.exists():
                break
            await asyncio.sleep(0.02)
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        async with aiohttp.ClientSession() as session, session.get(f"{server}/api/v1/namespaces/llm") as resp:
            assert resp.status == 200
            assert (await resp.json())["status"]["phase"] == "Active"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

"""The demo's control plane: the fake Kubernetes API and the real operator, each a process of its own.

The operator is `specserve run` itself (the same code a cluster runs), pointed at the fake by a kubeconfig."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import aiohttp
import yaml

from specserve_tools.demo.procs import Child, Supervisor


def write_kubeconfig(path: Path, server: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "demo", "cluster": {"server": server}}],
        "users": [{"name": "demo", "user": {"token": "demo"}}],
        "contexts": [{"name": "demo", "context": {"cluster": "demo", "user": "demo"}}],
        "current-context": "demo",
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")


async def wait_http(child: Child, url: str, what: str, timeout: float = 30.0) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(int(timeout * 10)):
            if not child.alive():
                raise RuntimeError(f"{what} exited: {child.tail()}")
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=1)) as resp:
                    if resp.status < 500:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{what} did not answer within {timeout:g} s: {child.tail()}")


async def start_api(sup: Supervisor, port: int, validate: bool = True) -> tuple[Child, str]:
    argv = [sys.executable, "-m", "specserve_tools.demo.apiserver", "--port", str(port)]
    child = sup.start("kube-api", argv + ([] if validate else ["--no-validate"]))
    url = f"http://127.0.0.1:{port}"
    await wait_http(child, url + "/version", "the fake Kubernetes API")
    return child, url


async def start_operator(
    sup: Supervisor,
    workdir: Path,
    api_url: str,
    namespace: str,
    prometheus_url: str,
    metrics_port: int,
    kubeconfig: Path | None = None,
) -> Child:
    """`specserve run` for the demo's namespace; `kubeconfig`: the real control plane's (the chart's ServiceAccount),
    else one for the fake at `api_url`."""
    if kubeconfig is None:
        kubeconfig = workdir / "kubeconfig"
        write_kubeconfig(kubeconfig, api_url)
    argv = [
        sys.executable,
        "-m",
        "specserve.cli",
        "run",
        "--namespace",
        namespace,
        "--prometheus-url",
        prometheus_url,
        "--metrics-port",
        str(metrics_port),
        "--resync-seconds",
        "2",  # readiness is refreshed on resync: keep the demo's view current
    ]
    child = sup.start("operator", argv, env={"KUBECONFIG": str(kubeconfig)})
    await wait_http(child, f"http://127.0.0.1:{metrics_port}/metrics", "the operator")
    return child

"""The demo's cluster: specserve_kubefake's API server in a process of its own (its CPU off the demo's loop).

`python -m specserve_tools.demo.apiserver --port N` serves until SIGTERM. Deployments are not marked ready by the fake
(auto_ready=False): the demo's kubelet reports their status from the pods it really runs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from specserve_kubefake import FakeApiServer


async def serve(port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with FakeApiServer(auto_ready=False, port=port) as api:
        print(f"fake Kubernetes API on {api.url}", file=sys.stderr, flush=True)
        await stop.wait()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m specserve_tools.demo.apiserver")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.port))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

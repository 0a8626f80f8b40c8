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


async def serve(port: int, validate: bool = True) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with FakeApiServer(auto_ready=False, port=port, validate=validate) as api:
        print(f"fake Kubernetes API on {api.url}", file=sys.stderr, flush=True)
        await stop.wait()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m specserve_tools.demo.apiserver")
    parser.add_argument("--port", type=int, required=True)
    # Validation needs the official schemas (kubernetes_validate, ~100 MB): a machine that cannot carry them
    # (the GPU machine, scripts/gpu/loop.py) serves without; CI validates.
    parser.add_argument("--no-validate", dest="validate", action="store_false")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.validate))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

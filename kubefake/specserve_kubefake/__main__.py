"""`python -m specserve_kubefake --port 8001`: the fake API server on its own, for manual use."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path

from specserve_kubefake.kubeconfig import write_kubeconfig
from specserve_kubefake.server import FakeApiServer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m specserve_kubefake", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--no-validate", action="store_true", help="accept objects the API server would refuse")
    parser.add_argument("--auto-ready", action="store_true", help="mark Deployments ready after each spec change")
    parser.add_argument("--accept-routes", type=float, metavar="SECONDS",
                        help="act as a Gateway: accept each HTTPRoute generation this long after a write")  # fmt: skip
    parser.add_argument("--namespace", action="append", default=[], help="create this namespace (repeatable)")
    parser.add_argument("--kubeconfig", type=Path, help="write a kubeconfig pointing at the server here")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    api = FakeApiServer(host=args.host, port=args.port, validate=not args.no_validate, auto_ready=args.auto_ready,
                        accept_routes=args.accept_routes)  # fmt: skip
    url = await api.start()
    for namespace in args.namespace:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    if args.kubeconfig:
        write_kubeconfig(args.kubeconfig, url)
    print(f"kubefake listening on {url}", flush=True)
    await api.serve_forever()


def main(argv: list[str] | None = None) -> None:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    main()

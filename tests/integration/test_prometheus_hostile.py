"""Issue 31: a Prometheus URL answering 200 with JSON that is not a vector raised KeyError out of the Prometheus
client and ended every switching round. Against the running operator: the reading is "load unknown" with a
typed reason naming what answered (never its body), switching holds, and the operator goes on."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from specserve import telemetry
from specserve_kubefake import FakeApiServer
from tests.integration.switching_world import NAME, NS, condition, eventually, operator, status, switching_doc

SECRET = "AKIA-SECRET-TOKEN"


class _NotAVector(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = ('{"status":"success","metadata":{"' + SECRET + '":1}}').encode()  # no data.result
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def not_a_vector() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotAVector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


async def test_a_prometheus_answering_something_else_makes_load_unknown_and_the_operator_goes_on(
    fake: FakeApiServer, kimi_doc: dict[str, Any], not_a_vector: str
) -> None:
    async with operator(not_a_vector) as running:
        fake.create(switching_doc(kimi_doc))
        cond = await eventually(
            lambda: (c := condition(fake, "MetricsAvailable")).get("status") == "False" and c, what="load unknown"
        )
        assert "answered garbage (KeyError)" in cond["message"], cond
        assert SECRET not in str(status(fake))
        unknown = telemetry.EVALUATIONS.labels(NS, NAME, "unknown")
        first = unknown._value.get()
        await eventually(lambda: unknown._value.get() >= first + 3, what="three more rounds")  # not ended by it
        assert "lastDecision" not in status(fake) or status(fake)["lastDecision"].get("action") == "Hold"
        assert not running.done()

"""The prometheus-api-client wrapper: vectors by pool, Prometheus' own error messages, no retry storms."""

from __future__ import annotations

import http.server
import math
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
import requests
from prometheus_api_client.exceptions import PrometheusApiClientException

from specserve.metrics.prometheus import PrometheusSource, parse_vector, prometheus_error
from specserve.metrics.promql import PoolKey, Query, Signal, Windows, grouped_queries


def _item(ns: str, name: str, pool: str, value: str, t: float = 100.0) -> dict[str, Any]:
    labels = {"namespace": ns, "specserve_instance": name, "specserve_pool": pool}
    return {"metric": labels, "value": [t, value]}


def test_a_grouped_vector_is_keyed_by_namespace_specserve_and_pool() -> None:
    query = Query(Signal.RUNNING, "q")
    data = [
        _item("llm", "a", "speculative", "3"),
        _item("llm", "a", "baseline", "NaN"),
        {"metric": {}, "value": [100, "9"]},
    ]
    result = parse_vector(query, data)
    assert result.values[PoolKey("llm", "a", "speculative")] == 3.0
    assert math.isnan(result.values[PoolKey("llm", "a", "baseline")])  # kept: the reader makes it unknown
    assert len(result.values) == 2  # a series without our labels belongs to no SpecServe
    assert result.time == 100.0


def test_a_keyed_vector_belongs_to_its_pool() -> None:
    key = PoolKey("llm", "a", "engine")
    result = parse_vector(Query(Signal.RUNNING, "q", key), [{"metric": {}, "value": [5, "2.5"]}])
    assert result.values == {key: 2.5}


def test_prometheus_error_names_the_code_and_a_fixed_reason_never_the_body() -> None:
    body = b'{"status":"error","errorType":"bad_data","error":"parse error at char 5: unexpected \\"}\\""}'
    exc = PrometheusApiClientException(f"HTTP Status Code 400 ({body!r})")
    message, refused = prometheus_error(exc)
    assert message == "answered HTTP 400: the query was refused (bad_data)"
    assert refused
    down = PrometheusApiClientException("HTTP Status Code 503 (b'down: the secret is hunter2')")
    assert prometheus_error(down) == ("answered HTTP 503: service unavailable", False)
    teapot = PrometheusApiClientException('HTTP Status Code 418 (b\'{"errorType": "hunter2"}\')')
    assert prometheus_error(teapot) == ("answered HTTP 418: unexpected answer", True)


class _Client:
    def __init__(self, fail: Exception | None = None) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def custom_query(self, query: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
        self.calls.append(query)
        if self.fail is not None:
            raise self.fail
        return [_item("llm", "a", "speculative", "1")]

    def close(self) -> None:
        pass


def test_an_unreachable_prometheus_fails_the_round_after_one_query() -> None:
    client = _Client(requests.ConnectionError("refused"))
    source = PrometheusSource("http://p:9090", client=client)
    queries = grouped_queries(Windows(30, 60))
    results = source.read_sync(queries)
    assert len(client.calls) == 1  # not one timeout per signal
    assert len(results) == len(queries)
    assert all(r.error == "Prometheus at http://p:9090 unreachable: ConnectionError" for r in results)
    assert not any(r.refused for r in results)


def test_a_refused_query_does_not_stop_the_others() -> None:
    body = b'{"status":"error","error":"bad matcher"}'

    class Refusing(_Client):
        def custom_query(self, query: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
            self.calls.append(query)
            if "bad" in query:
                raise PrometheusApiClientException(f"HTTP Status Code 400 ({body!r})")
            return []

    client = Refusing()
    source = PrometheusSource("http://p:9090", client=client)
    results = source.read_sync([Query(Signal.RUNNING, "bad{"), Query(Signal.QUEUED, "good")])
    assert (
        results[0].refused
        and results[0].error == "Prometheus at http://p:9090 answered HTTP 400: the query was refused"
    )
    assert results[1].error is None and len(client.calls) == 2


# ------------------------------------------------------------------- whatever answers, only a typed error comes back

SECRET = "AKIA-SECRET-TOKEN"


class _Hostile(http.server.BaseHTTPRequestHandler):
    """A `prometheusUrl` that answers anything: the path after the host picks the answer."""

    answers: ClassVar[dict[str, tuple[int, str, dict[str, str]]]] = {
        "/scalar": (200, '{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}', {}),
        "/nodata": (200, '{"status":"success","metadata":{"' + SECRET + '":1}}', {}),
        "/list": (200, "[1, 2, 3]", {}),
        "/text": (200, "ami-id\ninstance-id\n" + SECRET, {}),
        "/badsample": (200, '{"status":"success","data":{"result":[{"value":"' + SECRET + '"}]}}', {}),
        "/badnumber": (200, '{"status":"success","data":{"result":[{"value":[1,"' + SECRET + '"]}]}}', {}),
        "/string": (200, '{"status":"success","data":{"result":"' + SECRET + '"}}', {}),
        "/error500": (500, SECRET, {}),
        "/error400": (400, '{"status":"error","errorType":"bad_data","error":"' + SECRET + '"}', {}),
        "/error403": (403, "<html>" + SECRET + "</html>", {}),
        "/redirect": (302, "", {"Location": "http://169.254.169.254/latest/meta-data/"}),
    }

    def do_GET(self) -> None:
        prefix = "/" + self.path.split("/")[1]
        code, body, headers = self.answers[prefix]
        self.send_response(code)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def hostile_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/scalar", "answered something else than a vector"),
        ("/nodata", "answered garbage (KeyError)"),
        ("/list", "answered garbage (TypeError)"),
        ("/text", "answered garbage (not JSON)"),
        ("/badsample", "answered something else than a vector"),
        ("/badnumber", "answered something else than a vector"),
        ("/string", "answered something else than a vector"),
        ("/error500", "answered HTTP 500: server error"),
        ("/error400", "answered HTTP 400: the query was refused (bad_data)"),
        ("/error403", "answered HTTP 403: access forbidden"),
        ("/redirect", "answered a redirect (not followed)"),
    ],
)
def test_any_answer_becomes_a_typed_error_without_the_body(hostile_url: str, path: str, says: str) -> None:
    """Issue 31: a 200 with JSON that is not a vector raised KeyError out of the client and ended every round;
    a non-2xx body was copied into the author's status and events."""
    source = PrometheusSource(hostile_url + path, timeout=5.0)
    results = source.read_sync(grouped_queries(Windows(30, 60))[:2])
    assert len(results) == 2
    for result in results:
        assert result.error is not None and says in result.error, result.error
        assert SECRET not in result.error and "169.254" not in result.error
        assert result.values == {}


class _Authorized(http.server.BaseHTTPRequestHandler):
    """A Prometheus that answers an empty vector and records the Authorization header of each query."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.headers.get("Authorization"))
        body = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def authorized_url() -> Iterator[str]:
    _Authorized.seen.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Authorized)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_installations_bearer_token_is_read_from_its_file_at_every_query(
    authorized_url: str, tmp_path: Any
) -> None:
    """A mounted Secret rotates in place: each query reads the file again."""
    token = tmp_path / "token"
    token.write_text("first\n")
    source = PrometheusSource(authorized_url, timeout=2.0, token_file=str(token))
    query = Query(Signal.RUNNING, "q")
    assert source.read_sync([query])[0].error is None
    token.write_text("second")
    assert source.read_sync([query])[0].error is None
    assert _Authorized.seen == ["Bearer first", "Bearer second"]
    assert PrometheusSource(authorized_url, timeout=2.0).read_sync([query])[0].error is None
    assert _Authorized.seen[-1] is None  # no token file: no credentials


def test_an_unreadable_token_file_is_load_unknown_and_nothing_is_sent(authorized_url: str, tmp_path: Any) -> None:
    query = Query(Signal.RUNNING, "q")
    for name, content in (("missing", None), ("empty", "")):
        path = tmp_path / name
        if content is not None:
            path.write_text(content)
        (result,) = PrometheusSource(authorized_url, timeout=2.0, token_file=str(path)).read_sync([query])
        assert result.error is not None and "bearer token unreadable" in result.error
        assert not result.refused
    assert _Authorized.seen == []

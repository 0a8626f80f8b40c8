"""The prometheus-api-client wrapper: vectors by pool, Prometheus' own error messages, no retry storms."""

from __future__ import annotations

import math
from typing import Any

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


def test_prometheus_error_extracts_its_own_message_and_whether_it_refused() -> None:
    body = b'{"status":"error","errorType":"bad_data","error":"parse error at char 5: unexpected \\"}\\""}'
    exc = PrometheusApiClientException(f"HTTP Status Code 400 ({body!r})")
    message, refused = prometheus_error(exc)
    assert message == 'parse error at char 5: unexpected "}"'
    assert refused
    assert prometheus_error(PrometheusApiClientException("HTTP Status Code 503 (b'down')")) == ("down", False)


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
    assert results[0].refused and results[0].error == "Prometheus at http://p:9090: bad matcher"
    assert results[1].error is None and len(client.calls) == 2

"""Prometheus through prometheus-api-client: a thin, typed wrapper. The client is synchronous, so a round's
queries run in one worker thread, each with a timeout and no retries (the next evaluation is the retry)."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from specserve.metrics.promql import SERIES_INSTANCE, SERIES_NAMESPACE, SERIES_POOL, PoolKey, Query
from specserve.metrics.results import QueryResult

DEFAULT_TIMEOUT = 5.0


def prometheus_error(exc: PrometheusApiClientException) -> tuple[str, bool]:
    """Prometheus' own message from a non-200 answer, and whether it refused the query (4xx)."""
    text = str(exc)
    status = re.search(r"HTTP Status Code (\d+)", text)
    code = int(status.group(1)) if status else 0
    # The client formats the body as a bytes repr: "HTTP Status Code 400 (b'{...}')".
    body = re.search(r"\((b(['\"]).*\2)\)$", text, re.S)
    message = text
    if body:
        try:
            raw = ast.literal_eval(body.group(1))
        except (ValueError, SyntaxError):
            raw = body.group(1).encode()
        message = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        # Not Prometheus' JSON (a proxy's page): the text as it came.
        with contextlib.suppress(ValueError, AttributeError):
            message = str(json.loads(message).get("error") or message)
    return message, 400 <= code < 500


def parse_vector(query: Query, data: list[dict[str, Any]]) -> QueryResult:
    """An instant vector -> values by pool (pure). Grouped queries name the pool in the labels."""
    values: dict[PoolKey, float] = {}
    time: float | None = None
    for item in data:
        stamp, raw = item["value"]
        time = float(stamp)
        value = float(raw)  # "NaN" parses to nan and stays nan
        if query.key is not None:
            values[query.key] = value
            continue
        labels = item.get("metric") or {}
        try:
            key = PoolKey(labels[SERIES_NAMESPACE], labels[SERIES_INSTANCE], labels[SERIES_POOL])
        except KeyError:
            continue  # a series without our labels belongs to no SpecServe
        values[key] = value
    return QueryResult(query, values, time)


class PrometheusSource:
    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT, client: PrometheusConnect | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self.queries_sent = 0  # for benchmarks and tests
        self._client = client or PrometheusConnect(url=url, retry=Retry(total=0), timeout=math.ceil(timeout))

    def _one(self, query: Query) -> QueryResult:
        self.queries_sent += 1
        try:
            data = self._client.custom_query(query.promql, params={"timeout": f"{self.timeout:g}s"})
        except PrometheusApiClientException as exc:
            message, refused = prometheus_error(exc)
            return QueryResult(query, error=f"Prometheus at {self.url}: {message}", refused=refused)
        except requests.RequestException as exc:
            kind = "timed out" if isinstance(exc, requests.Timeout) else "unreachable"
            return QueryResult(query, error=f"Prometheus at {self.url} {kind}: {type(exc).__name__}")
        except ValueError as exc:  # not JSON: not a Prometheus
            return QueryResult(query, error=f"Prometheus at {self.url} answered garbage: {exc}")
        return parse_vector(query, data)

    def read_sync(self, queries: Sequence[Query]) -> list[QueryResult]:
        results = []
        for query in queries:
            result = self._one(query)
            results.append(result)
            if result.error is not None and not result.refused:
                # Unreachable: the other queries would only wait for the same timeout.
                results += [QueryResult(q, error=result.error) for q in queries[len(results) :]]
                break
        return results

    async def read(self, queries: Sequence[Query]) -> list[QueryResult]:
        return await asyncio.to_thread(self.read_sync, queries)

    def close(self) -> None:
        self._client.close()

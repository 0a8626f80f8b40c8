"""Prometheus through prometheus-api-client: a thin, typed wrapper. The client is synchronous, so a round's
queries run in one worker thread, each with a timeout and no retries (the next evaluation is the retry)."""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Sequence

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from specserve.metrics.promql import SERIES_INSTANCE, SERIES_NAMESPACE, SERIES_POOL, PoolKey, Query
from specserve.metrics.results import QueryResult

DEFAULT_TIMEOUT = 5.0
log = logging.getLogger(__name__)


# Prometheus' own errorType values (its HTTP API) and what we say for each: a fixed text, never the body.
_ERROR_TYPES = {
    "bad_data": "the query was refused (bad_data)",
    "execution": "the query failed to execute (execution)",
    "timeout": "the query timed out (timeout)",
    "canceled": "the query was canceled (canceled)",
    "internal": "Prometheus had an internal error (internal)",
    "unavailable": "Prometheus is unavailable (unavailable)",
    "not_found": "no such endpoint (not_found)",
}
_STATUS_REASONS = {
    400: "the query was refused",
    401: "authentication required",
    403: "access forbidden",
    404: "no Prometheus query API at this URL",
    422: "the query could not be executed",
    429: "too many requests",
    503: "service unavailable",
}


def prometheus_error(exc: PrometheusApiClientException) -> tuple[str, bool]:
    """What a non-2xx answer means, and whether the server refused the query (4xx). Only the status code and a
    fixed reason, never the body: the URL is the SpecServe author's, the operator reaches networks the author
    cannot, and status and events are the author's to read (a body copied there would read back whatever
    answered, e.g. a cloud metadata service). Prometheus' errorType, one of a fixed set, picks the reason."""
    text = str(exc)
    status = re.search(r"HTTP Status Code (\d+)", text)
    code = int(status.group(1)) if status else 0
    error_type = re.search(r"errorType\\?[\"']\s*:\s*\\?[\"']([a-z_]+)", text)
    if error_type and error_type.group(1) in _ERROR_TYPES:
        reason = _ERROR_TYPES[error_type.group(1)]
    elif code in _STATUS_REASONS:
        reason = _STATUS_REASONS[code]
    else:
        reason = "server error" if code >= 500 else "unexpected answer"
    return f"answered HTTP {code or 'error'}: {reason}", 400 <= code < 500


class NotAVectorError(ValueError):
    """The answer parsed as JSON but is not an instant vector (not a Prometheus, or another API)."""


def parse_vector(query: Query, data: object) -> QueryResult:
    """An instant vector -> values by pool (pure). Grouped queries name the pool in the labels. Anything that is
    not a list of {metric, value: [time, "number"]} raises NotAVectorError (the answer is garbage)."""
    if not isinstance(data, list):
        raise NotAVectorError(f"the result is a {type(data).__name__}, not an instant vector")
    values: dict[PoolKey, float] = {}
    time: float | None = None
    for item in data:
        try:
            stamp, raw = item["value"]
            time, value = float(stamp), float(raw)  # "NaN" parses to nan and stays nan
            labels = item.get("metric") or {}
        except (TypeError, KeyError, ValueError, AttributeError, OverflowError):
            raise NotAVectorError("a sample is not [time, value]") from None
        if query.key is not None:
            values[query.key] = value
            continue
        try:
            key = PoolKey(str(labels[SERIES_NAMESPACE]), str(labels[SERIES_INSTANCE]), str(labels[SERIES_POOL]))
        except (KeyError, TypeError):
            continue  # a series without our labels belongs to no SpecServe
        values[key] = value
    return QueryResult(query, values, time)


class CredentialsUnreadableError(requests.RequestException):
    """The installation's bearer token file cannot be read: nothing is sent."""


class BearerTokenFile(requests.auth.AuthBase):
    """The installation's credentials for its Prometheus: a bearer token read from a file at every request (a
    Kubernetes Secret mounted into the operator's pod, which the kubelet rotates in place). Credentials never come
    from a SpecServe: a URL with credentials in it is refused, and a SpecServe names only allowed URLs."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        try:
            with open(self.path, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise CredentialsUnreadableError(f"{type(exc).__name__} reading {self.path}") from None
        if not token:
            raise CredentialsUnreadableError(f"{self.path} is empty")
        request.headers["Authorization"] = f"Bearer {token}"
        return request


def _session(token_file: str | None) -> requests.Session:
    """A session that follows no redirect (an allowed URL must not bounce a query, and the installation's token
    with it, to one that is not), with the installation's bearer token when it has one."""
    session = requests.Session()
    session.max_redirects = 0
    if token_file is not None:
        session.auth = BearerTokenFile(token_file)
    return session


class PrometheusSource:
    def __init__(
        self,
        url: str,
        timeout: float = DEFAULT_TIMEOUT,
        client: PrometheusConnect | None = None,
        token_file: str | None = None,
    ) -> None:
        """token_file: the installation's bearer token for this Prometheus (`--prometheus-bearer-token-file`)."""
        self.url = url
        self.timeout = timeout
        self.queries_sent = 0  # for benchmarks and tests
        self._client = client or PrometheusConnect(
            url=url, retry=Retry(total=0), timeout=math.ceil(timeout), session=_session(token_file)
        )

    def _one(self, query: Query) -> QueryResult:
        """One query's result; every failure is a QueryResult with an error (load unknown), never an exception:
        whatever the URL answers, the round goes on for every other SpecServe."""
        self.queries_sent += 1
        try:
            return parse_vector(
                query, self._client.custom_query(query.promql, params={"timeout": f"{self.timeout:g}s"})
            )
        except PrometheusApiClientException as exc:
            message, refused = prometheus_error(exc)
            return QueryResult(query, error=f"Prometheus at {self.url} {message}", refused=refused)
        except requests.JSONDecodeError:
            return QueryResult(query, error=f"Prometheus at {self.url} answered garbage (not JSON)")
        except CredentialsUnreadableError as exc:
            return QueryResult(query, error=f"Prometheus at {self.url} not queried: bearer token unreadable ({exc})")
        except requests.TooManyRedirects:
            return QueryResult(query, error=f"Prometheus at {self.url} answered a redirect (not followed)")
        except requests.RequestException as exc:
            kind = "timed out" if isinstance(exc, requests.Timeout) else "unreachable"
            return QueryResult(query, error=f"Prometheus at {self.url} {kind}: {type(exc).__name__}")
        except NotAVectorError as exc:
            return QueryResult(query, error=f"Prometheus at {self.url} answered something else than a vector: {exc}")
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, UnicodeError) as exc:
            # Not JSON, or JSON without data.result (the client indexes it blindly): not a Prometheus.
            return QueryResult(query, error=f"Prometheus at {self.url} answered garbage ({type(exc).__name__})")
        except Exception as exc:  # the I/O edge: a third-party client must not end the round
            log.warning("Prometheus at %s: unexpected %s", self.url, type(exc).__name__, exc_info=True)
            return QueryResult(query, error=f"Prometheus at {self.url} failed unexpectedly ({type(exc).__name__})")

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

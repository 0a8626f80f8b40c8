"""The production readers: one Prometheus client per URL (kept across rounds) and one Direct scraper."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import aiohttp

from specserve import telemetry
from specserve.api.install_policy import InstallPolicy, prometheus_url_problem
from specserve.metrics.direct import DirectSource, http_fetch
from specserve.metrics.prometheus import DEFAULT_TIMEOUT, PrometheusSource
from specserve.metrics.promql import PoolKey, Query, Windows
from specserve.metrics.results import QueryResult


class _Counted:
    def __init__(self, source: PrometheusSource) -> None:
        self.source = source

    async def read(self, queries: Sequence[Query]) -> list[QueryResult]:
        telemetry.METRIC_QUERIES.labels("prometheus").inc(len(queries))
        return await self.source.read(queries)


class _Refused:
    """A Prometheus URL the installation does not allow: every query fails unsent (the reconcile reports the field
    as invalid; this keeps the switching loop from sending anything there meanwhile)."""

    def __init__(self, problem: str) -> None:
        self.problem = problem

    async def read(self, queries: Sequence[Query]) -> list[QueryResult]:
        return [QueryResult(q, error=f"not sent: {self.problem}", refused=True) for q in queries]


class _CountedDirect:
    def __init__(self, source: DirectSource) -> None:
        self.source = source

    async def read(self, pods: Mapping[PoolKey, Sequence[str]], windows: Windows) -> list[QueryResult]:
        telemetry.METRIC_QUERIES.labels("direct").inc(len({u for us in pods.values() for u in us}))
        return await self.source.read(pods, windows)


class Sources:
    def __init__(
        self,
        timeout: float = DEFAULT_TIMEOUT,
        installation: InstallPolicy | None = None,
        token_file: str | None = None,
    ) -> None:
        """installation: the Prometheus URLs queries may go to; None: any (tests and tools). token_file: the
        installation's bearer token, sent to every (allowed) Prometheus."""
        self.timeout = timeout
        self.installation = installation
        self.token_file = token_file
        self._prometheus: dict[str, _Counted] = {}
        self._session: aiohttp.ClientSession | None = None
        self._direct = _CountedDirect(DirectSource(self._fetch, time.time))

    async def _fetch(self, url: str) -> str:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return await http_fetch(self._session, url, self.timeout)

    def prometheus(self, url: str) -> _Counted | _Refused:
        if self.installation is not None and (problem := prometheus_url_problem(url, self.installation)):
            return _Refused(problem)
        if url not in self._prometheus:
            self._prometheus[url] = _Counted(PrometheusSource(url, self.timeout, token_file=self.token_file))
        return self._prometheus[url]

    @property
    def direct(self) -> _CountedDirect:
        return self._direct

    async def close(self) -> None:
        for reader in self._prometheus.values():
            reader.source.close()
        if self._session is not None:
            await self._session.close()

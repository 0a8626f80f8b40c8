"""The Direct source: the engines' exposition parsed with prometheus_client, smoothed and differenced in memory."""

from __future__ import annotations

import asyncio
import http.server
import threading
from typing import Any

import aiohttp
import pytest
from prometheus_client import generate_latest

from specserve.api import reasons
from specserve.api.validation import parse_object
from specserve.metrics.direct import DirectSource, histogram_quantile, http_fetch, parse_scrape
from specserve.metrics.promql import PoolKey, Signal, Windows
from specserve.metrics.results import QueryResult
from specserve.metrics.signal import PoolTarget, ReadTarget, index, read
from specserve.switching.gather import pod_urls
from specserve_tools.emulator.engine import EngineConfig, Mode
from specserve_tools.emulator.metrics import build_metrics
from specserve_tools.emulator.profile import load_profile
from specserve_tools.emulator.testing import emulator_thread

KEY = PoolKey("llm", "a", "speculative")


def exposition(running: int, queued: int, tokens: float, steps: float = 3.0, accept: float = 2.5) -> str:
    return f"""# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"}} {running}
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{model_name="m",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"}} {queued}
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{{model_name="m"}} {accept}
# TYPE sglang:spec_num_steps gauge
sglang:spec_num_steps{{model_name="m"}} {steps}
# TYPE sglang:generation_tokens counter
sglang:generation_tokens_total{{model_name="m",is_streaming="true"}} {tokens}
sglang:generation_tokens_total{{model_name="m",is_streaming="false"}} 0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{{le="0.1",model_name="m",is_streaming="true"}} {tokens / 100}
sglang:time_to_first_token_seconds_bucket{{le="1.0",model_name="m",is_streaming="true"}} {tokens / 50}
sglang:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m",is_streaming="true"}} {tokens / 50}
sglang:time_to_first_token_seconds_count{{model_name="m",is_streaming="true"}} {tokens / 50}
sglang:time_to_first_token_seconds_sum{{model_name="m",is_streaming="true"}} 1
"""


def finished(count: float, seconds: float) -> str:
    return f"""# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{{le="+Inf",model_name="m"}} {count}
sglang:e2e_request_latency_seconds_count{{model_name="m"}} {count}
sglang:e2e_request_latency_seconds_sum{{model_name="m"}} {seconds}
"""


def test_parse_sums_series_and_reads_histograms() -> None:
    scrape = parse_scrape(exposition(3, 1, 1000))
    assert (scrape.running, scrape.queued, scrape.generation_tokens) == (3.0, 1.0, 1000.0)
    assert (scrape.accept_length, scrape.spec_steps) == (2.5, 3.0)
    assert scrape.ttft == ((0.1, 10.0), (1.0, 20.0), (float("inf"), 20.0))


def test_the_emulators_exposition_parses() -> None:
    metrics = build_metrics()
    labels = {"model_name": "m", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    metrics.num_running_reqs.labels(**labels).set(5)
    text = generate_latest(metrics.registry).decode()
    assert parse_scrape(text).running == 5.0


def test_text_without_the_load_gauge_is_refused() -> None:
    with pytest.raises(ValueError, match="sglang:num_running_reqs"):
        parse_scrape("# TYPE up gauge\nup 1\n")


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    buckets = ((0.1, 10.0), (1.0, 20.0), (float("inf"), 20.0))
    assert histogram_quantile(0.5, buckets) == 0.1
    assert histogram_quantile(0.75, buckets) == 0.55
    assert histogram_quantile(0.5, ()) is None
    assert histogram_quantile(0.5, ((1.0, 0.0), (float("inf"), 0.0))) is None
    assert histogram_quantile(0.99, ((1.0, 0.0), (float("inf"), 5.0))) == 1.0  # the highest finite bound


def test_direct_smooths_gauges_and_rates_counters_over_the_window() -> None:
    pages = iter([exposition(2, 0, 0), exposition(4, 2, 500)])
    clock = iter([100.0, 110.0])

    async def fetch(url: str) -> str:
        assert url == "http://10.0.0.1:30000/metrics"
        return next(pages)

    source = DirectSource(fetch, lambda: next(clock))
    windows = Windows(smooth=30, rate=60)
    pods = {KEY: ["http://10.0.0.1:30000/metrics"]}
    first = {r.query.signal: r for r in asyncio.run(source.read(pods, windows))}
    assert first[Signal.RUNNING].values == {KEY: 2.0}
    assert first[Signal.TOKENS].values == {}  # one scrape: no rate yet (unknown, not 0)
    second = {r.query.signal: r for r in asyncio.run(source.read(pods, windows))}
    assert second[Signal.RUNNING].values == {KEY: 3.0}  # averaged over the two scrapes
    assert second[Signal.QUEUED].values == {KEY: 1.0}
    assert second[Signal.TOKENS].values == {KEY: 50.0}  # 500 tokens in 10 s
    assert second[Signal.FRESHNESS].values == {KEY: 110.0}
    assert second[Signal.SPEC_STEPS].values == {KEY: 3.0}


def test_direct_averages_the_accept_length_over_the_window_as_prometheus_does() -> None:
    # One reading is about one batch: at one request in flight with half of them sampled it read 1.0 and 3.0 by
    # turns on the H100; the last scrape alone would be either. The steps are a state: the last one.
    _, second = two_reads(exposition(1, 0, 0, steps=3.0, accept=1.0), exposition(1, 0, 100, steps=0.0, accept=3.0))
    assert second[Signal.ACCEPT_LENGTH].values == {KEY: 2.0}
    assert second[Signal.SPEC_STEPS].values == {KEY: 0.0}


def two_reads(first_page: str, second_page: str) -> tuple[dict[Signal, QueryResult], dict[Signal, QueryResult]]:
    """What one pod's two scrapes, 10 s apart, read (a 60 s rate window)."""
    pages, clock = iter([first_page, second_page]), iter([100.0, 110.0])

    async def fetch(url: str) -> str:
        return next(pages)

    source = DirectSource(fetch, lambda: next(clock))
    pods = {KEY: ["http://10.0.0.1:30000/metrics"]}
    windows = Windows(smooth=30, rate=60)
    first = {r.query.signal: r for r in asyncio.run(source.read(pods, windows))}
    return first, {r.query.signal: r for r in asyncio.run(source.read(pods, windows))}


@pytest.mark.parametrize(("count", "expected"), [(160, 64.0), (15, None)])
def test_direct_counts_requests_in_flight_by_littles_law_from_enough_finished_requests(
    count: int, expected: float | None
) -> None:
    # `count` requests finished in 10 s, 4 s each on average: 4 * count / 10 s in flight; too few: left out
    first, second = two_reads(
        exposition(2, 0, 0) + finished(100, 300), exposition(2, 0, 500) + finished(100 + count, 300 + 4 * count)
    )
    assert first[Signal.LATENCY_IN_FLIGHT].values == {}
    assert second[Signal.LATENCY_IN_FLIGHT].values == ({KEY: expected} if expected is not None else {})


def test_direct_rates_the_decode_tokens_counted_every_step_and_only_those() -> None:
    def decoded(decode: float) -> str:
        return f"""# TYPE sglang:realtime_tokens counter
sglang:realtime_tokens_total{{model_name="m",mode="decode"}} {decode}
sglang:realtime_tokens_total{{model_name="m",mode="prefill_compute"}} {10 * decode}
"""

    assert parse_scrape(exposition(2, 0, 0)).decode_tokens is None  # an engine without the counter: unknown
    _, second = two_reads(exposition(2, 0, 0) + decoded(1000), exposition(2, 0, 0) + decoded(8000))
    assert second[Signal.DECODE_TOKENS].values == {KEY: 700.0}  # 7000 decode tokens in 10 s; prefill not counted
    assert second[Signal.TOKENS].values == {KEY: 0.0}  # no request finished: the finished-token rate says 0


def test_a_failed_scrape_makes_its_pool_unknown() -> None:
    async def fetch(url: str) -> str:
        raise ValueError("garbage")

    source = DirectSource(fetch, lambda: 1.0)
    results = asyncio.run(source.read({KEY: ["http://10.0.0.1:30000/metrics"]}, Windows(30, 60)))
    assert all(r.error is not None and "ValueError" in r.error and "garbage" not in r.error for r in results)


SECRET = "AKIA-SECRET-TOKEN"


class _Hostile(http.server.BaseHTTPRequestHandler):
    """A pod that answers its scrape with anything: a secret in the reason phrase and the body."""

    def do_GET(self) -> None:
        code = 500 if self.path.startswith("/fail") else 200
        body = f"{SECRET} is not an exposition {{{{\n".encode()
        self.send_response(code, f"Oops {SECRET}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize(("path", "says"), [("/fail", "answered HTTP 500"), ("/ok", "not the Prometheus text format")])
def test_a_scrape_error_names_the_code_never_what_the_pod_answered(path: str, says: str) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}{path}"

    async def scrape() -> list[QueryResult]:
        async with aiohttp.ClientSession() as session:

            async def fetch(u: str) -> str:
                return await http_fetch(session, u, 5.0)

            return await DirectSource(fetch, lambda: 1.0).read({KEY: [url]}, Windows(30, 60))

    try:
        results = asyncio.run(scrape())
    finally:
        server.shutdown()
    for result in results:
        assert result.error is not None and says in result.error, result.error
        assert SECRET not in result.error


def test_direct_reads_a_real_engine_over_http() -> None:
    async def scrape(url: str) -> dict[Signal, dict[PoolKey, float]]:
        async with aiohttp.ClientSession() as session:

            async def fetch(u: str) -> str:
                return await http_fetch(session, u, 5.0)

            source = DirectSource(fetch, lambda: 1.0)
            results = await source.read({KEY: [f"{url}/metrics"]}, Windows(30, 60))
        return {r.query.signal: r.values for r in results if r.error is None}

    config = EngineConfig(profile=load_profile("seed-kimi-k25-rtxpro6000"), mode=Mode.SPECULATIVE)
    with emulator_thread(config) as url:
        values = asyncio.run(scrape(url))
    assert values[Signal.RUNNING] == {KEY: 0.0} and values[Signal.QUEUED] == {KEY: 0.0}  # idle, and known
    assert values[Signal.ACCEPT_LENGTH][KEY] > 1  # a speculative engine
    assert values[Signal.GEN_THROUGHPUT] == {KEY: 0.0}  # the decode throughput gauge: idle, and known


def test_pod_urls_are_the_ready_pods_of_the_specserve_by_pool(kimi_doc: dict[str, object]) -> None:
    obj = parse_object({**kimi_doc, "metadata": {"name": "kimi-k25", "namespace": "llm"}})

    def pod(
        name: str, pool: str, ip: str | None, phase: str = "Running", instance: str = "kimi-k25", ready: bool = True
    ) -> dict[str, object]:
        labels = {"specserve.io/instance": instance, "specserve.io/pool": pool}
        conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
        return {
            "metadata": {"name": name, "labels": labels},
            "status": {"phase": phase, "podIP": ip, "conditions": conditions},
        }

    pods = [
        pod("a", "speculative", "10.0.0.1"),
        pod("b", "baseline", "10.0.0.2"),
        pod("c", "baseline", None, phase="Pending", ready=False),
        pod("d", "baseline", "10.0.0.4", instance="other"),
        pod("e", "baseline", "10.0.0.5", ready=False),  # loading its model: answers no scrape, serves nothing
    ]
    urls = pod_urls(obj, pods)
    assert urls == {
        PoolKey("llm", "kimi-k25", "speculative"): ["http://10.0.0.1:30000/metrics"],
        PoolKey("llm", "kimi-k25", "baseline"): ["http://10.0.0.2:30000/metrics"],
    }


def test_direct_counts_the_pods_it_scraped_so_a_missing_ready_pod_reads_unknown() -> None:
    async def fetch(url: str) -> str:
        return exposition(1, 0, 0)

    source = DirectSource(fetch, lambda: 1.0)
    results = {
        r.query.signal: r for r in asyncio.run(source.read({KEY: ["http://10.0.0.1:30000/metrics"]}, Windows(30, 60)))
    }
    assert results[Signal.SERIES].values == {KEY: 1.0}
    target = ReadTarget(KEY.namespace, KEY.name, (PoolTarget(KEY.pool, 2, True),), 15.0)
    reading = read(target, index(results.values()), 1.0)
    assert reading.sample.demand is None and reading.reason == reasons.PARTIAL_SERIES

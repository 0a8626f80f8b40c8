"""The emulator's Prometheus metrics, named, typed and labelled as SGLang 0.5.23 does
(sglang/srt/observability/metrics_collector.py):

- scheduler gauges carry model_name, engine_type, tp_rank, pp_rank, moe_ep_rank;
- tokenizer counters and histograms carry model_name, engine_type and is_streaming ("true"/"false"),
  except num_aborted_requests_total (no is_streaming); bucket boundaries are SGLang's defaults.

`build_metrics()` is the one place they are defined, so a conformance test can compare this registry with the
real wheel's."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

SCHEDULER_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
TOKENIZER_LABELS = ("model_name", "engine_type")
STREAM_LABELS = (*TOKENIZER_LABELS, "is_streaming")

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (*TTFT_BUCKETS, 600, 1200, 1800, 2400)
TPOT_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
    0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip


# (name, type, label names) of every metric the emulator exports, in the form a conformance test compares
# with the real wheel's collectors. Counter names carry _total as SGLang writes them.
METRIC_SIGNATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "sglang:num_running_reqs": ("gauge", SCHEDULER_LABELS),
    "sglang:num_queue_reqs": ("gauge", SCHEDULER_LABELS),
    "sglang:gen_throughput": ("gauge", SCHEDULER_LABELS),
    "sglang:token_usage": ("gauge", SCHEDULER_LABELS),
    "sglang:spec_accept_length": ("gauge", SCHEDULER_LABELS),
    "sglang:spec_accept_rate": ("gauge", SCHEDULER_LABELS),
    "sglang:spec_num_steps": ("gauge", SCHEDULER_LABELS),
    "sglang:prompt_tokens_total": ("counter", STREAM_LABELS),
    "sglang:generation_tokens_total": ("counter", STREAM_LABELS),
    "sglang:realtime_tokens_total": ("counter", (*SCHEDULER_LABELS, "mode")),
    "sglang:num_requests_total": ("counter", STREAM_LABELS),
    "sglang:num_aborted_requests_total": ("counter", TOKENIZER_LABELS),
    "sglang:time_to_first_token_seconds": ("histogram", STREAM_LABELS),
    "sglang:request_time_per_output_token_seconds": ("histogram", STREAM_LABELS),
    "sglang:e2e_request_latency_seconds": ("histogram", STREAM_LABELS),
}


def signatures(metrics: EmulatorMetrics) -> dict[str, tuple[str, tuple[str, ...]]]:
    """(type, label names) per metric, read back from the built collectors (what the registry really holds)."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for value in vars(metrics).values():
        if isinstance(value, Gauge | Counter | Histogram):
            name = value._name + ("_total" if isinstance(value, Counter) else "")
            out[name] = (value._type, tuple(value._labelnames))
    return out


@dataclass(frozen=True)
class EmulatorMetrics:
    registry: CollectorRegistry
    num_running_reqs: Gauge
    num_queue_reqs: Gauge
    gen_throughput: Gauge
    token_usage: Gauge
    spec_accept_length: Gauge
    spec_accept_rate: Gauge
    spec_num_steps: Gauge
    prompt_tokens: Counter
    generation_tokens: Counter
    realtime_tokens: Counter
    num_requests: Counter
    num_aborted_requests: Counter
    time_to_first_token: Histogram
    time_per_output_token: Histogram
    e2e_request_latency: Histogram


def build_metrics(registry: CollectorRegistry | None = None) -> EmulatorMetrics:
    """A fresh registry holding the SGLang metrics the emulator exports (no series until labelled)."""
    reg = registry if registry is not None else CollectorRegistry(auto_describe=True)

    def gauge(name: str, doc: str) -> Gauge:
        return Gauge(name, doc, labelnames=SCHEDULER_LABELS, registry=reg)

    def counter(name: str, doc: str, labels: tuple[str, ...] = STREAM_LABELS) -> Counter:
        return Counter(name, doc, labelnames=labels, registry=reg)

    def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
        return Histogram(name, doc, labelnames=STREAM_LABELS, buckets=buckets, registry=reg)

    return EmulatorMetrics(
        registry=reg,
        num_running_reqs=gauge("sglang:num_running_reqs", "The number of running requests."),
        num_queue_reqs=gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue."),
        gen_throughput=gauge("sglang:gen_throughput", "The generation throughput (token/s)."),
        token_usage=gauge("sglang:token_usage", "The token usage."),
        spec_accept_length=gauge(
            "sglang:spec_accept_length",
            "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
        ),
        spec_accept_rate=gauge(
            "sglang:spec_accept_rate", "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch)."
        ),
        spec_num_steps=gauge("sglang:spec_num_steps", "Currently active speculative_num_steps."),
        prompt_tokens=counter("sglang:prompt_tokens_total", "Number of prefill tokens processed."),
        generation_tokens=counter("sglang:generation_tokens_total", "Number of generation tokens processed."),
        realtime_tokens=counter(
            "sglang:realtime_tokens_total",
            "Total number of tokens processed (updated on each log interval). "
            "mode: prefill_compute, prefill_cache, decode.",
            (*SCHEDULER_LABELS, "mode"),
        ),
        num_requests=counter("sglang:num_requests_total", "Number of requests processed."),
        num_aborted_requests=counter(
            "sglang:num_aborted_requests_total", "Number of requests aborted.", TOKENIZER_LABELS
        ),
        time_to_first_token=histogram(
            "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        ),
        time_per_output_token=histogram(
            "sglang:request_time_per_output_token_seconds",
            "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
            TPOT_BUCKETS,
        ),
        e2e_request_latency=histogram(
            "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", E2E_BUCKETS
        ),
    )

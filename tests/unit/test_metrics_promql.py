"""PromQL for the load signal: grouped by the PodMonitor's labels, overridable per SpecServe."""

from __future__ import annotations

import pytest

from specserve.api.validation import parse_object
from specserve.metrics.promql import (
    GROUP_LABELS,
    LOAD_SIGNALS,
    PoolKey,
    SelectorError,
    Signal,
    Windows,
    grouped_queries,
    render_selector,
    selector_queries,
)
from specserve.render import render


def test_windows_smooth_over_two_evaluations_and_rate_over_several_scrapes() -> None:
    assert Windows.of(15, 15) == Windows(smooth=30, rate=60)
    assert Windows.of(1, 1) == Windows(smooth=2, rate=4)
    assert Windows.of(60, 5) == Windows(smooth=120, rate=120)
    assert Windows.of(5, 15).smooth == 30


def test_grouped_queries_are_one_per_signal_grouped_by_the_specserve_labels() -> None:
    queries = grouped_queries(Windows(30, 60))
    assert [q.signal for q in queries] == list(LOAD_SIGNALS)
    assert all(q.key is None for q in queries)
    by = {q.signal: q.promql for q in queries}
    group = "by (namespace, specserve_instance, specserve_pool)"
    assert by[Signal.RUNNING] == (
        f'sum {group} (avg_over_time(sglang:num_running_reqs{{specserve_instance!=""}}[30s]))'
    )
    assert by[Signal.QUEUED].startswith(f"sum {group} (avg_over_time(sglang:num_queue_reqs{{")
    assert by[Signal.TOKENS] == f'sum {group} (rate(sglang:generation_tokens_total{{specserve_instance!=""}}[60s]))'
    assert by[Signal.TTFT_P99] == (
        "histogram_quantile(0.99, sum by (namespace, specserve_instance, specserve_pool, le) "
        '(rate(sglang:time_to_first_token_seconds_bucket{specserve_instance!=""}[60s])))'
    )
    assert "sglang:request_time_per_output_token_seconds_bucket" in by[Signal.TPOT_P50]
    assert by[Signal.SPEC_STEPS] == f'avg {group} (sglang:spec_num_steps{{specserve_instance!=""}})'
    assert by[Signal.FRESHNESS] == f'min {group} (timestamp(sglang:num_running_reqs{{specserve_instance!=""}}))'


def test_the_grouping_labels_are_the_ones_our_podmonitor_relabels_to(kimi_doc: dict[str, object]) -> None:
    monitor = next(m for m in render(parse_object(kimi_doc)) if m["kind"] == "PodMonitor")
    targets = {r["targetLabel"] for r in monitor["spec"]["podMetricsEndpoints"][0]["relabelings"]}
    # `namespace` is added to every PodMonitor target by the Prometheus Operator itself.
    assert set(GROUP_LABELS) - {"namespace"} <= targets


def test_a_series_selector_gives_the_specserve_its_own_queries_per_pool() -> None:
    template = 'kubernetes_namespace="$namespace",app="$name-$pool"'
    queries = selector_queries(template, "llm", "kimi", ("speculative", "baseline"), Windows(30, 60))
    assert len(queries) == 2 * len(LOAD_SIGNALS)
    running = [q for q in queries if q.signal is Signal.RUNNING]
    assert [q.key for q in running] == [PoolKey("llm", "kimi", "speculative"), PoolKey("llm", "kimi", "baseline")]
    assert running[0].promql == (
        'sum (avg_over_time(sglang:num_running_reqs{kubernetes_namespace="llm",app="kimi-speculative"}[30s]))'
    )


def test_a_selector_with_an_unknown_placeholder_names_the_field() -> None:
    with pytest.raises(SelectorError, match=r"spec\.switching\.metrics\.seriesSelector"):
        render_selector('namespace="$namespace",app="$app"', "llm", "kimi", "engine")


def test_the_series_count_counts_pods_not_series() -> None:
    (grouped,) = [q for q in grouped_queries(Windows(30, 60)) if q.signal is Signal.SERIES]
    by = "namespace, specserve_instance, specserve_pool"
    assert grouped.promql == (
        f'count by ({by}) (count by ({by}, instance) (sglang:num_running_reqs{{specserve_instance!=""}}))'
    )
    own = [
        q
        for q in selector_queries('namespace="$namespace",app="$name"', "llm", "a", ("engine",), Windows(30, 60))
        if q.signal is Signal.SERIES
    ]
    assert own[0].promql == 'count (count by (instance) (sglang:num_running_reqs{namespace="llm",app="a"}))'


@pytest.mark.parametrize(
    "template",
    [
        'a="b"}) or vector(1e9) or sum({x="y"',  # closes the matcher and injects PromQL
        'namespace="kube-system",app="$name"',  # another namespace
        'app="$name"',  # no namespace at all: every namespace
        'namespace=~".*"',  # a regexp is no scope
    ],
)
def test_only_label_matchers_on_the_specserve_s_namespace_become_promql(template: str) -> None:
    """The API refuses these; the query builder refuses them again, so no text but matchers is ever sent."""
    with pytest.raises(SelectorError, match=r"spec\.switching\.metrics\.seriesSelector"):
        selector_queries(template, "llm", "kimi", ("engine",), Windows(30, 60))

"""Restart's demand history through PromQL `offset`: the queries, reading them into a History (unknown is never
0), and the loop's round: four grouped queries for every Restart SpecServe sharing a Prometheus, none for Direct
or the other strategies, the history reaching the policy's Sample."""

from __future__ import annotations

import copy
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from specserve.api.models import Mode, Strategy
from specserve.api.validation import parse_object
from specserve.metrics.promql import (
    HISTORY_SIGNALS,
    HORIZON_MAX,
    PoolKey,
    Query,
    Signal,
    Windows,
    history_queries,
    horizon_of,
    selector_history_queries,
)
from specserve.metrics.results import QueryResult
from specserve.metrics.signal import PoolTarget, ReadTarget, index, read_history
from specserve.policy.forecast import History
from specserve.switching.gather import forecast_horizon, read_plan
from tests.unit.policy_helpers import specserve
from tests.unit.test_switching_loop import NS, FakePrometheus, FakeReaders, World, deployment, make_world

GROUP = "by (namespace, specserve_instance, specserve_pool)"
M = 'specserve_instance!=""'


def test_the_history_is_read_a_day_and_a_week_back_now_and_over_the_horizon_ahead() -> None:
    by = {q.signal: q.promql for q in history_queries(Windows(30, 60), 1200)}
    assert set(by) == set(HISTORY_SIGNALS)
    assert by[Signal.DEMAND_DAY] == (
        f"sum {GROUP} (avg_over_time(sglang:num_running_reqs{{{M}}}[30s] offset 86400s)) + "
        f"sum {GROUP} (avg_over_time(sglang:num_queue_reqs{{{M}}}[30s] offset 86400s))"
    )
    # the range ending `lookback - horizon` ago covers the horizon that followed the same moment back then
    assert f"[1200s] offset {86400 - 1200}s" in by[Signal.AHEAD_DAY]
    assert f"[1200s] offset {604800 - 1200}s" in by[Signal.AHEAD_WEEK]
    assert "[30s] offset 604800s" in by[Signal.DEMAND_WEEK]


def test_the_horizon_is_rounded_up_so_similar_specserves_share_queries() -> None:
    assert horizon_of(810.0) == horizon_of(900.0) == 900
    assert horizon_of(0.0) == 300
    assert horizon_of(1e6) == HORIZON_MAX


def test_a_series_selector_gets_its_own_history_queries_per_pool() -> None:
    queries = selector_history_queries(
        'namespace="$namespace",app="$name"', "llm", "kimi", ("engine",), Windows(30, 60), 900
    )
    assert len(queries) == len(HISTORY_SIGNALS)
    assert all(q.key == PoolKey("llm", "kimi", "engine") and 'app="kimi"' in q.promql for q in queries)


TARGET = ReadTarget("llm", "kimi", (PoolTarget("engine", 1, True),), 15.0)
ENGINE = PoolKey("llm", "kimi", "engine")


def results(values: dict[Signal, float], error: str | None = None) -> list[QueryResult]:
    out = []
    for q in history_queries(Windows(30, 60), 900):
        if error is not None:
            out.append(QueryResult(q, error=error))
        else:
            out.append(QueryResult(q, {ENGINE: values[q.signal]} if q.signal in values else {}, 0.0))
    return out


def test_read_history_sums_the_pools_and_keeps_what_was_not_recorded_unknown() -> None:
    full = {Signal.DEMAND_DAY: 10.0, Signal.AHEAD_DAY: 12.0, Signal.DEMAND_WEEK: 9.0, Signal.AHEAD_WEEK: 11.0}
    assert read_history(TARGET, index(results(full)), 900) == History(10.0, 9.0, 12.0, 11.0, 900)
    # retention shorter than a week: no series a week back; idle a day ago is a recorded 0, not unknown
    day_only = {Signal.DEMAND_DAY: 0.0, Signal.AHEAD_DAY: 0.0}
    assert read_history(TARGET, index(results(day_only)), 900) == History(0.0, None, 0.0, None, 900)
    nan = {Signal.DEMAND_DAY: float("nan"), Signal.AHEAD_DAY: 3.0}
    assert read_history(TARGET, index(results(nan)), 900).now_day is None
    assert read_history(TARGET, index(results({}, error="timed out")), 900) == History(horizon=900)
    assert read_history(TARGET, {}, 900) == History(horizon=900)  # not asked at all


def test_only_restart_through_prometheus_reads_a_history(kimi_doc: dict[str, Any]) -> None:
    restart = specserve(Strategy.RESTART, {"minDwellSeconds": 300}, engine={"startupTimeoutSeconds": 510})
    assert forecast_horizon(restart) == 900  # 510 s start-up + 300 s dwell, rounded up
    direct = specserve(Strategy.RESTART, {"metrics": {"source": "Direct"}})
    assert forecast_horizon(direct) is None
    assert forecast_horizon(specserve(Strategy.ADAPTIVE)) is None


@dataclass
class HistoryProm(FakePrometheus):
    """The scripted load, and a history on the engine pools: `past` requests a day/week back, `ahead` after."""

    past: float = 6.0
    ahead: float = 3.0
    history_reads: list[list[Query]] = field(default_factory=list)

    async def read(self, queries: Sequence[Query]) -> list[QueryResult]:
        if not any(q.signal in HISTORY_SIGNALS for q in queries):
            loads = await super().read(queries)
            for result in loads:  # Restart's one pool reports as `engine`
                for n, d in self.demand.items():
                    engine = {Signal.RUNNING: d, Signal.QUEUED: 0.0, Signal.FRESHNESS: self.now}.get(
                        result.query.signal
                    )
                    result.values[PoolKey(NS, n, "engine")] = engine if engine is not None else 1.0
            return loads
        self.history_reads.append(list(queries))
        out = []
        for q in queries:
            value = self.ahead if q.signal in (Signal.AHEAD_DAY, Signal.AHEAD_WEEK) else self.past
            out.append(QueryResult(q, {PoolKey(NS, n, "engine"): value for n in self.demand}, self.now))
        return out


def with_history(w: World) -> HistoryProm:
    prom = HistoryProm(dict(w.prom.demand))
    w.prom = prom
    w.loop.readers = FakeReaders(prom)
    return prom


async def test_every_restart_specserve_gets_its_history_from_four_queries_per_round(kimi_doc: dict[str, Any]) -> None:
    doc = copy.deepcopy(kimi_doc)
    doc["spec"]["strategy"] = "Restart"
    names = [f"s{i}" for i in range(30)]
    w = make_world(doc, names)
    prom = with_history(w)
    w.kube.deployments = [deployment(f"{n}-engine") for n in names]
    await w.round_at(100)
    assert len(prom.history_reads) == 1 and len(prom.history_reads[0]) == len(HISTORY_SIGNALS)
    horizon = forecast_horizon(parse_object(doc))
    assert horizon is not None
    assert [sample.history for _, sample, _ in w.policy.calls] == [History(6.0, 6.0, 3.0, 3.0, horizon)] * 30


async def test_traffic_split_specserves_read_no_history(kimi_doc: dict[str, Any]) -> None:
    assert kimi_doc["spec"]["strategy"] != "Restart"  # the premise
    w = make_world(kimi_doc, ["a", "b"])
    prom = with_history(w)
    await w.round_at(100)
    assert prom.history_reads == [] and len(w.policy.calls) == 2
    assert all(sample.history is None for _, sample, _ in w.policy.calls)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool (Prometheus' own evaluator)")
def test_prometheus_evaluates_the_history_queries_as_meant(tmp_path: Path) -> None:
    """Prometheus' own engine (promtool test rules) on a day of 1-minute scrapes: running 10, but 5 from minute 10
    to 24 and 20 from minute 25 to 39; queued 1 throughout."""
    qs = {q.signal: q.promql for q in history_queries(Windows(120, 120), 900)}
    labels = '{namespace="llm",specserve_instance="kimi",specserve_pool="engine"}'
    running = ["5" if 10 <= m < 25 else "20" if 25 <= m < 40 else "10" for m in range(1500)]
    cases = [
        (Signal.DEMAND_DAY, "1452m", [6.0]),  # a day back, smoothed over 2 minutes: 5 + 1
        (Signal.AHEAD_DAY, "1450m", [(15 * 5 + 20) / 16 + 1]),  # the 15 minutes that followed (ends inclusive)
        (Signal.AHEAD_DAY, "1465m", [(15 * 20 + 10) / 16 + 1]),
        (Signal.DEMAND_WEEK, "1465m", []),  # nothing recorded a week back: no sample (unknown), not 0
    ]
    doc = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"sglang:num_running_reqs{labels}", "values": " ".join(running)},
                    {"series": f"sglang:num_queue_reqs{labels}", "values": "1x1500"},
                ],
                "promql_expr_test": [
                    {"expr": qs[s], "eval_time": t, "exp_samples": [{"labels": labels, "value": v} for v in vs]}
                    for s, t, vs in cases
                ],
            }
        ],
    }
    path = tmp_path / "history.test.yaml"
    path.write_text(yaml.safe_dump(doc))
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_direct_windows_follow_the_evaluation_not_the_pod_monitors_scrape_interval() -> None:
    """Direct scrapes once per evaluation: a 15 s PodMonitor interval must not stretch a 2 s loop's windows."""
    fast = {"evaluationIntervalSeconds": 2}
    direct = specserve(
        Strategy.TRAFFIC_SPLIT, {**fast, "metrics": {"source": "Direct"}}, monitoring={"intervalSeconds": 15}
    )
    prometheus = specserve(Strategy.TRAFFIC_SPLIT, fast, monitoring={"intervalSeconds": 15})
    assert read_plan(direct, Mode.SPECULATIVE, None).windows == Windows(smooth=4, rate=8)
    assert read_plan(prometheus, Mode.SPECULATIVE, None).windows == Windows(smooth=30, rate=60)

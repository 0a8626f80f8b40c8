"""The demo's end: the summary (requests and tokens per pool, switches, failures, TPOT around each switch), the
decision history as the SpecServe's status holds it, a JSON copy and the timeline PNG (pure except the writes)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specserve_tools.bench.stats import percentile
from specserve_tools.demo.load import Record
from specserve_tools.demo.timeline import Sample, Timeline


@dataclass(frozen=True)
class Switch:
    t: float
    before: str  # mode and speculative/baseline weights
    after: str
    tpot_before: tuple[float | None, float | None]  # p50, p99 (ms) of requests that finished just before
    tpot_after: tuple[float | None, float | None]  # ... and of requests that started just after


@dataclass(frozen=True)
class PoolRow:
    pool: str
    requests: int
    tokens: int
    failed: int


@dataclass
class Summary:
    duration: float
    requests: int
    failed: int
    tokens: int
    pools: list[PoolRow]
    switches: list[Switch]
    weight_changes: int
    speculative_weight_min: int | None
    speculative_weight_max: int | None
    weights_moved_both_ways: bool
    errors: list[str] = field(default_factory=list)  # the first few failure messages
    # HAProxy's own count of responses by class, as Prometheus scraped its exporter (a check on `failed`).
    gateway_responses: dict[str, float] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)  # status.history at the end
    status_view: list[str] = field(default_factory=list)  # `kubectl specserve status` at the end

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=str)


def _state(sample: Sample) -> str | None:
    """What a switch changes: the route's split (TrafficSplit) and the mode (Restart, Adaptive)."""
    spec, base = sample.weights.get("speculative"), sample.weights.get("baseline")
    split = f" {spec}/{base}" if spec is not None and base is not None else ""
    return f"{sample.mode or '?'}{split}" if sample.mode or split else None


def _tpot(records: Sequence[Record]) -> tuple[float | None, float | None]:
    values = [r.tpot * 1000 for r in records if r.tpot is not None and r.error is None]
    p50, p99 = percentile(values, 50), percentile(values, 99)
    return (round(p50, 2) if p50 is not None else None, round(p99, 2) if p99 is not None else None)


def summarize(
    records: Sequence[Record], t0: float, timeline: Timeline, history: Sequence[Mapping[str, Any]], window: float
) -> Summary:
    samples = timeline.samples
    switches: list[Switch] = []
    for prev, cur in itertools.pairwise(samples):
        before, after = _state(prev), _state(cur)
        if before and after and before != after:
            ts = cur.t
            done_before = [r for r in records if r.end is not None and ts - window <= r.end - t0 < ts]
            started_after = [r for r in records if ts <= r.start - t0 < ts + window]
            switches.append(Switch(ts, before, after, _tpot(done_before), _tpot(started_after)))
    spec_weights = [s.weights["speculative"] for s in samples if "speculative" in s.weights]
    changes = sum(a != b for a, b in itertools.pairwise(spec_weights))
    down = any(b < a for a, b in itertools.pairwise(spec_weights))
    up = any(b > a for a, b in itertools.pairwise(spec_weights))
    pools: dict[str, list[Record]] = {}
    for r in records:
        pools.setdefault(timeline.pod_pool.get(r.server, r.server or "(no server)"), []).append(r)
    rows = [
        PoolRow(
            pool,
            sum(r.error is None for r in rs),
            sum(r.tokens for r in rs if r.error is None),
            sum(r.error is not None for r in rs),
        )
        for pool, rs in sorted(pools.items())
    ]
    failed = [r for r in records if r.error is not None]
    return Summary(
        duration=round(samples[-1].t, 1) if samples else 0.0,
        requests=len(records),
        failed=len(failed),
        tokens=sum(r.tokens for r in records if r.error is None),
        pools=rows,
        switches=switches,
        weight_changes=changes,
        speculative_weight_min=min(spec_weights) if spec_weights else None,
        speculative_weight_max=max(spec_weights) if spec_weights else None,
        weights_moved_both_ways=up and down,
        errors=sorted({r.error or "" for r in failed})[:5],
        history=[dict(h) for h in history],
    )


def plot(timeline: Timeline, path: Path, title: str) -> None:
    import matplotlib  # noqa: PLC0415 (the bench extra; only loaded for the picture)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    s = timeline.samples
    t = [x.t for x in s]
    fig, axes = plt.subplots(4, 1, figsize=(10, 9), sharex=True)
    axes[0].plot(t, [x.demand for x in s], label="demand (clients)")
    axes[0].plot(t, [x.in_flight for x in s], label="in flight", alpha=0.7)
    axes[0].plot(t, [x.prometheus_demand for x in s], label="running + queued (Prometheus)", alpha=0.7)
    axes[0].plot(t, [x.operator_demand for x in s], label="demand of the last decision (status)", linestyle="--")
    axes[0].set_ylabel("requests")
    axes[1].step(t, [x.weights.get("speculative", 0) for x in s], where="post", label="speculative")
    axes[1].step(t, [x.weights.get("baseline", 0) for x in s], where="post", label="baseline")
    for role in sorted({r for x in s for r in x.weights} - {"speculative", "baseline"}):  # single-pool strategies
        axes[1].step(t, [x.weights.get(role, 0) for x in s], where="post", label=role)
    axes[1].set_ylabel("route weight")
    if any(x.draft_steps is not None for x in s):  # Adaptive switches inside the engine: drafting on or off
        steps = axes[1].twinx()
        steps.plot(t, [x.draft_steps for x in s], color="tab:green", linestyle=":", label="draft steps (engine)")
        steps.set_ylabel("draft steps")
        steps.legend(loc="upper right", fontsize=8)
    axes[2].plot(t, [x.tok_s for x in s], label="through the gateway")
    axes[2].set_ylabel("output tok/s")
    axes[3].plot(t, [x.failed for x in s], color="tab:red", label="failed requests (cumulative)")
    axes[3].set_ylabel("failed")
    axes[3].set_xlabel("seconds")
    for ax in axes:
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_title(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _ms(pair: tuple[float | None, float | None]) -> str:
    return " / ".join("-" if v is None else f"{v:.1f}" for v in pair)


def lines(summary: Summary) -> list[str]:
    """The summary as plain text (the rich view prints tables with the same content)."""
    out = [
        f"requests {summary.requests}, failed {summary.failed}, output tokens {summary.tokens}, "
        f"weight changes {summary.weight_changes}, switches {len(summary.switches)}, "
        f"speculative weight {summary.speculative_weight_min}..{summary.speculative_weight_max}"
        f"{' (moved both ways)' if summary.weights_moved_both_ways else ''}",
        "pool          requests   tokens  failed",
    ]
    out += [f"{p.pool:<12} {p.requests:>9} {p.tokens:>8} {p.failed:>7}" for p in summary.pools]
    out.append("switch  at (s)  mode and weights spec/base, before -> after    TPOT p50/p99 ms before    after")
    for i, sw in enumerate(summary.switches, 1):
        out.append(
            f"{i:>6}  {sw.t:>6.1f}  {sw.before:>18} -> {sw.after:<18}  {_ms(sw.tpot_before):>18}  {_ms(sw.tpot_after)}"
        )
    out.append(f"decision history (status.history, {len(summary.history)} entries):")
    for h in summary.history:
        out.append(
            f"  {h.get('time')}  {h.get('fromMode')} -> {h.get('toMode')}  {h.get('action') or ''}"
            f" {h.get('weights') or ''}  demand {h.get('concurrency')}: {h.get('reason')}"
        )
    if summary.gateway_responses:
        counts = ", ".join(f"{k} {v:g}" for k, v in sorted(summary.gateway_responses.items()))
        out.append(f"HAProxy's exporter (via Prometheus): responses {counts}")
    out += [f"error: {e}" for e in summary.errors]
    if summary.status_view:
        out += ["kubectl specserve status:", *summary.status_view]
    return out

"""The comparison as a terminal table (rich when installed, plain text otherwise), JSON, CSV and two PNGs:
a timeline (demand, weights or mode, tokens/s per policy) and a bar chart of the gain captured."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from specserve_tools.simulate.compare import Comparison
from specserve_tools.simulate.summary import Summary

COLUMNS: list[tuple[str, str]] = [
    ("policy", "name"),
    ("output Mtok", "output_tokens"),
    ("goodput Mtok", "goodput_tokens"),
    ("TTFT mean/p50/p99 s", "ttft"),
    ("TPOT mean/p50/p99 ms", "tpot"),
    ("TPOT/token ms", "tpot_token_mean"),
    ("switches", "switches"),
    ("restart down s", "restart_downtime_seconds"),
    ("gain captured", "gain_captured"),
    ("latency gain", "latency_gain_captured"),
]


def _num(v: float | None, scale: float = 1.0, digits: int = 2) -> str:
    return "-" if v is None or not math.isfinite(v) else f"{v * scale:.{digits}f}"


def cells(s: Summary) -> list[str]:
    restarts = s.restarts_into_speculative + s.restarts_into_baseline
    switches = "-" if s.role == "optimum" else str(s.switches)
    if s.weight_changes:
        switches += f" ({s.weight_changes} weight moves)"
    elif restarts:
        switches += f" ({s.restarts_into_speculative} into spec)"
    return [
        s.name,
        _num(s.output_tokens, 1e-6),
        _num(s.goodput_tokens, 1e-6),
        f"{_num(s.ttft_mean)}/{_num(s.ttft_p50)}/{_num(s.ttft_p99)}",
        f"{_num(s.tpot_mean, 1e3, 1)}/{_num(s.tpot_p50, 1e3, 1)}/{_num(s.tpot_p99, 1e3, 1)}",
        _num(s.tpot_token_mean, 1e3, 2),
        switches,
        _num(s.restart_downtime_seconds, 1.0, 0),
        "-" if s.gain_captured is None else f"{s.gain_captured * 100:.1f}%",
        "-" if s.latency_gain_captured is None else f"{s.latency_gain_captured * 100:.1f}%",
    ]


def plain_table(comparison: Comparison) -> str:
    rows = [[h for h, _ in COLUMNS]] + [cells(s) for s in comparison.rows()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def print_table(comparison: Comparison, title: str) -> None:
    try:
        from rich.console import Console  # noqa: PLC0415 (optional: the bench extra)
        from rich.table import Table  # noqa: PLC0415
    except ImportError:
        print(title)
        print(plain_table(comparison))
        return
    table = Table(title=title)
    for header, _ in COLUMNS:
        table.add_column(header, justify="left" if header == "policy" else "right")
    for s in comparison.rows():
        table.add_row(*cells(s))
    Console(width=190).print(table)  # wide enough for every column when piped too


def document(comparison: Comparison, context: dict[str, Any]) -> dict[str, Any]:
    return {
        **context,
        "best_static": comparison.best_static,
        "notes": comparison.notes,
        "policies": [s.row() for s in comparison.rows()],
    }


def write_json(comparison: Comparison, context: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(document(comparison, context), indent=2, allow_nan=False) + "\n")


def csv_text(comparison: Comparison) -> str:
    out = io.StringIO()
    fields = list(comparison.rows()[0].row()) if comparison.rows() else []
    writer = csv.DictWriter(out, fieldnames=fields)
    writer.writeheader()
    for s in comparison.rows():
        writer.writerow({k: ("" if v is None else v) for k, v in s.row().items()})
    return out.getvalue()


def write_plots(comparison: Comparison, out: Path, title: str) -> list[Path]:
    """The two PNGs; [] when matplotlib is not installed (the bench extra)."""
    try:
        import matplotlib  # noqa: PLC0415 (lazy: heavy, only the plots need it)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        return []
    runs = comparison.runs
    fig, axes = plt.subplots(3, 1, figsize=(12, 9), sharex=True)
    for run in runs:
        hours = [t / 3600 for t in run.timeline.time]
        axes[0].plot(hours, run.timeline.demand, linewidth=0.8, label=run.name)
        axes[1].plot(hours, run.timeline.speculative_share, linewidth=0.8, label=run.name)
        axes[2].plot(hours, run.timeline.tokens_per_second, linewidth=0.8, label=run.name)
    axes[0].set_ylabel("demand (requests in flight)")
    axes[1].set_ylabel("speculative weight / pods %")
    axes[2].set_ylabel("output tokens/s")
    axes[2].set_xlabel("hours")
    axes[0].set_title(title)
    axes[0].legend(fontsize=7, ncol=3)
    fig.tight_layout()
    timeline = out / "timeline.png"
    fig.savefig(timeline, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 4))
    names = [s.name for s in comparison.rows()]
    gains = [(s.gain_captured or 0.0) * 100 for s in comparison.rows()]
    # green: the operator's own row (it learns its curves)
    ax.bar(range(len(names)), gains, color=["tab:green" if s.role == "learned" else "tab:gray"
                                            for s in comparison.rows()])  # fmt: skip
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("gain captured (%)")
    ax.set_ylim(max(-100.0, min(gains, default=0.0) - 5), max(110.0, max(gains, default=0.0) + 5))  # far losers clip
    ax.axhline(100, color="black", linewidth=0.5)
    ax.set_title(title)
    fig.tight_layout()
    bars = out / "gain.png"
    fig.savefig(bars, dpi=110)
    plt.close(fig)
    return [timeline, bars]

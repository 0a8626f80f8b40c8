"""The live terminal view: rich on a terminal, one plain line every few seconds otherwise (CI logs, pipes)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Protocol, TextIO

from specserve_tools.demo.timeline import Sample

PLAIN_EVERY = 5.0  # seconds between two plain status lines
COLUMNS = ("demand", "Prometheus / last decision", "mode", "weights", "pools ready", "tok/s", "ok", "failed")


def decision_line(d: Mapping[str, Any]) -> str:
    weights = d.get("weights") or {}
    split = f" weights {weights.get('speculative')}/{weights.get('baseline')}" if weights else ""
    applied = "" if d.get("applied", True) else " (advisory)"
    return (
        f"decision {d.get('time')}: {d.get('fromMode')} -> {d.get('toMode')} {d.get('action') or ''}{split}"
        f"{applied}: {d.get('reason')}"
    )


def weights_text(weights: Mapping[str, int]) -> str:
    if "speculative" in weights or "baseline" in weights:
        return f"spec/base {weights.get('speculative', '-')}/{weights.get('baseline', '-')}"
    return " ".join(f"{k} {v}" for k, v in sorted(weights.items())) or "-"  # a single-pool strategy


def status_line(s: Sample, ok: int) -> str:
    ready = " ".join(f"{k} {v}" for k, v in sorted(s.ready.items()))
    seen = "-" if s.operator_demand is None else f"{s.operator_demand:.0f}"
    prom = "-" if s.prometheus_demand is None else f"{s.prometheus_demand:.0f}"
    steps = "" if s.draft_steps is None else f" draft steps {s.draft_steps:.1f}"
    return (
        f"t={s.t:5.0f}s demand {s.demand:4.0f} (in flight {s.in_flight:3d}, Prometheus {prom:>3}, "
        f"last decision {seen:>3}) "
        f"mode {s.mode or '-':<11} weights {weights_text(s.weights)} "
        f"ready [{ready}]{steps} {s.tok_s:7.0f} tok/s ok {ok} failed {s.failed}"
    )


class View(Protocol):
    def update(self, sample: Sample, ok: int, new_decisions: list[dict[str, Any]]) -> None: ...
    def note(self, text: str) -> None: ...
    def close(self) -> None: ...


class PlainView:
    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self._last = -PLAIN_EVERY

    def update(self, sample: Sample, ok: int, new_decisions: list[dict[str, Any]]) -> None:
        for d in new_decisions:
            print(decision_line(d), file=self.out, flush=True)
        if sample.t - self._last >= PLAIN_EVERY:
            self._last = sample.t
            print(status_line(sample, ok), file=self.out, flush=True)

    def note(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def close(self) -> None:
        return None


class RichView:
    def __init__(self, title: str, duration: float) -> None:
        from rich.console import Console  # noqa: PLC0415 (bench extra; plain view without it)
        from rich.live import Live  # noqa: PLC0415

        self.console = Console()
        self.title, self.duration = title, duration
        self.decisions: list[str] = []
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def update(self, sample: Sample, ok: int, new_decisions: list[dict[str, Any]]) -> None:
        from rich.table import Table  # noqa: PLC0415

        self.decisions.extend(decision_line(d) for d in new_decisions)
        table = Table(title=f"{self.title}  t={sample.t:.0f}/{self.duration:.0f} s", expand=True)
        for column in COLUMNS:
            table.add_column(column)
        table.add_row(
            f"{sample.demand:.0f} (in flight {sample.in_flight})",
            " / ".join("-" if v is None else f"{v:.0f}" for v in (sample.prometheus_demand, sample.operator_demand)),
            sample.mode or "-",
            weights_text(sample.weights),
            " ".join(f"{k} {v}" for k, v in sorted(sample.ready.items())),
            f"{sample.tok_s:.0f}",
            str(ok),
            f"[red]{sample.failed}[/red]" if sample.failed else "0",
        )
        decisions = Table(title="decisions (SpecServe status)", expand=True, show_header=False)
        decisions.add_column("decision")
        for line in self.decisions[-6:] or ["(none yet)"]:
            decisions.add_row(line)
        from rich.console import Group  # noqa: PLC0415

        self.live.update(Group(table, decisions))

    def note(self, text: str) -> None:
        self.console.print(text)

    def close(self) -> None:
        self.live.stop()


def make_view(title: str, duration: float, plain: bool) -> View:
    if plain or not sys.stdout.isatty():
        return PlainView()
    try:
        return RichView(title, duration)
    except ImportError:
        return PlainView()

"""Bench result files: JSON (the full record, what calibrate and plot read) and CSV (one row per level)."""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from specserve.api.curves import Curve, CurveError
from specserve_tools.bench.calibrate import Measured
from specserve_tools.bench.stats import LevelStats, mean_ci

# v2 added each level's repeats (samples, ci_low, ci_high); v1 files (one window per level) still load.
FORMAT = "specserve-bench/v2"
CSV_FIELDS = [f.name for f in fields(LevelStats) if f.name != "samples"] + ["repeats"]


class BenchFileError(ValueError):
    """A bench result file that cannot be used; the message names the file and the fix."""


@dataclass
class BenchResult:
    url: str
    model: str
    label: str
    max_tokens: int
    time_scale: float
    levels: list[LevelStats] = field(default_factory=list)
    complete: bool = False
    error: str | None = None
    started: str = ""
    server: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "label": self.label,
            "url": self.url,
            "model": self.model,
            "max_tokens": self.max_tokens,
            "time_scale": self.time_scale,
            "started": self.started,
            "complete": self.complete,
            "error": self.error,
            "server": self.server,
            "levels": [asdict(level) for level in self.levels],
        }

    def curve(self) -> Curve:
        return Curve.from_points(
            [(lv.concurrency, lv.output_tokens_per_s) for lv in self.levels if lv.requests > 0], self.label
        )

    def measured(self, default_noise: float) -> Measured:
        """The curve with each level's noise: its CI when the level was repeated, else `default_noise`."""
        return measured_runs([self], default_noise)


def measured_runs(runs: Sequence[BenchResult], default_noise: float) -> Measured:
    """One mode's curve from one or more sweeps of it: each level's tok/s is the mean of the runs that swept it.
    Its noise (95% half-width):
    - one run: that run's own interval, or `default_noise` if the level was measured once;
    - two runs: the larger of each run's own noise and the difference between the two (the normal approximation,
      1.96 standard errors of a two-run mean ~ their difference: Student's t with one degree of freedom, 12.7,
      would leave almost nothing decidable, while a disagreement between the runs still widens the noise);
    - three runs or more: the t interval across the runs: run-to-run noise (restarts, other days), which windows
      of one run do not see."""
    by_level: dict[int, list[LevelStats]] = {}
    for run in runs:
        for lv in run.levels:
            if lv.requests > 0:
                by_level.setdefault(lv.concurrency, []).append(lv)
    levels: list[tuple[float, float, float | None]] = []
    for concurrency, found in sorted(by_level.items()):
        values = [lv.output_tokens_per_s for lv in found]
        if len(found) == 1:
            levels.append((concurrency, values[0], found[0].ci_half_width))
        elif len(found) == 2:
            mean = (values[0] + values[1]) / 2
            own = [lv.ci_half_width / lv.output_tokens_per_s if lv.ci_half_width is not None and lv.output_tokens_per_s
                   > 0 else default_noise for lv in found]  # fmt: skip
            levels.append((concurrency, mean, max(max(own) * mean, abs(values[0] - values[1]))))
        else:
            ci = mean_ci(values)
            assert ci is not None  # three or more values
            levels.append((concurrency, ci[0], (ci[2] - ci[1]) / 2))
    return Measured.from_levels(levels, default_noise)


def accept_length_of(runs: Sequence[BenchResult]) -> float | None:
    """The speculative pods' accept length over the sweeps (the median of the levels that read it; the gauge
    counts the token the target always adds, so a value below 1 is no reading); None where no level read it."""
    values = [lv.accept_length for run in runs for lv in run.levels
              if lv.requests > 0 and lv.accept_length is not None and 1 <= lv.accept_length <= 64]  # fmt: skip
    return statistics.median(values) if values else None


def write_json(result: BenchResult, path: Path) -> None:
    path.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")


def write_csv(result: BenchResult, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for level in result.levels:
            row = asdict(level)
            row.pop("samples")
            writer.writerow({**row, "repeats": level.repeats})


def _level(raw: Any, where: str) -> LevelStats:
    if not isinstance(raw, dict):
        raise BenchFileError(f"{where}: each level must be an object")
    try:
        concurrency = int(raw["concurrency"])
        tok_s = float(raw["output_tokens_per_s"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BenchFileError(f"{where}: a level needs numeric concurrency and output_tokens_per_s ({exc})") from exc
    known = {f.name for f in fields(LevelStats)}
    values = {k: v for k, v in raw.items() if k in known}
    values.update(concurrency=concurrency, output_tokens_per_s=tok_s)
    for name, default in (("requests", 1), ("errors", 0), ("requests_per_s", 0.0), ("window_s", 0.0)):
        values.setdefault(name, default)
    for name in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "accept_length", "ci_low", "ci_high"):
        values.setdefault(name, None)
    samples = raw.get("samples", [])
    if not isinstance(samples, list) or not all(isinstance(v, int | float) for v in samples):
        raise BenchFileError(f"{where}: 'samples' must be a list of tok/s numbers")
    values["samples"] = tuple(float(v) for v in samples)
    return LevelStats(**values)


def load_result(path: str) -> BenchResult:
    """Read a bench JSON file, checking what calibrate and plot rely on."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except json.JSONDecodeError as exc:
        raise BenchFileError(
            f"{path}: not valid JSON (line {exc.lineno}: {exc.msg}); pass a file written by `specserve bench`"
        ) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("levels"), list):
        raise BenchFileError(f"{path}: not a `specserve bench` result (no 'levels' list)")
    levels = [_level(raw, f"{path} level {i + 1}") for i, raw in enumerate(doc["levels"])]
    server = doc.get("server")
    result = BenchResult(
        url=str(doc.get("url", "")),
        model=str(doc.get("model", "")),
        label=str(doc.get("label") or Path(path).stem),
        max_tokens=int(doc.get("max_tokens") or 0),
        time_scale=float(doc.get("time_scale") or 1.0),
        levels=levels,
        complete=bool(doc.get("complete", True)),
        error=doc.get("error"),
        started=str(doc.get("started", "")),
        server=server if isinstance(server, dict) else {},
    )
    try:
        result.curve()
    except CurveError as exc:
        raise BenchFileError(f"{path}: unusable curve: {exc}") from exc
    return result


SPECULATIVE_LABELS = ("speculative", "adaptive", "eagle", "standalone", "ngram")


def mode_of(result: BenchResult) -> str | None:
    """Which server a result measured, "speculative" or "baseline", from what the file carries: the server's
    own word (get_server_info's speculative_algorithm, the emulator's mode), else its label; None: unknown."""
    server = result.server
    if "speculative_algorithm" in server:
        return "speculative" if server["speculative_algorithm"] else "baseline"
    emulated = server.get("specserve_emulator")
    if isinstance(emulated, dict) and isinstance(emulated.get("mode"), str):
        return "baseline" if emulated["mode"] == "baseline" else "speculative"
    label = result.label.lower()
    if label.startswith("baseline") or label in ("base", "plain"):
        return "baseline"
    if label.startswith(SPECULATIVE_LABELS):
        return "speculative"
    return None


def plot_labels(results: list[tuple[str, BenchResult]]) -> list[str]:
    """A legend entry per (path, result): its label, and where two share one, what tells them apart (the file;
    the speculative steps when the servers differ in them)."""
    labels = [r.label for _, r in results]
    out = []
    for path, result in results:
        if labels.count(result.label) == 1:
            out.append(result.label)
            continue
        steps = result.server.get("speculative_num_steps")
        detail = f"{steps} steps, " if steps else ""
        out.append(f"{result.label} ({detail}{Path(path).name})")
    return out

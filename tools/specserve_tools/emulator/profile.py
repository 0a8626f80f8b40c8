"""Performance profiles: the data the emulator's behaviour comes from.

A profile is a JSON file: per-mode curves of total output tokens/s against running requests, or a baseline model
(a stated formula) with a speed-up table for the speculative mode; plus TTFT, start-up delay, the
max-running-requests cap and the acceptance length. Two shipped profiles live in profiles/; users may pass their
own file, or two `specserve bench` result files (their measured curves)."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from specserve.api.curves import Curve, CurveError, interpolate


class ProfileError(ValueError):
    """A profile that cannot be loaded; the message names the file and the problem."""


@dataclass(frozen=True)
class Profile:
    name: str
    model_name: str
    speculative: Curve
    baseline: Curve
    startup_seconds: float = 0.0
    max_running_requests: int = 256
    ttft_seconds: float = 0.05
    accept_length: float = 2.0
    num_steps: int = 3
    adaptive_off_efficiency: float = 0.95
    # A drifting speculative curve (the prompt mix changes through the day): (hour of day, accept length) points,
    # linear between them and periodic over 24 h. Empty: the accept length holds at `accept_length`.
    accept_schedule: tuple[tuple[float, float], ...] = ()
    # The accept length of sampled requests (temperature > 0), when the profile measured one: such a request
    # advances at this share of a greedy one's accept length (NGRAM on the H200: ~1.0 against ~3.95). None: the
    # temperature does not matter.
    sampled_accept_length: float | None = None

    def accept_at(self, seconds: float) -> float:
        """The accept length at `seconds` from the start (the start is midnight)."""
        if not self.accept_schedule:
            return self.accept_length
        hours = [h for h, _ in self.accept_schedule]
        values = [a for _, a in self.accept_schedule]
        # periodic: wrap the first point to 24 h and the last to before 0 h
        hours = [hours[-1] - 24.0, *hours, hours[0] + 24.0]
        values = [values[-1], *values, values[0]]
        return interpolate(hours, values, (seconds / 3600.0) % 24.0)

    def speculative_scale(self, seconds: float) -> float:
        """The speculative curve's factor at `seconds`: tokens/s scale with the accept length (each verify step
        emits accept-length tokens at the same step cost), so the curve is measured at `accept_length`."""
        if not self.accept_schedule:
            return 1.0
        return self.accept_at(seconds) / self.accept_length


def shipped_profiles() -> list[str]:
    folder = resources.files("specserve_tools.emulator") / "profiles"
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))


def load_profile(name_or_path: str) -> Profile:
    """A shipped profile by name, or a profile JSON file by path."""
    if name_or_path in shipped_profiles():
        text = (resources.files("specserve_tools.emulator") / "profiles" / f"{name_or_path}.json").read_text()
        return parse_profile(_json(text, name_or_path), name_or_path)
    path = Path(name_or_path)
    if not path.is_file():
        raise ProfileError(
            f"profile {name_or_path!r} not found: give a file path or one of {', '.join(shipped_profiles())}"
        )
    return parse_profile(_json(_read(path), str(path)), str(path))


def profile_from_bench(spec_path: str, base_path: str, name: str = "measured") -> Profile:
    """A profile made of two `specserve bench` results (speculative first, then baseline)."""
    spec = _bench_curve(_json(_read(Path(spec_path)), spec_path), spec_path)
    base = _bench_curve(_json(_read(Path(base_path)), base_path), base_path)
    return Profile(name=name, model_name=name, speculative=spec, baseline=base)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc


def _bench_curve(doc: Any, where: str) -> Curve:
    levels = doc.get("levels") if isinstance(doc, dict) else None
    if not isinstance(levels, list) or not levels:
        raise ProfileError(f"{where}: not a `specserve bench` result (no 'levels' list)")
    try:
        points = [(float(lv["concurrency"]), float(lv["output_tokens_per_s"])) for lv in levels]
        return Curve.from_points(points, where)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProfileError(f"{where}: bad level entry ({exc})") from exc


def _number(doc: dict[str, Any], key: str, default: float, where: str, minimum: float = 0.0) -> float:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < minimum:
        raise ProfileError(f"{where}: '{key}' must be a number >= {minimum:g}, got {value!r}")
    return float(value)


def _points(raw: Any, where: str) -> list[tuple[float, float]]:
    if not isinstance(raw, list) or not all(
        isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(v, int | float) for v in p) for p in raw
    ):
        raise ProfileError(f"{where}: expected a list of [concurrency, value] pairs")
    return [(float(p[0]), float(p[1])) for p in raw]


def baseline_model(t1: float, s: float, n: float) -> float:
    """Saturating baseline: per-stream rate t1 at batch 1, halved at batch s + 1; total tends to t1 * s."""
    return t1 * n / (1 + (n - 1) / s)


def parse_profile(doc: Any, where: str) -> Profile:
    if not isinstance(doc, dict):
        raise ProfileError(f"{where}: a profile is a JSON object")
    try:
        if "curves" in doc:
            curves = doc["curves"]
            if not isinstance(curves, dict):
                raise ProfileError(f"{where}: 'curves' must map speculative/baseline to point lists")
            spec = Curve.from_points(_points(curves.get("speculative"), f"{where} curves.speculative"), where)
            base = Curve.from_points(_points(curves.get("baseline"), f"{where} curves.baseline"), where)
        elif "baseline_model" in doc and "speedup" in doc:
            model = doc["baseline_model"]
            if not isinstance(model, dict):
                raise ProfileError(f"{where}: 'baseline_model' must be an object")
            t1 = _number(model, "t1", 0, f"{where} baseline_model", 1e-9)
            s = _number(model, "s", 0, f"{where} baseline_model", 1e-9)
            xs = model.get("concurrency")
            if not isinstance(xs, list) or not xs or not all(isinstance(x, int | float) and x > 0 for x in xs):
                raise ProfileError(f"{where}: baseline_model.concurrency must be a list of numbers > 0")
            speedup = Curve.from_points(_points(doc["speedup"], f"{where} speedup"), f"{where} speedup")
            base = Curve.from_points([(x, baseline_model(t1, s, x)) for x in xs], where)
            spec = Curve.from_points(
                [(x, baseline_model(t1, s, x) * interpolate(speedup.xs, speedup.ys, x)) for x in xs], where
            )
        else:
            raise ProfileError(f"{where}: needs 'curves' (speculative/baseline) or 'baseline_model' + 'speedup'")
    except CurveError as exc:
        raise ProfileError(str(exc)) from exc
    cap = _number(doc, "max_running_requests", 256, where, 1)
    return Profile(
        name=str(doc.get("name", Path(where).stem)),
        model_name=str(doc.get("model_name", doc.get("name", "emulated-model"))),
        speculative=spec,
        baseline=base,
        startup_seconds=_number(doc, "startup_seconds", 0, where),
        max_running_requests=int(cap),
        ttft_seconds=_number(doc, "ttft_seconds", 0.05, where),
        accept_length=_number(doc, "accept_length", 2.0, where, 1.0),
        num_steps=int(_number(doc, "num_steps", 3, where, 1)),
        adaptive_off_efficiency=_number(doc, "adaptive_off_efficiency", 0.95, where),
        accept_schedule=_schedule(doc.get("accept_schedule"), where),
        sampled_accept_length=(
            _number(doc, "sampled_accept_length", 1.0, where, 1.0) if "sampled_accept_length" in doc else None
        ),
    )


def _schedule(raw: Any, where: str) -> tuple[tuple[float, float], ...]:
    if raw is None:
        return ()
    points = _points(raw, f"{where} accept_schedule")
    if not points or any(not 0.0 <= h < 24.0 or a < 1.0 for h, a in points):
        raise ProfileError(f"{where}: accept_schedule must be [hour in [0, 24), accept length >= 1] pairs")
    if any(h1 <= h0 for (h0, _), (h1, _) in itertools.pairwise(points)):
        raise ProfileError(f"{where}: accept_schedule hours must increase")
    return tuple(points)

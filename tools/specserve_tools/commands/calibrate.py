"""`specserve calibrate SPEC.json BASE.json`: crossover, hysteresis, curves and adaptive config from two bench
results; with --write, set them in a SpecServe YAML file (the rest of the file is kept).
`specserve calibrate --from-status OBJ.yaml --write SPECSERVE.yaml`: the curves the operator learned
(status.learning of `kubectl get specserve X -o yaml`) written back into the file's spec.switching.curves."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from specserve.api.curves import CurveError, curve_problem
from specserve.api.models import LearningStatus
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.policy.learning import CONFIDENT
from specserve.render.adaptive import sglang_config
from specserve_tools.bench.calibrate import (
    DEFAULT_NOISE,
    Calibration,
    Verdict,
    calibrate,
    curve_points,
    learned_write_back,
    switching_fields,
)
from specserve_tools.bench.results import (
    BenchFileError,
    BenchResult,
    accept_length_of,
    load_result,
    measured_runs,
    mode_of,
)
from specserve_tools.bench.specyaml import (
    SpecFileError,
    read_spec_doc,
    spec_doc_from_text,
    update_spec_text,
    update_switching_text,
)

PROG = "specserve calibrate"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("speculative", metavar="SPEC.json", nargs="?", help="bench result of the speculative server")
    parser.add_argument("baseline", metavar="BASE.json", nargs="?", help="bench result of the baseline server")
    parser.add_argument(
        "--from-status",
        metavar="OBJ.yaml",
        help="instead of bench results: the SpecServe as the cluster holds it (kubectl get specserve X -o yaml); "
        "its learned curves (status.learning) are used where confident",
    )
    parser.add_argument(
        "--min-confidence",
        type=float,
        default=CONFIDENT,
        help="with --from-status: the confidence a learned point needs to replace the calibrated one "
        "(default: the operator's own, %(default)s)",
    )
    parser.add_argument(
        "--more-speculative",
        action="append",
        default=[],
        metavar="SPEC2.json",
        help="another sweep of the speculative server (repeatable): levels in several runs get a CI across runs",
    )
    parser.add_argument(
        "--more-baseline", action="append", default=[], metavar="BASE2.json", help="another sweep of the baseline"
    )
    parser.add_argument(
        "--num-steps", type=int, help="speculative steps below the crossover (default: the YAML's, else 3)"
    )
    parser.add_argument(
        "--tolerance", type=float, default=0.05, help="curves this close (fraction) count as equal for the band"
    )
    parser.add_argument(
        "--noise",
        type=float,
        default=DEFAULT_NOISE,
        help="relative 95%% CI half-width assumed for a level measured once (repeated levels carry their own)",
    )
    parser.add_argument("--write", metavar="SPECSERVE.yaml", help="set the results in this SpecServe file")
    parser.add_argument(
        "--ignore-labels",
        action="store_true",
        help="calibrate although a file's own label or server info says it measured the other mode",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _fail(message: str, code: int = 2) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


def _report(cal: Calibration) -> dict[str, Any]:
    return {
        "verdict": cal.verdict.value,
        "recommendation": {
            Verdict.BASELINE_ONLY: "baseline only",
            Verdict.SPECULATIVE_ONLY: "speculative only",
            Verdict.CROSSOVER: "switch at the crossover",
            Verdict.UNDECIDED: "keep the current settings (none: baseline)",
        }[cal.verdict],
        "confidence": cal.confidence,
        "crossoverRange": list(cal.crossover_range) if cal.crossover_range else None,
        "notes": cal.notes,
        "levels": [
            {
                "concurrency": c.concurrency,
                "speculative": round(c.speculative, 2),
                "baseline": round(c.baseline, 2),
                "noise": round(c.noise, 2),
                "winner": c.winner.name.lower(),
            }
            for c in cal.levels
        ],
        "spec": {
            "switching": {k: v for k, v in switching_fields(cal).items() if v is not None},
            "speculative": {"adaptiveConfig": cal.adaptive_config},
        },
        "sglangAdaptiveConfigFile": sglang_config(cal.adaptive_config) if cal.adaptive_config else None,
    }


def _print_text(cal: Calibration) -> None:
    for note in cal.notes:
        print(note)
    print()
    print(f"verdict: {cal.verdict.value} (confidence: {cal.confidence})")
    crossover = "none" if cal.crossover is None else f"{cal.crossover:g}"
    if cal.crossover_range is not None:
        crossover += f" (between {cal.crossover_range[0]:g} and {cal.crossover_range[1]:g} given the noise)"
    print(f"crossover concurrency: {crossover}")
    if cal.crossover is not None:
        print(f"hysteresis: {cal.hysteresis:g} (+-{cal.hysteresis * 100:.0f}% around the crossover)")
    else:
        print(f"hysteresis: {cal.hysteresis:g} (the default; there is no crossover to put a band around)")
    print(f"initial mode: {cal.initial_mode}")
    if cal.accept_length is not None:
        print(f"accept length the speculative curve was measured at: {cal.accept_length:.3g}")
    print("levels (concurrency: speculative / baseline tok/s, fitted; speculation's margin +- the noise: winner):")
    for c in cal.levels:
        margin = f"{c.margin * 100:+.1f}% +- {c.noise / c.baseline * 100:.1f}%" if c.baseline > 0 else "-"
        print(f"  {c.concurrency:g}: {c.speculative:.1f} / {c.baseline:.1f}  ({margin}: {c.winner.value})")
    if cal.verdict is not Verdict.UNDECIDED:
        written = ", ".join(f"{x:g}" for x, _ in cal.speculative)
        print(f"curves written at concurrency: {written}")
    if cal.adaptive_config is not None:
        print(f"spec.speculative.adaptiveConfig: {json.dumps(cal.adaptive_config)}")
        print(f"SGLang --speculative-adaptive-config file: {json.dumps(sglang_config(cal.adaptive_config))}")


def _check_modes(args: argparse.Namespace, spec_runs: list[BenchResult], base_runs: list[BenchResult]) -> None:
    """Each bench file says which server it measured: one given in the other mode's place would flip the
    verdict (and --write would store it), so it is refused, naming the file and the fix."""
    spec_paths = [args.speculative, *args.more_speculative]
    base_paths = [args.baseline, *args.more_baseline]
    wrong = [
        (path, found, place)
        for runs, paths, place in ((spec_runs, spec_paths, "speculative"), (base_runs, base_paths, "baseline"))
        for res, path in zip(runs, paths, strict=True)
        if (found := mode_of(res)) is not None and found != place
    ]
    if not wrong:
        return
    said = "; ".join(
        f"{path} measured a {found} server but is given as the {place} one" for path, found, place in wrong
    )
    swapped = mode_of(spec_runs[0]) == "baseline" and mode_of(base_runs[0]) == "speculative"
    fix = (
        f"swap them: {PROG} {args.baseline} {args.speculative}"
        if swapped
        else "give the speculative server's result first, then the baseline's"
    )
    raise ValueError(f"{said}: {fix} (--ignore-labels if the files' labels are wrong)")


def _num_steps(args: argparse.Namespace, spec_doc: Any) -> int:
    if args.num_steps is not None:
        if not 1 <= args.num_steps <= 32:
            raise ValueError(f"--num-steps must be in 1..32, got {args.num_steps}")
        return int(args.num_steps)
    if isinstance(spec_doc, dict):
        speculative = (spec_doc.get("spec") or {}).get("speculative") or {}
        steps = speculative.get("numSteps") if isinstance(speculative, dict) else None
        if isinstance(steps, int) and steps >= 1:
            return steps
    return 3


def _current_crossover(spec_doc: Any) -> float | None:
    """spec.switching.crossoverConcurrency of the file being written, if it has one."""
    if not isinstance(spec_doc, dict):
        return None
    switching = (spec_doc.get("spec") or {}).get("switching")
    value = switching.get("crossoverConcurrency") if isinstance(switching, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None


def run(args: argparse.Namespace) -> int:
    if args.from_status is not None:
        if args.speculative is not None or args.baseline is not None:
            return _fail("--from-status takes no bench results: give either SPEC.json BASE.json or --from-status")
        return _from_status(args)
    if args.speculative is None or args.baseline is None:
        return _fail("give the two bench results (SPEC.json BASE.json), or --from-status OBJ.yaml")
    try:
        spec_result = load_result(args.speculative)
        base_result = load_result(args.baseline)
        spec_runs = [spec_result, *(load_result(path) for path in args.more_speculative)]
        base_runs = [base_result, *(load_result(path) for path in args.more_baseline)]
        if not 0 <= args.tolerance < 1:
            raise ValueError(f"--tolerance must be in [0, 1), got {args.tolerance:g}")
        for res, path in ((spec_result, args.speculative), (base_result, args.baseline)):
            # The operator's own test of a curve (spec.switching.curves), so what calibrate accepts it accepts.
            problem = curve_problem(res.curve().points())
            if problem:
                raise ValueError(f"{path}: the measured curve {problem}; sweep more concurrency levels")
        if not 0 <= args.noise < 1:
            raise ValueError(f"--noise must be in [0, 1) (a fraction of a level's tok/s), got {args.noise:g}")
        if not args.ignore_labels:
            _check_modes(args, spec_runs, base_runs)
        spec_doc = read_spec_doc(Path(args.write)) if args.write else None
        cal = calibrate(
            measured_runs(spec_runs, args.noise),
            measured_runs(base_runs, args.noise),
            _num_steps(args, spec_doc),
            args.tolerance,
            current_crossover=_current_crossover(spec_doc),
        )
        cal = replace(cal, accept_length=accept_length_of(spec_runs))
    except (BenchFileError, SpecFileError, CurveError, ValueError) as exc:
        return _fail(str(exc))
    paths = [args.speculative, *args.more_speculative, args.baseline, *args.more_baseline]
    for res, path in zip([*spec_runs, *base_runs], paths, strict=True):
        if not res.complete:
            print(f"{PROG}: warning: {path} is a partial sweep ({res.error or 'incomplete'})", file=sys.stderr)
    if args.json:
        print(json.dumps(_report(cal), indent=2))
    else:
        _print_text(cal)
    if args.write:
        if cal.verdict is Verdict.UNDECIDED:
            print(f"{args.write}: not changed: the data cannot decide, so the current settings stay")
            return 0
        return _write(Path(args.write), cal)
    return 0


def _rewrite(path: Path, edit: Callable[[str], str]) -> int | None:
    """Edit a SpecServe file's text and write it back only if the result is still a valid SpecServe.
    None once written; otherwise the exit status, with the reason printed."""
    try:
        text = edit(path.read_text(encoding="utf-8"))
        parse_object(spec_doc_from_text(text, str(path)))
    except SpecFileError as exc:
        return _fail(str(exc))
    except InvalidSpecServe as exc:
        return _fail(f"{path}: not written, the result would be invalid: {exc}", 1)
    except OSError as exc:
        return _fail(f"{path}: cannot read ({exc.strerror or exc})", 1)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return _fail(f"{path}: cannot write ({exc.strerror or exc})", 1)
    return None


def _write(path: Path, cal: Calibration) -> int:
    notes: list[str] = []

    def edit(text: str) -> str:
        updated, found = update_spec_text(text, cal, str(path))
        notes.extend(found)
        return updated

    failed = _rewrite(path, edit)
    if failed is not None:
        return failed
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote spec.switching{' and spec.speculative.adaptiveConfig' if not notes else ''} to {path}")
    return 0


def _learning_of(path: Path) -> LearningStatus:
    """status.learning of a SpecServe object as kubectl prints it (YAML or JSON)."""
    doc = spec_doc_from_text(path.read_text(encoding="utf-8"), str(path))
    raw = (doc.get("status") or {}).get("learning") if isinstance(doc, dict) else None
    if not isinstance(raw, dict):
        raise ValueError(
            f"{path}: no status.learning: save the object as the cluster holds it (kubectl get specserve NAME -o "
            "yaml) once the operator has evaluated it with measured spec.switching.curves"
        )
    try:
        return LearningStatus.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(f"{path}: status.learning is not what this release writes: {exc.errors()[0]['msg']}") from exc


def _from_status(args: argparse.Namespace) -> int:
    if not 0 < args.min_confidence <= 1:
        return _fail(f"--min-confidence must be in (0, 1], got {args.min_confidence:g}")
    try:
        learned = learned_write_back(_learning_of(Path(args.from_status)), args.min_confidence)
    except OSError as exc:
        return _fail(f"{args.from_status}: cannot read ({exc.strerror or exc})")
    except (SpecFileError, CurveError, ValueError) as exc:
        return _fail(str(exc))
    fields: dict[str, object] = {
        "curves": {"speculative": curve_points(learned.speculative), "baseline": curve_points(learned.baseline)}
    }
    report = {"crossoverConcurrency": learned.crossover, "notes": learned.notes, "spec": {"switching": fields}}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for note in learned.notes:
            print(note)
        print(f"crossover of the learned curves: {'none' if learned.crossover is None else f'{learned.crossover:g}'}")
    if not args.write:
        return 0
    path = Path(args.write)

    def edit(text: str) -> str:
        doc = spec_doc_from_text(text, str(path))
        switching = (doc.get("spec") or {}).get("switching") if isinstance(doc, dict) else None
        if isinstance(switching, dict) and "crossoverConcurrency" in switching:
            # An explicit crossover overrides the curves' (knobs_from_spec): keep them consistent.
            fields["crossoverConcurrency"] = learned.crossover
        return update_switching_text(text, fields, str(path))

    failed = _rewrite(path, edit)
    if failed is not None:
        return failed
    print(f"wrote the learned spec.switching.curves to {path}")
    return 0

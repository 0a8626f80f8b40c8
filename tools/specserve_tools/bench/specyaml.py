"""Writing calibration results into a SpecServe YAML file, keeping the rest of it (comments, order, other
documents) as it was: ruamel.yaml's round-trip mode."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from specserve_tools.bench.calibrate import Calibration, switching_fields


class SpecFileError(ValueError):
    pass


def _yaml() -> YAML:
    y = YAML()  # round-trip
    y.preserve_quotes = True
    y.width = 120
    return y


def update_switching_text(text: str, fields: dict[str, object], where: str) -> str:
    """The YAML text with the SpecServe document's spec.switching fields set (None: removed), the rest kept."""
    y, docs, spec = _load_spec(text, where)
    _set_switching(spec, fields, where)
    return _dump(y, docs)


def update_spec_text(text: str, cal: Calibration, where: str) -> tuple[str, list[str]]:
    """The YAML text with the SpecServe document's switching (and, for the Adaptive strategy, the
    speculative.adaptiveConfig) fields set from `cal`. Returns the new text and notes on what was not written."""
    y, docs, spec = _load_spec(text, where)
    notes: list[str] = []
    _set_switching(spec, switching_fields(cal), where)
    if spec.get("strategy") == "Adaptive" and cal.adaptive_config is not None:
        speculative = spec.setdefault("speculative", {})
        speculative["adaptiveConfig"] = _compact(cal.adaptive_config)
    elif cal.adaptive_config is not None:
        notes.append(
            "spec.speculative.adaptiveConfig not written: it applies to strategy Adaptive only "
            f"(this file's strategy is {spec.get('strategy', 'TrafficSplit')})"
        )
    return _dump(y, docs), notes


def _load_spec(text: str, where: str) -> tuple[YAML, list[Any], Any]:
    """The round-trip loader, every document of the file, and the one SpecServe document's spec mapping."""
    y = _yaml()
    try:
        docs = list(y.load_all(text))
    except YAMLError as exc:
        raise SpecFileError(f"{where}: not valid YAML ({_why(exc)})") from exc
    targets = [d for d in docs if isinstance(d, dict) and d.get("kind") == "SpecServe"]
    if len(targets) != 1:
        raise SpecFileError(f"{where}: expected exactly one document with kind: SpecServe, found {len(targets)}")
    spec = targets[0].get("spec")
    if not isinstance(spec, dict):
        raise SpecFileError(f"{where}: the SpecServe document has no spec mapping")
    return y, docs, spec


def _set_switching(spec: Any, fields: dict[str, object], where: str) -> None:
    switching = spec.setdefault("switching", {})
    if not isinstance(switching, dict):
        raise SpecFileError(f"{where}: spec.switching must be a mapping")
    for key, value in fields.items():
        if value is None:
            switching.pop(key, None)
        else:
            switching[key] = _compact(value)


def _dump(y: YAML, docs: list[Any]) -> str:
    out = io.StringIO()
    y.dump_all(docs, out)
    return out.getvalue()


def _why(exc: YAMLError) -> str:
    """The problem and its line: ruamel refuses a duplicate key (as kubectl does) with the key in ``problem``."""
    if isinstance(exc, MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        fix = "; a mapping holds each key once, remove one" if isinstance(exc, DuplicateKeyError) else ""
        return f"{where}{exc.problem}{fix}"
    return str(exc).splitlines()[0]


def _compact(value: Any) -> Any:
    """Lists of scalars and curve points in flow style ([1, 3], {concurrency: 1, tokensPerSecond: 92.6})."""
    if isinstance(value, dict):
        out = CommentedMap((k, _compact(v)) for k, v in value.items())
        if value and all(not isinstance(v, dict | list) for v in value.values()):
            out.fa.set_flow_style()
        return out
    if isinstance(value, list):
        seq = CommentedSeq(_compact(v) for v in value)
        if all(not isinstance(v, dict | list) for v in value):
            seq.fa.set_flow_style()
        return seq
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def read_spec_doc(path: Path) -> Any:
    """The SpecServe document of a YAML file as plain data (for validation and numSteps)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    return spec_doc_from_text(text, str(path))


def spec_doc_from_text(text: str, where: str) -> Any:
    try:
        docs = list(YAML(typ="safe").load_all(text))
    except YAMLError as exc:
        raise SpecFileError(f"{where}: not valid YAML ({_why(exc)})") from exc
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "SpecServe":
            return d
    raise SpecFileError(f"{where}: no document with kind: SpecServe")

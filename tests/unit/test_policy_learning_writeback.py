"""`specserve calibrate --from-status`: the operator's learned curves written back into a SpecServe file."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from specserve.api.validation import parse_object
from specserve.cli import main
from specserve_tools.bench.specyaml import spec_doc_from_text
from tests.unit.test_policy_learning import CALIBRATED
from tests.unit.test_policy_learning_status import drive

SPEC_YAML = """\
# keep this comment
apiVersion: specserve.io/v1alpha1
kind: SpecServe
metadata:
  name: llama
spec:
  model:
    path: meta-llama/Llama-3.1-8B-Instruct
  speculative:
    draftModelPath: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B
  strategy: Restart
  switching:
    crossoverConcurrency: 30
    evaluationIntervalSeconds: 15
"""


def object_yaml(path: Path) -> Path:
    """The object as `kubectl get specserve llama -o yaml` prints it once the operator learned for an hour."""
    _, saved, _, _ = drive(0.6, 240)
    assert saved is not None
    doc = {
        "apiVersion": "specserve.io/v1alpha1",
        "kind": "SpecServe",
        "metadata": {"name": "llama", "namespace": "llm", "resourceVersion": "7"},
        "spec": {"model": {"path": "m"}},
        "status": {"learning": saved.model_dump(mode="json", by_alias=True, exclude_none=True)},
    }
    with path.open("w") as f:
        YAML(typ="safe").dump(doc, f)
    return path


def test_learned_curves_are_written_back_where_confident(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    obj = object_yaml(tmp_path / "obj.yaml")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC_YAML)
    assert main(["calibrate", "--from-status", str(obj), "--write", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "speculative: learned values at" in out and "baseline: no point reaches confidence" in out
    text = spec.read_text()
    assert "# keep this comment" in text
    written = parse_object(spec_doc_from_text(text, "x")).spec.switching
    assert written.curves is not None
    at4 = next(p.tokens_per_second for p in written.curves.speculative if p.concurrency == 4.0)
    assert at4 == pytest.approx(CALIBRATED.speculative.at(4.0) * 0.6, rel=0.03)  # learned
    at64 = next(p.tokens_per_second for p in written.curves.speculative if p.concurrency == 64.0)
    assert at64 == pytest.approx(CALIBRATED.speculative.at(64.0), rel=0.01)  # never observed: calibrated
    assert [p.tokens_per_second for p in written.curves.baseline] == [
        pytest.approx(CALIBRATED.baseline.at(p.concurrency), abs=0.01) for p in written.curves.baseline
    ]
    # The explicit crossover follows the learned curves (it would otherwise override them).
    assert written.crossover_concurrency is not None and written.crossover_concurrency != 30


def test_from_status_without_learning_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    obj = tmp_path / "obj.yaml"
    obj.write_text("apiVersion: specserve.io/v1alpha1\nkind: SpecServe\nmetadata: {name: x}\nstatus: {}\n")
    assert main(["calibrate", "--from-status", str(obj)]) == 2
    err = capsys.readouterr().err
    assert "no status.learning" in err and "kubectl get specserve" in err
    assert main(["calibrate", "a.json", "--from-status", str(obj)]) == 2
    assert main(["calibrate"]) == 2
    assert "--from-status" in capsys.readouterr().err

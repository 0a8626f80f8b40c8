"""`specserve calibrate` and the operator agree on what a valid curve is: calibrate refuses a bench result the
operator would refuse as spec.switching.curves, with the same reason, and what calibrate writes passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from specserve.api.curves import Curve, curve_problem
from specserve.api.validation import parse_spec
from specserve.cli import main
from specserve_tools.bench.calibrate import calibrate, curve_points
from tests.unit.test_api import with_
from tests.unit.test_calibrate import _bench


def test_calibrate_refuses_a_one_level_sweep_as_the_operator_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _bench(tmp_path / "s.json", [(8, 500)], "speculative")
    base = _bench(tmp_path / "b.json", [(1, 50), (10, 400)], "baseline")
    assert main(["calibrate", spec, base]) == 2
    err = capsys.readouterr().err
    reason = curve_problem([(8.0, 500.0)])
    assert reason is not None and reason in err and "s.json" in err


def test_what_calibrate_writes_is_a_curve_the_operator_accepts() -> None:
    spec = Curve.from_points([(16, 900), (1, 100), (4, 350)])  # calibrate sorts the measured levels
    base = Curve.from_points([(1, 60), (4, 300), (16, 1200)])
    cal = calibrate(spec, base)
    curves = {"speculative": curve_points(cal.speculative), "baseline": curve_points(cal.baseline)}
    parsed = parse_spec(with_({"switching.curves": curves}))
    assert parsed.switching.curves is not None
    assert [p.concurrency for p in parsed.switching.curves.speculative] == [1, 4, 16]

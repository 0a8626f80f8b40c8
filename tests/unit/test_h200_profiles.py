"""The measured H200 profiles ship, load, and are exactly what scripts/gpu/make_profiles.py makes of the raw sweeps."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

from specserve_tools.emulator.profile import load_profile, shipped_profiles

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("h200-llama31-8b-eagle3-dummy", "h200-llama31-8b-standalone-dummy")
NGRAM = "h200-llama31-8b-ngram4-dummy"


def _make_profiles() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_profiles", ROOT / "scripts" / "gpu" / "make_profiles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_h200_profiles_are_the_raw_sweeps() -> None:
    built = _make_profiles().build()
    assert set(built) == {*NAMES, NGRAM}
    for name in (*NAMES, NGRAM):
        assert name in shipped_profiles()
        shipped = json.loads((ROOT / "tools/specserve_tools/emulator/profiles" / f"{name}.json").read_text())
        assert shipped == json.loads(json.dumps(built[name])), f"{name}: rerun scripts/gpu/make_profiles.py"


def test_dummy_weights_set_acceptance_and_speculation_never_pays_here() -> None:
    eagle, standalone = (load_profile(n) for n in NAMES)
    assert (eagle.accept_length, standalone.accept_length) == (1.0, 4.0)
    # Measured: with a draft as costly as the target (STANDALONE) or accepting nothing (EAGLE-3 dummy), the
    # baseline serves more tokens at every level swept.
    for profile in (eagle, standalone):
        assert all(s < b for s, b in zip(profile.speculative.ys, profile.baseline.ys, strict=True))


def test_the_ngram_profile_has_the_real_crossover() -> None:
    """NGRAM-4 on greedy requests wins at low load and loses under load: the crossover the loop steers across."""
    ngram = load_profile(NGRAM)
    assert ngram.speculative.at(1) > 2 * ngram.baseline.at(1)
    assert ngram.speculative.at(64) < 0.7 * ngram.baseline.at(64)

"""The adaptive config the operator renders is read by SGLang's own code and means what calibrate intended.

The file comes from the rendered ConfigMap, at the path the rendered `--speculative-adaptive-config` names.
SGLang's speculative/adaptive_spec_params.py loads it (_load_adaptive_config, resolve_candidate_steps_from_config)
and AdaptiveSpeculativeParams routes each batch size as the engine does: pad up to a decode CUDA-graph capture
size (the list SGLang's generate_decode_cuda_graph_batch_sizes makes for the same command line), then take the
largest key <= it. Expected: drafting on at batch 1 and off (0 steps) at every batch size >= the crossover.
"""

from __future__ import annotations

import copy
import itertools
import math
from functools import cache
from typing import Any

import pytest

from specserve.api.models import Strategy
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.render.adaptive import SPEC_CAPTURE_SIZES, sglang_config_file
from specserve.render.engine import adaptive_steps
from specserve.versions import RELEASES
from specserve_tools.bench.calibrate import Verdict, adaptive_config_for
from tests.conformance.cases import BASE, Case, adaptive_files, all_cases, cases_of
from tests.conformance.conftest import sglang_env

ADAPTIVE_VERSIONS = tuple(v for v, r in RELEASES.items() if r.has_adaptive)
PROBE_BATCH_SIZES = [1, 2, 3, 4, 6, 8, 9, 10, 11, 12, 13, 16, 24, 31, 32, 33, 48, 64, 100, 128, 256, 512]
CAPTURE_MAX_BS = 4096
CROSSOVERS = [1.0, 1.5, 3, 5, 7.2, 12, 33, 100]


def adaptive_cases() -> list[Case]:
    return [c for c in all_cases() if adaptive_files(c)]


def _request(case_id: str, config: str, steps: int, argv: list[str]) -> dict[str, Any]:
    return {
        "id": case_id,
        "config": config,
        "initial_steps": steps,
        "batch_sizes": PROBE_BATCH_SIZES,
        "argv": argv,
        "cuda_graph_max_bs": CAPTURE_MAX_BS,
    }


def _model_argv(case: Case) -> list[str]:
    """The rendered command line without the file flag (capture sizes do not depend on it)."""
    argv = list(case.argv)
    index = argv.index("--speculative-adaptive-config")
    return argv[:index] + argv[index + 2 :]


CALIBRATE_ARGV = ["--model-path", "m", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3"]


@cache
def answers(version: str) -> dict[str, dict[str, Any]]:
    requests = []
    for case in adaptive_cases():
        if case.version == version:
            for path, content in adaptive_files(case).items():
                steps = case.spec.spec.speculative.num_steps
                requests.append(_request(f"{case.id}:{path}", content, steps, _model_argv(case)))
    for crossover in CROSSOVERS:
        config = adaptive_config_for(crossover, Verdict.CROSSOVER, 3)
        assert config is not None
        requests.append(_request(f"calibrate:{crossover}", sglang_config_file(config), 3, CALIBRATE_ARGV))
    requests.append(_request("control:empty-steps", '{"1": {"candidate_steps": []}}', 3, CALIBRATE_ARGV))
    requests.append(_request("control:no-int-key", '{"one": {"candidate_steps": [1]}}', 3, CALIBRATE_ARGV))
    return {item["id"]: item for item in sglang_env(version).probe({"adaptive": requests})["adaptive"]}


def test_adaptive_cases_exist() -> None:
    cases = adaptive_cases()
    assert any(c.spec.spec.speculative.adaptive_config is None for c in cases)
    assert any(c.spec.spec.speculative.adaptive_config is not None for c in cases)
    assert all(c.spec.spec.strategy is Strategy.ADAPTIVE for c in cases)
    assert {c.version for c in cases} <= set(ADAPTIVE_VERSIONS)


@pytest.mark.parametrize("case", adaptive_cases(), ids=lambda c: c.id)
def test_rendered_adaptive_config_loads_and_means_what_the_spec_says(case: Case) -> None:
    spec = case.spec.spec
    steps_wanted = adaptive_steps(spec)
    assert steps_wanted is not None
    for path in adaptive_files(case):
        result = answers(case.version)[f"{case.id}:{path}"]
        assert result["status"] == "loaded", f"SGLang {case.version} cannot load {path} of {case.id}: {result}"
        assert result["keys"] == sorted(int(k) for k in steps_wanted)
        assert result["candidate_steps"] == sorted({s for steps in steps_wanted.values() for s in steps})
        # SGLang's own startup check (_init_adaptive_speculative_params): numSteps must be a candidate.
        assert spec.speculative.num_steps in result["candidate_steps"]
        chosen = {int(bs): steps for bs, steps in result["steps_for_batch"].items()}
        capture = result["cuda_graph_bs"]
        for bs, steps in chosen.items():
            padded = next((size for size in capture if size >= bs), bs)
            key = max((int(k) for k in steps_wanted if int(k) <= padded), default=min(int(k) for k in steps_wanted))
            assert steps in steps_wanted[str(key)], f"{case.id}: batch {bs} ran {steps} steps"
        if spec.speculative.adaptive_config is None and spec.switching.crossover_concurrency is not None:
            crossover = spec.switching.crossover_concurrency
            if crossover > 1:
                assert chosen[1] == spec.speculative.num_steps, f"{case.id}: drafting is off at batch 1"
            off = {bs: s for bs, s in chosen.items() if bs >= crossover and s != 0}
            assert not off, f"{case.id}: drafting still on above the crossover {crossover}: {off}"


@pytest.mark.parametrize("version", ADAPTIVE_VERSIONS)
@pytest.mark.parametrize("crossover", CROSSOVERS)
def test_calibrate_config_turns_drafting_off_above_the_crossover(version: str, crossover: float) -> None:
    result = answers(version)[f"calibrate:{crossover}"]
    assert result["status"] == "loaded", result
    chosen = {int(bs): steps for bs, steps in result["steps_for_batch"].items()}
    off_from = math.ceil(crossover)
    assert all(steps == 0 for bs, steps in chosen.items() if bs >= off_from), chosen
    if crossover > 1:
        assert chosen[1] == 3, chosen


@pytest.mark.parametrize("version", ADAPTIVE_VERSIONS)
def test_calibrate_capture_sizes_are_sglangs(version: str) -> None:
    """The adaptive policy keys the config on SGLang's speculative decode capture sizes; they are SGLang's list."""
    capture = answers(version)["calibrate:1.0"]["cuda_graph_bs"]
    assert tuple(capture) == SPEC_CAPTURE_SIZES[: len(capture)]
    assert capture[-1] == CAPTURE_MAX_BS


@pytest.mark.parametrize("version", ADAPTIVE_VERSIONS)
def test_invalid_configs_are_rejected_by_sglang(version: str) -> None:
    for control in ("control:empty-steps", "control:no-int-key"):
        result = answers(version)[control]
        assert result["status"] == "error", result
        assert "candidate_steps" in result["error"] or "BS key" in result["error"], result["error"]


@pytest.mark.parametrize("version", [v for v, r in RELEASES.items() if not r.has_adaptive])
def test_releases_without_adaptive_have_no_adaptive_module_and_no_adaptive_render(version: str) -> None:
    result = sglang_env(version).probe(
        {"adaptive": [{"id": "x", "config": "{}", "initial_steps": 1, "batch_sizes": [1]}]}
    )["adaptive"][0]
    assert result["status"] == "absent", result
    assert not [c.id for c in adaptive_cases() if c.version == version]


def _step_variants() -> list[tuple[str, dict[str, Any]]]:
    """Adaptive SpecServes whose numSteps is or is not a candidate of the config SGLang will use."""
    out = []
    for steps, config, crossover in itertools.product((2, 3, 4), (None, {"1": [1, 3], "16": [0]}), (None, 12)):
        doc = copy.deepcopy(BASE)
        spec = doc["spec"]
        spec["strategy"] = "Adaptive"
        spec["speculative"].update(algorithm="EAGLE3", draftModelPath="/models/drafters/eagle3", numSteps=steps)
        if config is not None:
            spec["speculative"]["adaptiveConfig"] = config
        if crossover is None:
            spec["switching"].pop("crossoverConcurrency", None)
        else:
            spec["switching"]["crossoverConcurrency"] = crossover
        out.append((f"steps{steps}/config-{config is not None}/crossover-{crossover}", doc))
    return out


@pytest.mark.parametrize("version", ADAPTIVE_VERSIONS)
def test_every_accepted_adaptive_spec_starts(version: str) -> None:
    cases = []
    for name, doc in _step_variants():
        doc["spec"]["engine"]["sglangVersion"] = version
        try:
            obj = parse_object(doc)
        except InvalidSpecServe:
            continue
        cases += cases_of(f"adaptive-steps/{name}", obj)
    assert cases
    results = sglang_env(version).probe({"cli": [c.probe_request() for c in cases]})["cli"]
    refused = {r["id"]: r.get("adaptive_init") for r in results if r.get("adaptive_init") != "ok"}
    assert not refused, "SpecServe accepts Adaptive specs SGLang refuses to start:\n" + "\n".join(
        f"{k}: {v}" for k, v in refused.items()
    )

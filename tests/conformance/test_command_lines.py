"""Every SGLang command line the operator renders is accepted by that release's own parser.

Per case (each example in examples/ and each SpecServe of the matrix in cases.py, in both modes):
- `parse_args` of the parser built by the release's `ServerArgs.add_cli_args` accepts the rendered args;
- every flag is spelled exactly (argparse also takes unambiguous prefixes, which break when a release adds a
  longer flag, as `--cuda-graph-max-bs` did);
- `ServerArgs.from_cli_args` builds the record: in 0.5.23 construction only (its resolution pipeline,
  `resolve_once`, needs the checkpoint's config.json and transformers 5); in 0.5.9 `__post_init__` asks torch for
  an accelerator first, so on the CPU it stops at "No accelerator" (reported as needs_gpu, nothing else is caught);
- with --speculative-adaptive, SGLang's own adaptive gates on that record: adaptive_unsupported_reason is None (else
  SGLang falls back to static speculation with only a warning) and _init_adaptive_speculative_params accepts the
  mounted config file with the rendered --speculative-num-steps;
- the environment variables the renderer sets for SGLang exist in that release's sglang/srt/environ.py.
"""

from __future__ import annotations

import dataclasses
import re
from functools import cache
from typing import Any

import pytest

from specserve.versions import RELEASES, release
from tests.conformance.cases import Case, all_cases, describe, example_cases, matrix
from tests.conformance.conftest import SUPPORTED_VERSIONS, sglang_env

# Releases whose ServerArgs post-init cannot run without a GPU (see module docstring).
FROM_CLI_ARGS_NEEDS_GPU = frozenset({"0.5.9", "0.5.17"})
# Another release's CUDA-graph cap that this release still takes, as a deprecated alias of its own.
DEPRECATED_CAP_ALIASES: dict[str, frozenset[str]] = {"0.5.17": frozenset({"--cuda-graph-max-bs"})}
LAUNCH_COMMAND = ["python3", "-m", "sglang.launch_server"]


@cache
def answers(version: str) -> dict[str, dict[str, Any]]:
    cases = [c.probe_request() for c in all_cases() if c.version == version]
    answer = sglang_env(version).probe({"cli": cases})
    return {item["id"]: item for item in answer["cli"]}


def control_argvs(version: str) -> list[list[str]]:
    """Command lines for the negative controls and the release table, probed in one batch per release."""
    caps = [[r.cuda_graph_max_bs_flag, "8"] for r in RELEASES.values()]
    extras = [
        ["--no-such-flag"],
        ["--attention-backend", "no-such-backend"],
        ["--speculative-adaptive"],
        ["--speculative-adaptive", "--speculative-adaptive-config", "/tmp/a.json"],
        ["--enforce-disable-flashinfer-allreduce-fusion"],
        ["--served-model-nam", "x"],
        *caps,
    ]
    return [["--model-path", "m", *extra] for extra in extras]


@cache
def control_answers(version: str) -> dict[str, dict[str, Any]]:
    cases = [{"id": " ".join(argv), "argv": argv} for argv in control_argvs(version)]
    return {item["id"]: item for item in sglang_env(version).probe({"cli": cases})["cli"]}


def probe_argv(version: str, argv: list[str]) -> dict[str, Any]:
    key = " ".join(argv)
    known = control_answers(version)
    if key in known:
        return known[key]
    result: dict[str, Any] = sglang_env(version).probe({"cli": [{"id": key, "argv": argv}]})["cli"][0]
    return result


def offending_flags(error: str, argv: list[str]) -> list[str]:
    named = [token for token in argv if token.startswith("--") and token in error]
    return named or re.findall(r"--[a-z0-9-]+", error)


def _id(case: Case) -> str:
    return case.id


@pytest.mark.parametrize("case", all_cases(), ids=_id)
def test_rendered_command_line_is_accepted(case: Case) -> None:
    check_command_line(case, answers(case.version)[case.id])


def check_command_line(case: Case, result: dict[str, Any]) -> None:
    if result["parse"] != "accepted":
        flags = offending_flags(result["parse_error"], case.argv)
        pytest.fail(
            f"SGLang {case.version} rejects {flags} rendered for {case.id}: {result['parse_error']}\n{describe(case)}",
            pytrace=False,
        )
    assert result["inexact_flags"] == [], (
        f"{case.id}: {result['inexact_flags']} are not exact SGLang {case.version} flags (only accepted as prefixes)"
    )
    expected = "needs_gpu" if case.version in FROM_CLI_ARGS_NEEDS_GPU else "accepted"
    assert result["from_cli_args"] == expected, (
        f"ServerArgs.from_cli_args of SGLang {case.version} for {case.id}: {result.get('from_cli_error')}\n"
        f"{result.get('traceback', '')}{describe(case)}"
    )
    assert case.command == LAUNCH_COMMAND, case.command
    if "--speculative-adaptive" in case.argv:
        assert result.get("adaptive_checks") == "ran", result
        assert result["adaptive_unsupported_reason"] is None, (
            f"SGLang {case.version} would silently turn adaptive off for {case.id}: "
            f"{result['adaptive_unsupported_reason']}"
        )
        assert result["adaptive_init"] == "ok", f"{case.id}: {result['adaptive_init']}"


@pytest.mark.parametrize("case", all_cases(), ids=_id)
def test_rendered_sglang_env_vars_exist(case: Case) -> None:
    names = [name for name in case.env if name.startswith("SGLANG_")]
    if not names:
        return
    environ = sglang_env(case.version).source("srt/environ.py").read_text()
    missing = [name for name in names if not re.search(rf"\b{name}\b", environ)]
    assert not missing, f"{case.id}: SGLang {case.version} does not read {missing}"


def test_matrix_covers_every_dimension() -> None:
    """The matrix cannot shrink silently: each strategy, algorithm, GPU, config and release renders a case."""
    knobs = [case.id for case in matrix().cases if "/NGRAM-" in case.id]  # NGRAM's draft-token cases
    assert {i.split("/")[2] for i in knobs} == {"NGRAM-4", "NGRAM-12"}
    ids = [case.id.split("/") for case in matrix().cases if case.id not in knobs]
    columns = [set(column) for column in zip(*ids, strict=False)]
    assert columns[0] == set(RELEASES)
    assert columns[1] == {"TrafficSplit", "Restart", "Adaptive"}
    assert columns[2] == {"EAGLE3", "EAGLE", "NEXTN", "STANDALONE", "NGRAM"}
    assert columns[3] == {"sm120", "h100"}
    assert columns[4] == {"no-adaptive-config", "adaptive-config"}
    assert columns[5] == {"no-extra", "extra-cuda-graph-cap"}
    assert {"Speculative", "Baseline"} <= columns[6]
    assert len(example_cases()) >= 3


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_negative_controls_are_rejected(version: str) -> None:
    """The harness can fail: flags that do not exist, or not in this release, are reported rejected."""
    other_cap = {r.cuda_graph_max_bs_flag for r in RELEASES.values()} - {release(version).cuda_graph_max_bs_flag}
    other_cap -= DEPRECATED_CAP_ALIASES.get(version, frozenset())
    controls = [["--no-such-flag"], ["--attention-backend", "no-such-backend"]]
    controls += [[flag, "8"] for flag in other_cap]
    if not release(version).has_adaptive:
        controls.append(["--speculative-adaptive"])
    if not release(version).has_enforce_disable_ar_fusion:
        controls.append(["--enforce-disable-flashinfer-allreduce-fusion"])
    for extra in controls:
        result = probe_argv(version, ["--model-path", "m", *extra])
        assert result["parse"] == "rejected", f"SGLang {version} accepted {extra}"
        assert extra[0] in result["parse_error"], result["parse_error"]
    prefix = probe_argv(version, ["--model-path", "m", "--served-model-nam", "x"])
    assert prefix["parse"] == "accepted", prefix
    assert prefix["inexact_flags"] == ["--served-model-nam"]


@pytest.mark.parametrize("version", [v for v, r in RELEASES.items() if r.has_adaptive])
def test_adaptive_gates_can_fail(version: str) -> None:
    config = '{"1": {"candidate_steps": [3]}, "12": {"candidate_steps": [0]}}'
    base = ["--model-path", "m", "--speculative-algorithm", "EAGLE3", "--speculative-adaptive"]
    path = "/etc/specserve/adaptive/adaptive-config.json"
    cases = [
        {"id": "topk4", "argv": [*base, "--speculative-eagle-topk", "4"]},
        {"id": "ngram", "argv": ["--model-path", "m", "--speculative-algorithm", "NGRAM", "--speculative-adaptive"]},
        {
            "id": "steps",
            "argv": [*base, "--speculative-num-steps", "2", "--speculative-adaptive-config", path],
            "files": {path: config},
        },
    ]
    got = {r["id"]: r for r in sglang_env(version).probe({"cli": cases})["cli"]}
    assert "topk" in (got["topk4"]["adaptive_unsupported_reason"] or "")
    assert "EAGLE" in (got["ngram"]["adaptive_unsupported_reason"] or "")
    assert "is not in the adaptive config candidate_steps" in got["steps"]["adaptive_init"]


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_a_bad_rendered_flag_fails_naming_flag_and_case(version: str) -> None:
    """A renderer bug would fail the suite with the flag and the case in the message."""
    good = next(c for c in all_cases() if c.version == version)
    wrong = next(
        (
            r.cuda_graph_max_bs_flag
            for r in RELEASES.values()
            if r.cuda_graph_max_bs_flag != release(version).cuda_graph_max_bs_flag
            and r.cuda_graph_max_bs_flag not in DEPRECATED_CAP_ALIASES.get(version, frozenset())
        ),
        "--no-such-cuda-graph-flag",
    )
    bad = dataclasses.replace(good, id=f"{good.id}+bug", argv=[*good.argv, wrong, "8"])
    result = sglang_env(version).probe({"cli": [bad.probe_request()]})["cli"][0]
    with pytest.raises(pytest.fail.Exception) as failure:
        check_command_line(bad, result)
    assert wrong in str(failure.value)
    assert bad.id in str(failure.value)


def test_old_cuda_graph_cap_is_a_deprecated_alias_in_0_5_17() -> None:
    result = probe_argv("0.5.17", ["--model-path", "m", "--cuda-graph-max-bs", "8"])
    assert result["parse"] == "accepted"
    assert result["inexact_flags"] == []


def test_removed_cuda_graph_cap_is_ambiguous_in_0_5_23() -> None:
    result = probe_argv("0.5.23", ["--model-path", "m", "--cuda-graph-max-bs", "8"])
    assert result["parse"] == "rejected"
    assert "ambiguous option: --cuda-graph-max-bs" in result["parse_error"]


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_release_table_matches_sglang(version: str) -> None:
    """operator/specserve/versions.py says what each release can do; the release's parser agrees."""
    rel = release(version)

    def parses(*flags: str) -> bool:
        result = probe_argv(version, ["--model-path", "m", *flags])
        return result["parse"] == "accepted" and not result["inexact_flags"]

    assert parses("--speculative-adaptive", "--speculative-adaptive-config", "/tmp/a.json") == rel.has_adaptive
    assert parses("--enforce-disable-flashinfer-allreduce-fusion") == rel.has_enforce_disable_ar_fusion
    assert parses(rel.cuda_graph_max_bs_flag, "8")
    environ = sglang_env(version).source("srt/environ.py").read_text()
    assert ("SGLANG_ENABLE_SPEC_V2" in environ) == (not rel.spec_v2_always_on)

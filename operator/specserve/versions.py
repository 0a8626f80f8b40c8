"""The SGLang releases SpecServe renders for, and what each one can do.

This is the only place that knows how releases differ; rendering and validation ask it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SGLangRelease:
    version: str
    # Spec v2 (the overlap path) is always on from 0.5.2x; older releases need an env var and topk 1.
    spec_v2_always_on: bool
    # `--speculative-adaptive` / `--speculative-adaptive-config` exist.
    has_adaptive: bool
    # `--enforce-disable-flashinfer-allreduce-fusion` exists.
    has_enforce_disable_ar_fusion: bool
    # Name of the flag that caps the decode CUDA-graph batch size.
    cuda_graph_max_bs_flag: str
    # Adaptive speculation sizes its CUDA-graph buffers by the launch --speculative-num-steps, not by the largest
    # candidate step, so a candidate above the launch steps crashes graph capture at start (measured on an H200
    # with 0.5.17: docs/real-engine.md). Such releases need numSteps at the largest candidate.
    adaptive_needs_max_launch_steps: bool = False


RELEASES: dict[str, SGLangRelease] = {
    "0.5.23": SGLangRelease(
        version="0.5.23",
        spec_v2_always_on=True,
        has_adaptive=True,
        has_enforce_disable_ar_fusion=True,
        cuda_graph_max_bs_flag="--cuda-graph-max-bs-decode",
    ),
    "0.5.17": SGLangRelease(
        version="0.5.17",
        spec_v2_always_on=True,
        has_adaptive=True,
        has_enforce_disable_ar_fusion=True,
        cuda_graph_max_bs_flag="--cuda-graph-max-bs-decode",
        adaptive_needs_max_launch_steps=True,
    ),
    "0.5.9": SGLangRelease(
        version="0.5.9",
        spec_v2_always_on=False,
        has_adaptive=False,
        has_enforce_disable_ar_fusion=False,
        cuda_graph_max_bs_flag="--cuda-graph-max-bs",
    ),
}

DEFAULT_VERSION = "0.5.23"
DEFAULT_IMAGE_REPOSITORY = "ghcr.io/specserve/sglang"

# The oldest release that has in-engine adaptive speculation, named in error messages.
ADAPTIVE_MIN_VERSION = min(
    (r.version for r in RELEASES.values() if r.has_adaptive),
    key=lambda v: tuple(int(p) for p in v.split(".")),
)


# Candidate steps of SGLang's built-in adaptive config (DEFAULT_ADAPTIVE_CONFIG in 0.5.23), used when no
# --speculative-adaptive-config file is given. SGLang refuses to start when --speculative-num-steps is not
# one of the config's candidates.
SGLANG_DEFAULT_CANDIDATE_STEPS: tuple[int, ...] = (0, 1, 3, 5, 7)


def release(version: str) -> SGLangRelease:
    return RELEASES[version]


def default_image(version: str) -> str:
    return f"{DEFAULT_IMAGE_REPOSITORY}:{version}-cu130"

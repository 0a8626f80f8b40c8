"""SGLang's in-engine adaptive speculation, configured from a crossover (pure).

SGLang 0.5.23 pads each decode batch to a CUDA-graph capture size and uses the largest batch-size key <= it
(speculative/adaptive_spec_params.py), so drafting goes off at the first capture size >= the crossover.
"""

from __future__ import annotations

import bisect
import json

# SGLang 0.5.23 decode CUDA-graph capture sizes when speculation is on
# (sglang/srt/arg_groups/cuda_graph_hook.py, generate_decode_cuda_graph_batch_sizes).
SPEC_CAPTURE_SIZES: tuple[int, ...] = (
    *range(1, 9),
    *range(10, 33, 2),
    *range(40, 65, 4),
    *range(72, 257, 8),
    *range(272, 4097, 16),
)


def first_capture_size_at_least(value: float, sizes: tuple[int, ...] = SPEC_CAPTURE_SIZES) -> int:
    """The smallest capture size >= value (the largest one when value is beyond them all)."""
    index = bisect.bisect_left(sizes, value)
    return sizes[min(index, len(sizes) - 1)]


def steps_for_crossover(crossover: float, num_steps: int) -> dict[str, list[int]]:
    """Batch-size key -> candidate steps: `num_steps` below the crossover, drafting off (0) from it on."""
    key = first_capture_size_at_least(crossover)
    if key <= 1:
        return {"1": [0]}
    return {"1": [num_steps], str(key): [0]}


def sglang_config(steps: dict[str, list[int]]) -> dict[str, dict[str, list[int]]]:
    """The JSON SGLang reads from the --speculative-adaptive-config file, keys in batch-size order."""
    return {key: {"candidate_steps": list(value)} for key, value in sorted(steps.items(), key=lambda kv: int(kv[0]))}


def sglang_config_file(steps: dict[str, list[int]]) -> str:
    return json.dumps(sglang_config(steps), indent=2) + "\n"

"""The SGLang server command line and environment for one pool (pure).

Which flags exist depends on the SGLang release; that knowledge is in specserve.versions.
"""

from __future__ import annotations

from specserve.api.models import Algorithm, SpecServeSpec
from specserve.api.rules import is_sm120
from specserve.layout import Flavour
from specserve.render.adaptive import steps_for_crossover
from specserve.versions import release

ADAPTIVE_CONFIG_DIR = "/etc/specserve/adaptive"
ADAPTIVE_CONFIG_KEY = "adaptive-config.json"
SM120_DEFAULT_ATTENTION_BACKEND = "flashinfer"
# Algorithms that take the EAGLE-style chain/tree knobs (steps, topk).
_STEPPED = frozenset({Algorithm.EAGLE3, Algorithm.EAGLE, Algorithm.NEXTN, Algorithm.STANDALONE})


def adaptive_steps(spec: SpecServeSpec) -> dict[str, list[int]] | None:
    """Batch-size key -> candidate steps for the Adaptive strategy, or None for SGLang's built-in default.

    Without an explicit config, drafting runs at numSteps below the crossover and is off from it on.
    """
    if spec.speculative.adaptive_config is not None:
        return dict(spec.speculative.adaptive_config)
    crossover = spec.switching.crossover_concurrency
    if crossover is None:
        return None
    return steps_for_crossover(crossover, spec.speculative.num_steps)


def sglang_args(spec: SpecServeSpec, flavour: Flavour, steps: dict[str, list[int]] | None) -> list[str]:
    """Arguments to `python3 -m sglang.launch_server` for one pool; steps: `adaptive_steps(spec)`, computed once
    per render by the caller (the mounted config the adaptive flavour points at)."""
    engine, model, spec_cfg = spec.engine, spec.model, spec.speculative
    rel = release(engine.sglang_version)
    args = ["--model-path", model.path]
    if model.served_name:
        args += ["--served-model-name", model.served_name]
    if model.revision:
        args += ["--revision", model.revision]
    args += ["--host", "0.0.0.0", "--port", str(engine.port)]
    args += ["--tp-size", str(engine.tensor_parallel_size), "--enable-metrics"]
    if engine.mem_fraction_static is not None:
        args += ["--mem-fraction-static", f"{engine.mem_fraction_static:g}"]
    if engine.max_running_requests is not None:
        args += ["--max-running-requests", str(engine.max_running_requests)]
    sm120 = is_sm120(spec)
    backend = engine.attention_backend or (SM120_DEFAULT_ATTENTION_BACKEND if sm120 else None)
    if backend:
        args += ["--attention-backend", backend]
    if sm120 and rel.has_enforce_disable_ar_fusion:
        # FlashInfer all-reduce fusion crashed SM120 at CUDA-graph capture (sglang issue 15650); 0.5.23 only
        # auto-enables it on SM90/SM100, and saying so explicitly keeps a future auto-enable off this GPU.
        args.append("--enforce-disable-flashinfer-allreduce-fusion")
    if flavour.speculative:
        args += ["--speculative-algorithm", spec_cfg.algorithm.value]
        if spec_cfg.draft_model_path:
            args += ["--speculative-draft-model-path", spec_cfg.draft_model_path]
        if spec_cfg.algorithm in _STEPPED:
            args += ["--speculative-num-steps", str(spec_cfg.num_steps)]
            args += ["--speculative-eagle-topk", str(spec_cfg.eagle_topk)]
        draft_tokens = spec_cfg.draft_tokens()
        if draft_tokens is not None:
            args += ["--speculative-num-draft-tokens", str(draft_tokens)]
        if flavour.adaptive:
            args.append("--speculative-adaptive")
            if steps is not None:
                args += ["--speculative-adaptive-config", f"{ADAPTIVE_CONFIG_DIR}/{ADAPTIVE_CONFIG_KEY}"]
    return args + list(engine.extra_args)


def sglang_env(spec: SpecServeSpec, flavour: Flavour) -> list[dict[str, object]]:
    """Container environment for one pool, as Kubernetes EnvVar objects."""
    env: list[dict[str, object]] = []
    rel = release(spec.engine.sglang_version)
    eagle_family = spec.speculative.algorithm in _STEPPED
    if flavour.speculative and eagle_family and not rel.spec_v2_always_on and spec.speculative.eagle_topk == 1:
        # Before 0.5.2x the overlap (spec v2) path is opt-in and needs topk 1; NGRAM has no v2 path.
        env.append({"name": "SGLANG_ENABLE_SPEC_V2", "value": "True"})
    cache = spec.model.cache
    if cache is not None and not any(e.name == "HF_HOME" for e in spec.engine.env):
        # Hub downloads land on the cache volume, not in the non-root user's home inside the container.
        env.append({"name": "HF_HOME", "value": cache.mount_path})
    token = spec.model.hf_token_secret
    if token is not None:
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": token.name, "key": token.key}}})
    env += [{"name": e.name, "value": e.value} for e in spec.engine.env]
    return env

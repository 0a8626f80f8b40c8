"""Cross-field rules of a SpecServe spec, each written twice on purpose: as CEL for the API server
(`x-kubernetes-validations` in the CRD) and as Python for the operator and `specserve render`.

A test evaluates every CEL rule with a CEL interpreter on good and bad samples and checks that it
agrees with its Python twin, so the two cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specserve.api import selector
from specserve.api.curves import (
    MAX_CROSSINGS,
    ZERO_CURVE,
    Curve,
    CurveError,
    crossings,
    serves_nothing,
    shape_problem,
)
from specserve.api.k8s_rules import (
    DNS_1035_LABEL_PATTERN,
    PATH_FORBIDDEN,
    PATH_FORBIDDEN_SUFFIXES,
    request_above_limit,
)
from specserve.versions import ADAPTIVE_MIN_VERSION, RELEASES, SGLANG_DEFAULT_CANDIDATE_STEPS

if TYPE_CHECKING:
    from specserve.api.models import CurvePoint, SpecServeSpec

# Flags the operator renders itself; extraArgs may not set them (nor an argparse abbreviation of them).
OWNED_FLAGS: tuple[str, ...] = (
    "--model-path",
    "--model",
    "--served-model-name",
    "--revision",
    "--host",
    "--port",
    "--tp-size",
    "--tensor-parallel-size",
    "--enable-metrics",
    "--mem-fraction-static",
    "--max-running-requests",
    "--attention-backend",
    "--speculative-algorithm",
    "--speculative-draft-model-path",
    "--speculative-draft-model",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-adaptive",
    "--speculative-adaptive-config",
)
# Environment variables the operator sets itself.
OWNED_ENV: tuple[str, ...] = ("HF_TOKEN", "SGLANG_ENABLE_SPEC_V2")

# Label keys the operator sets on what it renders (selectors, ownership, Prometheus relabelling); user labels may
# not set them, nor anything under the operator's own prefix.
RESERVED_LABELS: tuple[str, ...] = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
)
RESERVED_LABEL_PREFIX = "specserve.io/"

# GPU product label fragments that mean SM120; matched case-sensitively, as CEL does.
SM120_MARKERS: tuple[str, ...] = ("RTX-PRO-6000", "RTX-5090", "RTX-5080")
SM100_ONLY_ATTENTION: tuple[str, ...] = ("trtllm_mha", "trtllm_mla", "cutlass_mla", "fa4")
DRAFT_ALGORITHMS: tuple[str, ...] = ("EAGLE3", "EAGLE", "STANDALONE")
ADAPTIVE_ALGORITHMS: tuple[str, ...] = ("EAGLE3", "EAGLE")
ADAPTIVE_VERSIONS: tuple[str, ...] = tuple(v for v, r in RELEASES.items() if r.has_adaptive)
# Releases whose adaptive CUDA graphs are sized by the launch steps (versions.SGLangRelease).
MAX_LAUNCH_STEPS_VERSIONS: tuple[str, ...] = tuple(
    v for v, r in RELEASES.items() if r.has_adaptive and r.adaptive_needs_max_launch_steps
)


@dataclass(frozen=True)
class FieldError:
    field: str  # dotted path from the object root, e.g. spec.engine.extraArgs
    message: str  # what is wrong and how to fix it

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class Rule:
    field: str
    message: str
    cel: str  # evaluated with `self` bound to .spec
    holds: Callable[[SpecServeSpec], bool]


@dataclass(frozen=True)
class NameRule:
    """A rule on metadata.name (CEL at the CRD's root, where only metadata.name is visible to rules)."""

    message: str
    cel: str  # evaluated with `self` bound to the whole object
    holds: Callable[[str], bool]


# The longest suffix the operator appends to a SpecServe's name for a DNS-label-bound child is "-engine" (7):
# 52 + 7 + ... keeps every derived Service name within 63 characters.
NAME_MAX = 52
NAME_RULES: tuple[NameRule, ...] = (
    NameRule(
        message=f"at most {NAME_MAX} characters, so that the names of the Deployments and Services it owns stay "
        "valid; use a shorter name",
        cel=f"size(self.metadata.name) <= {NAME_MAX}",
        holds=lambda name: len(name) <= NAME_MAX,
    ),
    NameRule(
        message="must start with a lowercase letter (then a-z, 0-9 and '-', ending alphanumeric): the Services "
        "named after it (<name>, <name>-spec, <name>-base) must be RFC 1035 labels; rename it, e.g. 1model -> "
        "model-1",
        cel=f"self.metadata.name.matches('{DNS_1035_LABEL_PATTERN}')",
        holds=lambda name: re.match(DNS_1035_LABEL_PATTERN, name) is not None,
    ),
)


def check_name(name: str) -> list[FieldError]:
    """The metadata.name rules this SpecServe name breaks."""
    return [FieldError("metadata.name", r.message) for r in NAME_RULES if not r.holds(name)]


# `kubectl specserve pause` sets it to "true"; resume removes it. Annotations are out of CEL's reach in a CRD, so the
# operator checks the value: a value it does not know ("yes", "1", "on") would otherwise silently pause nothing.
PAUSED_ANNOTATION = "specserve.io/paused"
PAUSED_VALUES = ("true", "false")


def check_annotations(annotations: Mapping[str, str]) -> list[FieldError]:
    """The annotations of ours whose value the operator does not understand."""
    value = annotations.get(PAUSED_ANNOTATION)
    if value is None or value.strip().lower() in PAUSED_VALUES:
        return []
    return [
        FieldError(
            f'metadata.annotations["{PAUSED_ANNOTATION}"]',
            f'is {value[:64]!r}, which pauses nothing: write "true" (switching paused) or "false" (switching on), '
            "e.g. `kubectl specserve pause NAME` / `kubectl specserve resume NAME`; until then the operator "
            "changes nothing for this SpecServe",
        )
    ]


def _cel_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


def flag_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def owns_flag(arg: str) -> bool:
    """True when `arg` sets an owned flag, directly, with `=value`, or as an argparse abbreviation."""
    name = flag_name(arg)
    return name.startswith("--") and len(name) > 2 and any(o.startswith(name) for o in OWNED_FLAGS)


def is_sm120(spec: SpecServeSpec) -> bool:
    p = spec.placement
    if p.sm120 is not None:
        return p.sm120
    return p.gpu_product is not None and any(m in p.gpu_product for m in SM120_MARKERS)


_CEL_SM120 = (
    "(has(self.placement.sm120) ? self.placement.sm120 : (has(self.placement.gpuProduct) && "
    f"{_cel_list(SM120_MARKERS)}.exists(m, self.placement.gpuProduct.contains(m))))"
)


def reserved_label(key: str) -> bool:
    return key in RESERVED_LABELS or key.startswith(RESERVED_LABEL_PREFIX)


def _points(curve: list[CurvePoint]) -> list[tuple[float, float]]:
    return [(p.concurrency, p.tokens_per_second) for p in curve]


def _cel_curve(mode: str) -> str:
    """CEL for curve_problem's shape on one list: not a single point, concurrency sorted (isSorted is in
    Kubernetes' CEL list library) and unique, which together is strictly increasing."""
    c = f"self.switching.curves.{mode}"
    return (
        f"!has(self.switching.curves) || (size({c}) != 1 && {c}.map(p, p.concurrency).isSorted() && "
        f"{c}.all(p, {c}.exists_one(q, q.concurrency == p.concurrency)))"
    )


def _curve_ok(spec: SpecServeSpec, mode: str) -> bool:
    curves = spec.switching.curves
    return curves is None or shape_problem(_points(getattr(curves, mode))) is None


def _cel_curve_serves(mode: str) -> str:
    c = f"self.switching.curves.{mode}"
    return f"!has(self.switching.curves) || size({c}) == 0 || {c}.exists(p, p.tokensPerSecond > 0)"


def _curve_serves(spec: SpecServeSpec, mode: str) -> bool:
    curves = spec.switching.curves
    return curves is None or not serves_nothing(_points(getattr(curves, mode)))


def _both_or_neither(spec: SpecServeSpec) -> bool:
    curves = spec.switching.curves
    return curves is None or (not curves.speculative) == (not curves.baseline)


_CURVE_MESSAGE = (
    "must be empty or hold at least two points with strictly increasing concurrency (as `specserve calibrate` "
    "writes it); re-run calibrate or fix the points"
)

RULES: tuple[Rule, ...] = (
    Rule(
        field="spec.placement.gpusPerPod",
        message="must be a multiple of spec.engine.tensorParallelSize (a pod runs whole tensor-parallel "
        "groups); set gpusPerPod to tensorParallelSize or a multiple of it",
        cel="self.placement.gpusPerPod % self.engine.tensorParallelSize == 0",
        holds=lambda s: s.placement.gpus_per_pod % s.engine.tensor_parallel_size == 0,
    ),
    Rule(
        field="spec.speculative.draftModelPath",
        message="is required for the EAGLE3, EAGLE and STANDALONE algorithms; set it to the draft model "
        "(e.g. an EAGLE-3 head) or choose NEXTN or NGRAM",
        cel=f"!(self.speculative.algorithm in {_cel_list(DRAFT_ALGORITHMS)}) || has(self.speculative.draftModelPath)",
        holds=lambda s: s.speculative.algorithm not in DRAFT_ALGORITHMS or s.speculative.draft_model_path is not None,
    ),
    Rule(
        field="spec.speculative.numDraftTokens",
        message="with eagleTopk 1 SGLang forces draft tokens to numSteps + 1; remove numDraftTokens or "
        "set it to numSteps + 1",
        # NGRAM has no draft steps (SGLang runs it with steps 0 and its own tree width): any count is its own.
        cel="self.speculative.eagleTopk != 1 || self.speculative.algorithm == 'NGRAM' || "
        "!has(self.speculative.numDraftTokens) || self.speculative.numDraftTokens == self.speculative.numSteps + 1",
        holds=lambda s: (
            s.speculative.eagle_topk != 1
            or s.speculative.algorithm == "NGRAM"
            or s.speculative.num_draft_tokens is None
            or s.speculative.num_draft_tokens == s.speculative.num_steps + 1
        ),
    ),
    Rule(
        field="spec.speculative.eagleTopk",
        message="the Adaptive strategy needs eagleTopk 1 (SGLang's adaptive speculation is chain-only); "
        "set eagleTopk to 1 or choose TrafficSplit or Restart",
        cel="self.strategy != 'Adaptive' || self.speculative.eagleTopk == 1",
        holds=lambda s: s.strategy != "Adaptive" or s.speculative.eagle_topk == 1,
    ),
    Rule(
        field="spec.speculative.algorithm",
        message="the Adaptive strategy supports EAGLE3 and EAGLE only; change the algorithm or the strategy",
        cel=f"self.strategy != 'Adaptive' || self.speculative.algorithm in {_cel_list(ADAPTIVE_ALGORITHMS)}",
        holds=lambda s: s.strategy != "Adaptive" or s.speculative.algorithm in ADAPTIVE_ALGORITHMS,
    ),
    Rule(
        field="spec.engine.sglangVersion",
        message=f"the Adaptive strategy needs SGLang {ADAPTIVE_MIN_VERSION} or newer "
        "(--speculative-adaptive); raise sglangVersion or choose TrafficSplit or Restart",
        cel=f"self.strategy != 'Adaptive' || self.engine.sglangVersion in {_cel_list(ADAPTIVE_VERSIONS)}",
        holds=lambda s: s.strategy != "Adaptive" or s.engine.sglang_version in ADAPTIVE_VERSIONS,
    ),
    Rule(
        field="spec.speculative.adaptiveConfig",
        message="is only used by the Adaptive strategy; remove it or set strategy: Adaptive",
        cel="self.strategy == 'Adaptive' || !has(self.speculative.adaptiveConfig)",
        holds=lambda s: s.strategy == "Adaptive" or s.speculative.adaptive_config is None,
    ),
    Rule(
        field="spec.speculative.numSteps",
        message="must be one of the candidate steps in spec.speculative.adaptiveConfig (SGLang refuses to start "
        "otherwise); add numSteps to a key's list or change numSteps",
        cel="self.strategy != 'Adaptive' || !has(self.speculative.adaptiveConfig) || "
        "self.speculative.adaptiveConfig.exists(k, self.speculative.numSteps in self.speculative.adaptiveConfig[k])",
        holds=lambda s: (
            s.strategy != "Adaptive"
            or s.speculative.adaptive_config is None
            or any(s.speculative.num_steps in steps for steps in s.speculative.adaptive_config.values())
        ),
    ),
    Rule(
        field="spec.speculative.numSteps",
        message="with neither adaptiveConfig nor switching.crossoverConcurrency set, SGLang uses its built-in "
        f"adaptive config, whose candidate steps are {list(SGLANG_DEFAULT_CANDIDATE_STEPS[1:])}; use one of "
        "them, or set switching.crossoverConcurrency or adaptiveConfig",
        cel="self.strategy != 'Adaptive' || has(self.speculative.adaptiveConfig) || "
        f"has(self.switching.crossoverConcurrency) || self.speculative.numSteps in "
        f"[{', '.join(str(n) for n in SGLANG_DEFAULT_CANDIDATE_STEPS)}]",
        holds=lambda s: (
            s.strategy != "Adaptive"
            or s.speculative.adaptive_config is not None
            or s.switching.crossover_concurrency is not None
            or s.speculative.num_steps in SGLANG_DEFAULT_CANDIDATE_STEPS
        ),
    ),
    Rule(
        field="spec.speculative.numSteps",
        message=f"SGLang {', '.join(MAX_LAUNCH_STEPS_VERSIONS)} sizes adaptive speculation's CUDA graphs by the "
        "launch steps and crashes at start when a candidate step is larger (docs/real-engine.md); set numSteps "
        "to the largest candidate step of spec.speculative.adaptiveConfig (of SGLang's built-in config: "
        f"{max(SGLANG_DEFAULT_CANDIDATE_STEPS)}), or set switching.crossoverConcurrency, or raise sglangVersion",
        cel=f"self.strategy != 'Adaptive' || !(self.engine.sglangVersion in {_cel_list(MAX_LAUNCH_STEPS_VERSIONS)}) "
        "|| (has(self.speculative.adaptiveConfig) ? self.speculative.adaptiveConfig.all(k, "
        "self.speculative.adaptiveConfig[k].all(n, n <= self.speculative.numSteps)) : "
        "(has(self.switching.crossoverConcurrency) || "
        f"self.speculative.numSteps >= {max(SGLANG_DEFAULT_CANDIDATE_STEPS)}))",
        holds=lambda s: (
            s.strategy != "Adaptive"
            or s.engine.sglang_version not in MAX_LAUNCH_STEPS_VERSIONS
            or (
                all(n <= s.speculative.num_steps for steps in s.speculative.adaptive_config.values() for n in steps)
                if s.speculative.adaptive_config is not None
                else s.switching.crossover_concurrency is not None
                or s.speculative.num_steps >= max(SGLANG_DEFAULT_CANDIDATE_STEPS)
            )
        ),
    ),
    Rule(
        field="spec.routing.gateway",
        message="is required by the TrafficSplit strategy (its HTTPRoute moves weights between the pools); "
        "name the Gateway to attach to",
        cel="self.strategy != 'TrafficSplit' || has(self.routing.gateway)",
        holds=lambda s: s.strategy != "TrafficSplit" or s.routing.gateway is not None,
    ),
    Rule(
        field="spec.model.cache",
        message="needs exactly one of pvcName and hostPath",
        cel="!has(self.model.cache) || (has(self.model.cache.pvcName) != has(self.model.cache.hostPath))",
        holds=lambda s: (
            s.model.cache is None or ((s.model.cache.pvc_name is None) != (s.model.cache.host_path is None))
        ),
    ),
    Rule(
        field="spec.engine.extraArgs",
        message="may not set flags the operator owns (" + ", ".join(OWNED_FLAGS) + "); use the matching "
        "spec field instead",
        cel="self.engine.extraArgs.all(a, !(a.startsWith('--') && size(a) > 2 && "
        f"{_cel_list(OWNED_FLAGS)}.exists(o, o.startsWith(a) || a.startsWith(o + '='))))",
        holds=lambda s: not any(owns_flag(a) for a in s.engine.extra_args),
    ),
    Rule(
        field="spec.engine.env",
        message="may not set " + ", ".join(OWNED_ENV) + " (the operator sets them; use model.hfTokenSecret "
        "for the token)",
        cel=f"self.engine.env.all(e, !(e.name in {_cel_list(OWNED_ENV)}))",
        holds=lambda s: not any(e.name in OWNED_ENV for e in s.engine.env),
    ),
    Rule(
        field="spec.engine.attentionBackend",
        message="is built for SM100 only and cannot run on SM120 (RTX PRO 6000 / RTX 5090); use flashinfer "
        "or triton, or leave it unset",
        cel=f"!has(self.engine.attentionBackend) || !(self.engine.attentionBackend in "
        f"{_cel_list(SM100_ONLY_ATTENTION)}) || !{_CEL_SM120}",
        holds=lambda s: s.engine.attention_backend not in SM100_ONLY_ATTENTION or not is_sm120(s),
    ),
    # ------------------------------------------------------------ what the API server refuses in the children
    Rule(
        field="spec.engine.env",
        message="names each variable once (Kubernetes keeps only the last of duplicates); remove the repeats",
        cel="self.engine.env.all(e, self.engine.env.exists_one(f, f.name == e.name))",
        holds=lambda s: len({e.name for e in s.engine.env}) == len(s.engine.env),
    ),
    Rule(
        field="spec.placement.tolerations",
        message="a toleration with operator Exists takes no value; remove value or use operator Equal",
        cel="self.placement.tolerations.all(t, t.operator != 'Exists' || !has(t.value) || t.value == '')",
        holds=lambda s: all(t.operator != "Exists" or not t.value for t in s.placement.tolerations),
    ),
    Rule(
        field="spec.placement.tolerations",
        message="a toleration without a key must use operator Exists (it then tolerates every taint); add the "
        "taint's key or set operator: Exists",
        cel="self.placement.tolerations.all(t, t.operator == 'Exists' || (has(t.key) && t.key != ''))",
        holds=lambda s: all(t.operator == "Exists" or t.key for t in s.placement.tolerations),
    ),
    Rule(
        field="spec.placement.tolerations",
        message="tolerationSeconds only applies to effect NoExecute; set effect: NoExecute or remove tolerationSeconds",
        cel="self.placement.tolerations.all(t, !has(t.tolerationSeconds) || "
        "(has(t.effect) && t.effect == 'NoExecute'))",
        holds=lambda s: all(t.toleration_seconds is None or t.effect == "NoExecute" for t in s.placement.tolerations),
    ),
    Rule(
        field="spec.monitoring.labels",
        message="may not set the operator's own labels (" + ", ".join(RESERVED_LABELS) + f", {RESERVED_LABEL_PREFIX}*"
        "): selectors and ownership depend on them; use another key",
        # Map keys have no maxLength for the cost estimator: a map literal makes membership O(1), and
        # startsWith costs the prefix's length, not the key's.
        cel="self.monitoring.labels.all(k, !(k in {" + ", ".join(f"'{k}': true" for k in RESERVED_LABELS) + "}) && "
        f"!k.startsWith('{RESERVED_LABEL_PREFIX}'))",
        holds=lambda s: not any(reserved_label(k) for k in s.monitoring.labels),
    ),
    Rule(
        field="spec.routing.pathPrefix",
        message="may not contain "
        + ", ".join(repr(b) for b in PATH_FORBIDDEN)
        + " nor end with "
        + " or ".join(repr(b) for b in PATH_FORBIDDEN_SUFFIXES)
        + " (the Gateway API refuses such paths); write a plain path such as /v1",
        cel=f"!{_cel_list(PATH_FORBIDDEN)}.exists(b, self.routing.pathPrefix.contains(b)) && "
        f"!{_cel_list(PATH_FORBIDDEN_SUFFIXES)}.exists(b, self.routing.pathPrefix.endsWith(b))",
        holds=lambda s: (
            not any(b in s.routing.path_prefix for b in PATH_FORBIDDEN)
            and not s.routing.path_prefix.endswith(PATH_FORBIDDEN_SUFFIXES)
        ),
    ),
    Rule(
        field="spec.model.cache.hostPath",
        message="must be a normalised absolute path (no '.', '..' or '//' segments): the installation's "
        "allowed prefixes are compared segment by segment",
        cel="!has(self.model.cache) || !has(self.model.cache.hostPath) || "
        "(!['//', '/./', '/../'].exists(b, self.model.cache.hostPath.contains(b)) && "
        "!['/.', '/..'].exists(b, self.model.cache.hostPath.endsWith(b)))",
        holds=lambda s: (
            s.model.cache is None
            or s.model.cache.host_path is None
            or (
                not any(b in s.model.cache.host_path for b in ("//", "/./", "/../"))
                and not s.model.cache.host_path.endswith(("/.", "/.."))
            )
        ),
    ),
    Rule(
        field="spec.switching.curves.speculative",
        message=_CURVE_MESSAGE,
        cel=_cel_curve("speculative"),
        holds=lambda s: _curve_ok(s, "speculative"),
    ),
    Rule(
        field="spec.switching.curves.baseline",
        message=_CURVE_MESSAGE,
        cel=_cel_curve("baseline"),
        holds=lambda s: _curve_ok(s, "baseline"),
    ),
    Rule(
        field="spec.switching.curves.speculative",
        message=ZERO_CURVE,
        cel=_cel_curve_serves("speculative"),
        holds=lambda s: _curve_serves(s, "speculative"),
    ),
    Rule(
        field="spec.switching.curves.baseline",
        message=ZERO_CURVE,
        cel=_cel_curve_serves("baseline"),
        holds=lambda s: _curve_serves(s, "baseline"),
    ),
    Rule(
        field=selector.FIELD,
        message=selector.SCOPE,
        cel="!has(self.switching.metrics.seriesSelector) || "
        f"self.switching.metrics.seriesSelector.matches('{selector.NAMESPACE_SCOPE}')",
        holds=lambda s: (
            s.switching.metrics.series_selector is None or selector.scoped(s.switching.metrics.series_selector)
        ),
    ),
    Rule(
        field="spec.switching.curves",
        message="needs points for both modes (speculative and baseline): the policy compares the two, and a curve "
        "for one mode only would be ignored; add the other mode's points (`specserve calibrate` writes both) or "
        "remove curves",
        cel="!has(self.switching.curves) || "
        "(size(self.switching.curves.speculative) == 0) == (size(self.switching.curves.baseline) == 0)",
        holds=_both_or_neither,
    ),
)

# Resource names whose requests and limits the user sets (GPUs are rendered equal on both sides).
_RESOURCES = (("cpu", "cpu"), ("memory", "memory"), ("ephemeral_storage", "ephemeral-storage"))


def crossing_problem(spec: SpecServeSpec) -> FieldError | None:
    """Curves that cross more than MAX_CROSSINGS times (interpolation has no CEL twin: the operator checks it)."""
    curves = spec.switching.curves
    if curves is None or not curves.speculative or not curves.baseline:
        return None
    try:
        found = crossings(Curve.from_points(_points(curves.speculative)), Curve.from_points(_points(curves.baseline)))
    except CurveError:
        return None  # the shape rules report it
    if len(found) <= MAX_CROSSINGS:
        return None
    return FieldError(
        "spec.switching.curves",
        f"the speculative and baseline curves cross {len(found)} times (at most {MAX_CROSSINGS}): that is noise, "
        "not a measurement, and each crossing would flip the decision; re-run `specserve bench` with more "
        "requests per level and `specserve calibrate` (it smooths the curves), or remove the noisy points",
    )


def python_only(spec: SpecServeSpec) -> list[FieldError]:
    """Rules without a CEL twin. Requests vs limits needs Kubernetes' quantity() CEL library, which the CEL
    interpreter the tests check twins with does not have; the API server refuses the Deployment instead.
    The curves' crossings need interpolation."""
    errors = []
    if (crossed := crossing_problem(spec)) is not None:
        errors.append(crossed)
    requests, limits = spec.engine.resources.requests, spec.engine.resources.limits
    for attr, name in _RESOURCES:
        request, limit = getattr(requests, attr), getattr(limits, attr)
        if request is not None and limit is not None and request_above_limit(request, limit):
            errors.append(
                FieldError(
                    f"spec.engine.resources.requests.{name}",
                    f"{request} is above the limit {limit}; a request may not exceed its limit (lower the request "
                    "or raise the limit)",
                )
            )
    return errors


def check(spec: SpecServeSpec) -> list[FieldError]:
    """The cross-field rules this spec breaks (empty when it is valid)."""
    return [FieldError(r.field, r.message) for r in RULES if not r.holds(spec)] + python_only(spec)

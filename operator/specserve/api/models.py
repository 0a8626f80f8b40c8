"""The SpecServe API (specserve.io/v1alpha1): pydantic models, the one source of truth.

The CRD's openAPIV3Schema is generated from these models (see `crd.py`), and the operator and the
`specserve render` command parse objects with them, so Kubernetes and the operator agree on what is valid.
Field names are camelCase on the wire (aliases) and snake_case in Python.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from specserve.api import k8s_rules, selector
from specserve.api.curves import CONCURRENCY_MAX, TOKENS_PER_SECOND_MAX, TPOT_SLO_MIN
from specserve.versions import DEFAULT_VERSION, RELEASES

GROUP = "specserve.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "SpecServe"
PLURAL = "specserves"
SINGULAR = "specserve"
SHORT_NAMES = ["ss", "specsrv"]
CATEGORIES = ["specserve", "ml"]

# Kubernetes resource.Quantity, as resource.ParseQuantity reads it.
QUANTITY_PATTERN = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$"
# RFC 1123 label (names of Kubernetes objects we point at).
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"

# An http(s) URL without user:password@ (credentials), query, fragment or whitespace.
PROMETHEUS_URL_PATTERN = r"^https?://[^/?#@\s]+(/[^?#\s]*)?$"
# No control characters (newlines, escapes, NUL): these strings become engine flags, log lines and status text.
PRINTABLE_PATTERN = r"^[^\x00-\x1f\x7f]*$"

Quantity = Annotated[str, Field(pattern=QUANTITY_PATTERN, max_length=64)]
ObjectName = Annotated[str, Field(pattern=DNS_SUBDOMAIN_PATTERN, min_length=1, max_length=253)]

SGLangVersion = Literal[tuple(RELEASES)]  # type: ignore[valid-type]


def _label_key(key: str) -> str:
    problem = k8s_rules.label_key_problem(key)
    if problem:
        raise ValueError(problem)
    return key


def _hostname(value: str) -> str:
    problem = k8s_rules.hostname_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _series_selector(value: str) -> str:
    problem = selector.syntax_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _path(value: str) -> str:
    # Characters only: the Gateway API's forbidden substrings are a rule (rules.py) with a CEL twin.
    if not re.match(k8s_rules.PATH_PATTERN, value):
        raise ValueError(k8s_rules.path_problem(value))
    return value


# Map keys have no schema of their own in a CRD (and CEL over unbounded keys breaks the cost budget), so label
# keys are checked here, in Python; values carry a schema pattern the API server checks as well.
LabelKey = Annotated[
    str,
    # The pattern reaches the schema where a key is a value (toleration keys); Python says what is wrong.
    Field(min_length=1, max_length=k8s_rules.LABEL_KEY_MAX, json_schema_extra={"pattern": k8s_rules.LABEL_KEY_PATTERN}),
    AfterValidator(_label_key),
]
LabelValue = Annotated[str, Field(pattern=k8s_rules.LABEL_VALUE_PATTERN, max_length=k8s_rules.LABEL_VALUE_MAX)]
Labels = Annotated[dict[LabelKey, LabelValue], Field(max_length=64)]


class Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class Strategy(StrEnum):
    """How SpecServe reacts when load crosses the crossover."""

    TRAFFIC_SPLIT = "TrafficSplit"  # two permanent pools; the HTTPRoute weights move
    RESTART = "Restart"  # one pool; pods restart with or without speculation
    ADAPTIVE = "Adaptive"  # one pool running SGLang's in-engine adaptive speculation


class Mode(StrEnum):
    SPECULATIVE = "Speculative"
    BASELINE = "Baseline"


class Rule(StrEnum):
    """Which switching rule made a decision (status.history[].rule, the `rule` label of
    specserve_decisions_total): a fixed set, never derived from the reason's wording."""

    HOLD = "Hold"
    FAILOVER = "Failover"  # TrafficSplit: all weight off a pool without a Ready replica
    SPLIT = "Split"  # TrafficSplit's open loop: the split the curves give for the demand
    CLOSED_LOOP = "ClosedLoop"  # TrafficSplit's closed loop: a forecast move from where the requests are
    SKI_RENTAL = "SkiRental"  # Restart: the regret paid for staying exceeds the restart's cost
    DOMINANT = "Dominant"  # Restart: the other mode serves more at every measured concurrency
    RECONFIGURE = "Reconfigure"  # Adaptive: the crossover moved, the config is re-rendered
    ROLLBACK = "Rollback"  # the loop undoing its own change whose roll failed


class Action(StrEnum):
    """What one switching evaluation decided (status.history[].action, the Normal/Warning event's reason)."""

    HOLD = "Hold"  # nothing changes
    SET_WEIGHTS = "SetWeights"  # TrafficSplit: new HTTPRoute weights
    RESTART = "Restart"  # Restart: roll the pool into the other mode
    RECONFIGURE = "Reconfigure"  # Adaptive: re-render the adaptive config (rolls the pool)
    ROLLBACK = "Rollback"  # undo the policy's own Restart/Reconfigure whose roll ran past its deadline


class PendingKind(StrEnum):
    # What the switching policy waits on (status.switching.pending.kind).
    WAITING = "Waiting"  # TrafficSplit: a wish waiting out its stabilization window
    MOVING = "Moving"  # TrafficSplit: a move under way, stepping on towards its target each evaluation
    ADVISED = "Advised"  # advisory: this recommendation was recorded once; it is not recorded again


class MetricsSourceKind(StrEnum):
    # Where the switching loop reads load from (spec.switching.metrics.source).
    PROMETHEUS = "Prometheus"
    DIRECT = "Direct"  # the operator scrapes the pods' /metrics itself


class Algorithm(StrEnum):
    EAGLE3 = "EAGLE3"
    EAGLE = "EAGLE"
    NEXTN = "NEXTN"
    STANDALONE = "STANDALONE"
    NGRAM = "NGRAM"


# ----------------------------------------------------------------------------------------------------- model


class ModelCache(Model):
    """Where model weights live on the node; exactly one of pvcName and hostPath."""

    pvc_name: ObjectName | None = Field(default=None, description="A PersistentVolumeClaim holding the weights.")
    host_path: str | None = Field(
        default=None,
        pattern=r"^/",
        max_length=4096,
        description="A directory on the node holding the weights; only under a prefix the operator's installation "
        "allows (chart value modelCache.hostPathPrefixes).",
    )
    mount_path: str = Field(default="/models", pattern=r"^/", description="Where the cache is mounted in pods.")
    read_only: bool | None = Field(
        default=None,
        description="Mount the cache read-only; unset means read-only for hostPath, read-write for pvcName. A "
        "writable hostPath needs the installation's consent (modelCache.hostPathWritable).",
    )

    def mount_read_only(self) -> bool:
        """What the pods get: host paths are read-only unless asked otherwise (the install policy vets that)."""
        if self.read_only is not None:
            return self.read_only
        return self.host_path is not None


class SecretKeyRef(Model):
    name: ObjectName = Field(description="Secret name in the SpecServe's namespace.")
    key: str = Field(default="token", min_length=1, description="Key in the Secret.")


class ModelSpec(Model):
    path: str = Field(
        min_length=1,
        max_length=4096,
        pattern=PRINTABLE_PATTERN,
        description="Model path in the cache or Hugging Face hub id.",
    )
    served_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        pattern=PRINTABLE_PATTERN,
        description="Name clients ask for (--served-model-name).",
    )
    revision: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        pattern=PRINTABLE_PATTERN,
        description="Hub revision (branch, tag or commit).",
    )
    cache: ModelCache | None = Field(default=None, description="Volume that holds model weights.")
    hf_token_secret: SecretKeyRef | None = Field(
        default=None, description="Secret with a Hugging Face token, exposed as HF_TOKEN."
    )


# ----------------------------------------------------------------------------------------------- speculative

AdaptiveConfig = Annotated[
    dict[
        Annotated[str, Field(pattern=r"^[0-9]+$", max_length=6)],
        Annotated[list[Annotated[int, Field(ge=0, le=32)]], Field(min_length=1, max_length=16)],
    ],
    Field(max_length=32),
]


class SpeculativeSpec(Model):
    algorithm: Algorithm = Field(default=Algorithm.EAGLE3, description="--speculative-algorithm.")
    draft_model_path: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        pattern=PRINTABLE_PATTERN,
        description="--speculative-draft-model-path; required for EAGLE3, EAGLE and STANDALONE.",
    )
    num_steps: int = Field(default=3, ge=1, le=32, description="--speculative-num-steps.")
    eagle_topk: int = Field(default=1, ge=1, le=16, description="--speculative-eagle-topk.")
    num_draft_tokens: int | None = Field(
        default=None,
        ge=2,
        le=256,
        description="--speculative-num-draft-tokens; with eagleTopk 1 it must be numSteps + 1 (the default).",
    )
    adaptive_config: AdaptiveConfig | None = Field(
        default=None,
        description=(
            "Adaptive strategy only: batch-size key -> candidate steps (0 = drafting off), rendered as the "
            "JSON file --speculative-adaptive-config reads. `specserve calibrate` computes it; unset derives "
            "it from the crossover."
        ),
    )

    def draft_tokens(self) -> int | None:
        """The draft-token count to render; None leaves SGLang's automatic choice."""
        if self.num_draft_tokens is not None:
            return self.num_draft_tokens
        if self.eagle_topk == 1 and self.algorithm != Algorithm.NGRAM:
            return self.num_steps + 1
        return None


# ---------------------------------------------------------------------------------------------------- engine


class EnvVar(Model):
    name: str = Field(pattern=k8s_rules.ENV_NAME_PATTERN, min_length=1, max_length=256)
    value: str = Field(default="", max_length=32768)


class ResourceList(Model):
    cpu: Quantity | None = None
    memory: Quantity | None = None
    ephemeral_storage: Quantity | None = Field(default=None, alias="ephemeral-storage")


class Resources(Model):
    requests: ResourceList = Field(default_factory=ResourceList)
    limits: ResourceList = Field(default_factory=ResourceList)


AttentionBackend = Literal[
    "flashinfer", "triton", "fa3", "fa4", "flashmla", "cutlass_mla", "trtllm_mha", "trtllm_mla", "torch_native"
]


class EngineSpec(Model):
    image: str | None = Field(
        default=None,
        min_length=1,
        description="SGLang image; defaults to SpecServe's CUDA 13 image for sglangVersion.",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    sglang_version: SGLangVersion = Field(  # type: ignore[valid-type]
        default=DEFAULT_VERSION, description="SGLang release in the image; decides the flags rendered."
    )
    tensor_parallel_size: int = Field(default=1, ge=1, le=64, description="--tp-size.")
    mem_fraction_static: float | None = Field(default=None, gt=0, lt=1, description="--mem-fraction-static.")
    max_running_requests: int | None = Field(default=None, ge=1, le=4096, description="--max-running-requests.")
    attention_backend: AttentionBackend | None = Field(
        default=None, description="--attention-backend; SM120 placements default to flashinfer."
    )
    port: int = Field(default=30000, ge=1024, le=65535, description="Port SGLang listens on.")
    # Bounded lengths keep the CEL rules' estimated cost within the API server's budget.
    extra_args: list[Annotated[str, Field(min_length=1, max_length=1024)]] = Field(
        default_factory=list,
        max_length=128,
        description="More SGLang flags; they may not set flags the operator owns.",
    )
    env: list[EnvVar] = Field(default_factory=list, max_length=128, description="More environment variables.")
    resources: Resources = Field(default_factory=Resources, description="CPU and memory; GPUs come from placement.")
    shm_size: Quantity = Field(default="32Gi", description="Size of the /dev/shm memory volume (NCCL needs it).")
    startup_timeout_seconds: int = Field(
        default=3600,
        ge=60,
        le=7200,
        description="How long a pod may take to load the model before it is restarted.",
    )
    termination_grace_period_seconds: int = Field(
        default=120, ge=5, le=3600, description="Time in-flight requests get to drain on pod stop."
    )
    run_as_user: int = Field(
        default=1000,
        ge=0,
        le=2147483647,
        description="User id SGLang runs as (also its group and the volumes' fsGroup). 1000 is the non-root user "
        "of SpecServe's image; 0 runs as root, for images that need it (runAsNonRoot is then not enforced).",
    )


# ------------------------------------------------------------------------------------------------- placement


class Toleration(Model):
    key: LabelKey | None = Field(default=None, description="Taint key; empty with operator Exists matches all.")
    operator: Literal["Exists", "Equal"] = "Exists"
    value: LabelValue | None = Field(default=None, description="Taint value; operator Equal only.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, description="effect NoExecute only.")


DEFAULT_TOLERATIONS = (Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),)


class GpuSharing(StrEnum):
    EXCLUSIVE = "Exclusive"  # each pod has its GPUs to itself: the two pools' capacities add up
    SHARED = "Shared"  # the pools' pods share GPUs (time-slicing, MPS, or both packed on one device)


class PlacementSpec(Model):
    gpus_per_pod: int = Field(default=1, ge=1, le=64, description="nvidia.com/gpu per pod.")
    gpu_product: str | None = Field(
        default=None,
        min_length=1,
        max_length=k8s_rules.LABEL_VALUE_MAX,
        pattern=k8s_rules.LABEL_VALUE_PATTERN,  # a node label value (the nodeAffinity matches it)
        description="Required nvidia.com/gpu.product node label, e.g. NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition.",
    )
    node_selector: Labels = Field(default_factory=dict, description="Node labels the pods require.")
    tolerations: list[Toleration] = Field(default_factory=lambda: list(DEFAULT_TOLERATIONS), max_length=32)
    priority_class_name: str | None = Field(default=None, pattern=DNS_SUBDOMAIN_PATTERN)
    gpu_sharing: GpuSharing = Field(
        default=GpuSharing.EXCLUSIVE,
        description=(
            "Shared: the speculative and baseline pools' pods run on the same GPUs (time-slicing, MPS, or both on "
            "one device), so their capacities do not add up and a split of the load serves less than either pool "
            "alone. TrafficSplit then puts all the weight on the pool its curves say serves the demand best, in "
            "one move (no step bound), and learns a pool's curve only while the other pool is idle. Set "
            "engine memory fractions so both engines fit. Exclusive (default): one set of GPUs per pod."
        ),
    )
    sm120: bool | None = Field(
        default=None,
        description="Render SM120-safe engine settings; unset detects it from gpuProduct.",
    )


# ----------------------------------------------------------------------------------------- pools and routing


class Autoscaling(StrEnum):
    OPERATOR = "Operator"  # the operator applies spec.replicas
    EXTERNAL = "External"  # an HPA or KEDA owns the replica count; the operator never sets it


class PoolSpec(Model):
    replicas: int = Field(default=1, ge=0, le=1000, description="Pods; ignored with autoscaling External.")
    max_surge: int = Field(
        default=0,
        ge=0,
        le=100,
        description="Pods that may start before an old one stops in a roll (spare GPUs). 0: stop one, then start "
        "one (maxUnavailable 1).",
    )
    autoscaling: Autoscaling = Field(
        default=Autoscaling.OPERATOR,
        description="External: an HPA or KEDA owns the pool's replica count; the Deployment is applied without "
        "spec.replicas so the operator never fights it (see docs/install.md).",
    )


class PoolsSpec(Model):
    speculative: PoolSpec = Field(
        default_factory=PoolSpec,
        description="Speculative pool; Restart and Adaptive run a single pool of this size.",
    )
    baseline: PoolSpec = Field(default_factory=PoolSpec, description="Baseline pool (TrafficSplit only).")


class GatewayRef(Model):
    # Gateway API parentRef limits: a namespace is a DNS label, a sectionName at most 253 characters.
    name: ObjectName
    namespace: str | None = Field(
        default=None, pattern=DNS_LABEL_PATTERN, max_length=63, description="Defaults to the SpecServe's namespace."
    )
    section_name: str | None = Field(default=None, pattern=DNS_LABEL_PATTERN, max_length=253)


class RoutingSpec(Model):
    gateway: GatewayRef | None = Field(default=None, description="Gateway the owned HTTPRoute attaches to.")
    hostnames: list[
        Annotated[
            str,
            # The schema carries the Gateway API pattern; Python checks it too, with a message saying what is wrong.
            Field(min_length=1, max_length=253, json_schema_extra={"pattern": k8s_rules.HOSTNAME_PATTERN}),
            AfterValidator(_hostname),
        ]
    ] = Field(default_factory=list, max_length=16, description="HTTPRoute hostnames, e.g. llm.example.com.")
    path_prefix: Annotated[str, AfterValidator(_path)] = Field(
        default="/",
        min_length=1,
        max_length=k8s_rules.PATH_MAX,
        json_schema_extra={"pattern": k8s_rules.PATH_PATTERN},
        description="HTTPRoute PathPrefix match, e.g. /v1.",
    )
    settle_seconds: int = Field(
        default=30,
        ge=0,
        le=3600,
        description="After moving weights, a pool is rolled or pruned only once the Gateway has accepted the "
        "HTTPRoute's new generation (status.parents[].conditions Accepted, observedGeneration); where the Gateway "
        "reports no status, this many seconds after the move (as Argo Rollouts' scaleDownDelaySeconds).",
    )


class MonitoringSpec(Model):
    pod_monitor: bool = Field(default=False, description="Render a PodMonitor (Prometheus Operator).")
    labels: Labels = Field(
        default_factory=dict,
        description="Extra labels on the PodMonitor (e.g. the Prometheus selector's); may not set the operator's own.",
    )
    interval_seconds: int = Field(default=15, ge=1, le=600)


# ------------------------------------------------------------------------------------------------- switching

# Bounds on the switching numbers (api/curves.py): a value beyond them is a typo or an attack, and both the
# API server (the schema's maximum) and the operator (pydantic) refuse it before any arithmetic overflows.
# Infinity and NaN are refused by pydantic (allow_inf_nan=False); JSON cannot carry them to the API server.
Finite = Annotated[float, Field(allow_inf_nan=False)]


class CurvePoint(Model):
    concurrency: Finite = Field(
        gt=0, le=CONCURRENCY_MAX, description=f"Requests in flight per replica (at most {CONCURRENCY_MAX:g})."
    )
    tokens_per_second: Finite = Field(
        ge=0,
        le=TOKENS_PER_SECOND_MAX,
        description=f"Total output tokens/s of one replica (at most {TOKENS_PER_SECOND_MAX:g}).",
    )


class Curves(Model):
    """Measured total output tokens/s against concurrency, per mode (from `specserve calibrate`)."""

    speculative: list[CurvePoint] = Field(default_factory=list, max_length=64)
    baseline: list[CurvePoint] = Field(default_factory=list, max_length=64)


class MetricsSource(Model):
    # The members spelled out (not the enum type): the schema keeps its shape, the CRD its text.
    source: Literal[MetricsSourceKind.PROMETHEUS, MetricsSourceKind.DIRECT] = Field(
        default=MetricsSourceKind.PROMETHEUS,
        description="Read load from Prometheus, or scrape pods' /metrics directly.",
    )
    prometheus_url: str | None = Field(
        default=None,
        pattern=PROMETHEUS_URL_PATTERN,
        max_length=2048,
        description="Defaults to the operator's (--prometheus-url). Only a URL the installation allows (chart value "
        "allowedPrometheusUrls); no credentials, query or fragment in it (credentials would be shown "
        "wherever the URL is: status, events, logs).",
    )
    series_selector: (
        Annotated[
            str,
            # The schema carries the grammar; Python checks it too, with a message saying what is wrong.
            Field(min_length=1, max_length=1024, json_schema_extra={"pattern": selector.SELECTOR_PATTERN}),
            AfterValidator(_series_selector),
        ]
        | None
    ) = Field(
        default=None,
        description=(
            "PromQL label matchers that select one pool's engine series, for clusters that relabel differently "
            "from SpecServe's PodMonitor; $namespace, $name and $pool (speculative, baseline or engine) are "
            'substituted, e.g. kubernetes_namespace="$namespace",app="$name-$pool". Label matchers only (no '
            'PromQL around them), and one must be <label>namespace="$namespace": the series of other namespaces '
            "are not the SpecServe's to read. Unset: the PodMonitor's labels (namespace, specserve_instance, "
            "specserve_pool), one grouped query for all SpecServes."
        ),
    )


# TrafficSplit: a weight change's default cost, relative to the forecast horizon's tokens (docs/simulate.md: the suite)
WEIGHT_CHANGE_COST = 0.001


class SwitchingSpec(Model):
    crossover_concurrency: Finite | None = Field(
        default=None,
        gt=0,
        le=CONCURRENCY_MAX,
        description="Concurrency per replica above which baseline serves more tokens/s; unset means from curves.",
    )
    hysteresis: Finite = Field(
        default=0.1,
        ge=0,
        lt=1,
        description=(
            "Dead band around the crossover, as a fraction. TrafficSplit with both pools' loads read: a weight move "
            "needs a predicted gain of hysteresis x the relative noise of the recent demand readings."
        ),
    )
    evaluation_interval_seconds: int = Field(default=15, ge=1, le=3600)
    up_stabilization_seconds: int = Field(default=0, ge=0, le=86400, description="Before moving to baseline.")
    down_stabilization_seconds: int | None = Field(
        default=None,
        ge=0,
        le=86400,
        description=(
            "Before moving back towards speculation. Unset: 300 for Restart and Adaptive, 60 for TrafficSplit "
            "(before the speculative pool takes the larger weight again)."
        ),
    )
    min_dwell_seconds: int | None = Field(
        default=None,
        ge=0,
        le=86400,
        description=(
            "Least time between two switches (TrafficSplit: between two changes of the pool with the larger weight). "
            "Unset: 300 for Restart and Adaptive (a switch restarts pods), 60 for TrafficSplit (a weight move "
            "restarts nothing; the noise in the demand keeps it calm)."
        ),
    )
    max_restarts_per_day: int = Field(default=6, ge=0, le=1000, description="Restart strategy budget.")
    advisory: bool = Field(default=False, description="Record decisions in status without acting on them.")
    calibrated_accept_length: Finite | None = Field(
        default=None,
        ge=1,  # the accepted length counts the token the target model always adds: never below 1
        le=64,
        description=(
            "Mean accepted length the speculative pods reached when the curves were measured (bench's "
            "accept_length); the operator exports it so an alert fires when the live accept length collapses."
        ),
    )
    tpot_slo_seconds: Finite | None = Field(
        default=None,
        ge=TPOT_SLO_MIN,
        le=60,
        description=(
            "Time-per-output-token goal of the clients, in seconds. With it the TrafficSplit policy maximises the "
            f"tokens served within it (goodput) instead of raw tokens/s. At least {TPOT_SLO_MIN:g} (1 ms a token)."
        ),
    )
    weight_change_cost: Finite = Field(
        default=WEIGHT_CHANGE_COST,
        ge=0,
        le=0.5,
        description=(
            "TrafficSplit: what one weight change costs, as a share of the tokens the pools serve over the closed "
            "loop's forecast horizon; a move is made only when its predicted gain is larger (fewer Gateway "
            "reprogrammings). 0: every gain beyond the demand's noise is taken."
        ),
    )
    initial_mode: Mode = Field(default=Mode.SPECULATIVE, description="Mode before the first decision.")
    metrics: MetricsSource = Field(default_factory=MetricsSource)
    curves: Curves | None = None


# ------------------------------------------------------------------------------------------------------ spec


class NetworkPolicySpec(Model):
    """Who may reach the engine port (SGLang serves admin endpoints such as /flush_cache on it)."""

    enabled: bool = Field(default=False, description="Render a NetworkPolicy for the SpecServe's pods.")
    gateway_namespaces: list[Annotated[str, Field(pattern=DNS_LABEL_PATTERN, max_length=63)]] = Field(
        default_factory=list,
        max_length=16,
        description="Namespaces of the gateway's proxy pods; empty means routing.gateway's namespace (or the "
        "SpecServe's). Some implementations run proxies elsewhere (Envoy Gateway: envoy-gateway-system).",
    )
    prometheus_namespaces: list[Annotated[str, Field(pattern=DNS_LABEL_PATTERN, max_length=63)]] = Field(
        default_factory=lambda: ["monitoring"], max_length=16, description="Namespaces Prometheus scrapes from."
    )


class SpecServeSpec(Model):
    model: ModelSpec
    speculative: SpeculativeSpec = Field(default_factory=SpeculativeSpec)
    engine: EngineSpec = Field(default_factory=EngineSpec)
    placement: PlacementSpec = Field(default_factory=PlacementSpec)
    pools: PoolsSpec = Field(default_factory=PoolsSpec)
    strategy: Strategy = Field(default=Strategy.TRAFFIC_SPLIT)
    routing: RoutingSpec = Field(default_factory=RoutingSpec)
    monitoring: MonitoringSpec = Field(default_factory=MonitoringSpec)
    switching: SwitchingSpec = Field(default_factory=SwitchingSpec)
    network_policy: NetworkPolicySpec = Field(default_factory=NetworkPolicySpec)


class ObjectMeta(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = Field(pattern=DNS_LABEL_PATTERN, max_length=52)
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class SpecServe(BaseModel):
    """A whole SpecServe object, as read from YAML or the API."""

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
    api_version: Literal["specserve.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["SpecServe"]
    metadata: ObjectMeta
    spec: SpecServeSpec


# ---------------------------------------------------------------------------------------------------- status


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(Model):
    type: str
    status: ConditionStatus
    reason: str = Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_length=1024)
    message: str = Field(default="", max_length=32768)
    last_transition_time: str
    observed_generation: int | None = None


class Weights(Model):
    speculative: int = Field(ge=0, le=100)
    baseline: int = Field(ge=0, le=100)

    @classmethod
    def all_on(cls, mode: Mode) -> Weights:
        """A mode's weights: all of it on the pool that serves `mode` (TrafficSplit before its first decision)."""
        spec = 100 if mode is Mode.SPECULATIVE else 0
        return cls(speculative=spec, baseline=100 - spec)

    @classmethod
    def served(cls, mode: Mode, speculative_replicas: int, baseline_replicas: int) -> Weights:
        """What the route serves in `mode` before any decision (render, and the policy's first state): all of it
        on that mode's pool, unless that pool has no replicas and the other has (a pool with no replicas never
        gets traffic)."""
        if mode is Mode.SPECULATIVE and speculative_replicas == 0 and baseline_replicas > 0:
            return cls.all_on(Mode.BASELINE)
        if mode is Mode.BASELINE and baseline_replicas == 0 and speculative_replicas > 0:
            return cls.all_on(Mode.SPECULATIVE)
        return cls.all_on(mode)


class PoolLoad(Model):
    """One pool's load as the switching loop last recorded it (unset: unknown)."""

    pool: Literal["speculative", "baseline"] = Field(description="The flavour the pool serves.")
    ready: int = Field(default=0, ge=0, description="Ready pods (from the Deployment).")
    running: float | None = None
    queued: float | None = None
    tokens_per_second: float | None = Field(default=None, description="Generation tokens/s.")
    ttft_p99_seconds: float | None = None
    tpot_p99_seconds: float | None = None
    accept_length: float | None = Field(default=None, description="Speculative pods: mean accepted length.")
    spec_num_steps: float | None = Field(default=None, description="Speculative pods: active steps (0: off).")


class LoadSnapshot(Model):
    concurrency: float | None = None
    queued: float | None = None
    time: str | None = None
    pools: list[PoolLoad] = Field(default_factory=list, max_length=2, description="Per pool.")


class Decision(Model):
    time: str
    from_mode: Mode | None = None
    to_mode: Mode
    reason: str
    concurrency: float | None = None
    applied: bool = True
    action: str | None = Field(default=None, description="Hold, SetWeights, Restart or Reconfigure.")
    rule: Rule | None = Field(default=None, description="The switching rule that made the decision.")
    weights: Weights | None = Field(default=None, description="TrafficSplit: the weights decided.")


class ModeBar(Model):
    """A mode the switching policy may not enter before `until` (its last roll into it failed and was undone)."""

    # `failures` counts consecutive failed rolls into the mode: the back-off doubles with each, capped.

    mode: Mode
    until: str
    failures: int = Field(default=1, ge=1)
    reason: str = Field(default="", max_length=1024, description="Why the roll failed (the pool's failure).")


class PendingMove(Model):
    """What the switching policy waits on (a stabilization window, a move under way) or has recommended once
    (advisory). Typed: nothing here is parsed from a string."""

    kind: PendingKind
    since: str | None = Field(
        default=None, description="When the wish began: its stabilization window counts from here."
    )
    speculative_weight: int | None = Field(default=None, ge=0, le=100, description="TrafficSplit: the weight wanted.")
    action: Literal[Action.SET_WEIGHTS, Action.RESTART, Action.RECONFIGURE] | None = Field(
        default=None, description="Advised: the change recommended."
    )
    mode: Mode | None = None
    adaptive_crossover: float | None = None


def legacy_pending(pending: object, since: object) -> dict[str, object] | None:
    """status.switching.pending as releases before the typed move wrote it ("w=40", "moving w=40",
    "advised <w=40 | Restart->Baseline | crossover=64.00>"): read once, written back typed. Unknown text: no wish
    (a stabilization window restarts, nothing else)."""
    if not isinstance(pending, str):
        return None
    text, kind = pending, PendingKind.WAITING
    for prefix, named in (("moving ", PendingKind.MOVING), ("advised ", PendingKind.ADVISED)):
        if text.startswith(prefix):
            text, kind = text[len(prefix) :], named
    out: dict[str, object] = {"kind": kind, "since": since if isinstance(since, str) else None}
    try:
        if text.startswith("w="):
            out["speculativeWeight"] = int(text[2:])
            if kind is PendingKind.ADVISED:
                out["action"] = Action.SET_WEIGHTS
        elif kind is PendingKind.ADVISED and text.startswith("Restart->"):
            out.update(action=Action.RESTART, mode=text.removeprefix("Restart->"))
        elif kind is PendingKind.ADVISED and text.startswith("crossover="):
            out.update(action=Action.RECONFIGURE, adaptiveCrossover=float(text.removeprefix("crossover=")))
        else:
            return None
    except ValueError:
        return None
    return out


class SwitchingState(Model):
    """The switching policy's memory between evaluations (specserve.policy.types.PolicyState), kept in status
    so that a restarted operator resumes a switch: no double restart, no forgotten dwell or restart budget."""

    mode: Mode
    mode_since: str
    weights: Weights | None = None
    last_switch: str | None = None
    regret: float = 0.0
    restarts: list[str] = Field(default_factory=list, max_length=1000)
    pending: PendingMove | None = None
    unknown_streak: int = 0
    last_evaluation: str | None = None
    adaptive_crossover: float | None = None
    served_crossover: float | None = Field(
        default=None,
        description="Adaptive: while a re-rendered config rolls out, the crossover of the config that served before "
        "it (where a failed roll is rolled back to).",
    )
    barred: list[ModeBar] = Field(
        default_factory=list,
        max_length=3,
        description="Modes the policy may not switch into until a time: a change it decided failed to roll out.",
    )
    forecast_error: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Restart: the demand forecast's recent relative error (|history - demand read| / the larger, "
        "weighted with a one-hour half-life; trusted below 0.5). Absent: no forecast scored yet, e.g. no demand "
        "history (the Direct source, a new deployment): the reactive rule.",
    )
    forecast_trust: float | None = Field(
        default=None,
        ge=0.5,
        le=1,
        description="Restart: the ski-rental lambda that error earns (1: the reactive rule, within 2x of the offline "
        "optimum). The restart threshold is lambda x its cost when the forecast says the restart repays, cost / "
        "lambda when not: within 1 + lambda of the optimum when the forecast is right, 1 + 1/lambda whatever.",
    )

    @model_validator(mode="before")
    @classmethod
    def _typed_pending(cls, data: object) -> object:
        """Statuses written before the pending move was typed keep their wish (see `legacy_pending`)."""
        if isinstance(data, dict) and ("pendingSince" in data or isinstance(data.get("pending"), str)):
            since = data.get("pendingSince")
            data = {k: v for k, v in data.items() if k != "pendingSince"}
            data["pending"] = legacy_pending(data.get("pending"), since)
        return data


# ------------------------------------------------------------------------------------ learned curves (status)


class LearnedPoint(Model):
    """One grid concurrency of a learned curve (specserve.policy.learning): what the policy would use there."""

    concurrency: float = Field(gt=0, description="Requests per replica.")
    calibrated: float = Field(ge=0, description="Tokens/s of one replica from spec.switching.curves.")
    learned: float = Field(ge=0, description="Tokens/s of one replica as the pools served it lately.")
    confidence: float = Field(ge=0, le=1, description="How far the evidence outweighs the calibrated prior.")
    # The estimator's own state, so that an operator restart resumes it (docs/learning.md).
    weight: float = Field(default=0.0, ge=0, description="Decayed evidence, in evaluations.")
    ratio: float = Field(default=1.0, ge=0, description="Evidence mean of observed / calibrated.")
    applied: float = Field(default=1.0, ge=0, description="Ratio to calibrated the policy decides with.")


class LearnedMode(Model):
    points: list[LearnedPoint] = Field(default_factory=list, max_length=16)
    coverage: list[float] = Field(
        default_factory=list,
        max_length=2,
        description="[from, to]: the concurrencies per replica where the learned curve is confident; empty: none.",
    )
    last_observed: str | None = Field(default=None, description="When this mode's pools were last observed.")
    cusum_up: float = Field(default=0.0, ge=0)
    cusum_down: float = Field(default=0.0, ge=0)
    recent_residuals: list[float] = Field(default_factory=list, max_length=5)


class CurveDriftRecord(Model):
    mode: Mode
    time: str
    shift: float = Field(description="Median relative residual that fired the test (-0.3: 30 % below the curve).")


class LearnedCrossover(Model):
    calibrated: float | None = Field(default=None, description="Crossover per replica of the calibrated curves.")
    effective: float | None = Field(
        default=None, description="Crossover of the curves the policy decides with (learned where confident)."
    )


class LearningStatus(Model):
    """The live curves next to the calibrated ones (bounded: at most 16 points per mode), written by the
    switching loop at most every few minutes or when the drift test fires."""

    last_update: str
    speculative: LearnedMode = Field(default_factory=LearnedMode)
    baseline: LearnedMode = Field(default_factory=LearnedMode)
    accept_length_reference: float | None = Field(
        default=None, description="The accept length the speculative evidence is normalised to."
    )
    accept_length: float | None = Field(default=None, description="The accept length last observed.")
    model_scale: float | None = Field(
        default=None,
        gt=0,
        description="Curves modelled on crossoverConcurrency only: the tokens/s per model unit (the baseline's "
        "single-stream rate) the pools' readings gave the model; the calibrated column is the model times it.",
    )
    last_drift: CurveDriftRecord | None = None
    crossover: LearnedCrossover = Field(default_factory=LearnedCrossover)


HISTORY_LIMIT = 20


class PoolFailure(Model):
    """Why a pool's pods do not come up (ProgressDeadlineExceeded, ImagePullBackOff, OOMKilled, Unschedulable...)."""

    reason: str = Field(max_length=256)
    message: str = Field(default="", max_length=4096)
    since: str | None = Field(default=None, description="When the failure was first seen.")
    deadline_exceeded: bool = Field(default=False, description="The roll ran past progressDeadlineSeconds.")


class PoolStatus(Model):
    """One pool's Deployment as last observed; a report only (rollouts decide from the live Deployments)."""

    role: str = Field(description="speculative, baseline or engine.")
    name: str
    desired: int = Field(ge=0)
    ready: int = Field(ge=0)
    updated: int = Field(ge=0, description="Pods running the current pod template.")
    failure: PoolFailure | None = Field(
        default=None, description="Why the pool cannot progress (a stuck or failed roll), when it cannot."
    )


class RolloutState(Model):
    """The reconcile's memory between passes (typed, not parsed from condition messages)."""

    announced: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="Downtime announcements made and not yet acted on (pool@templatehash): the next pass rolls.",
    )
    weights_changed: str | None = Field(
        default=None,
        description="When the reconcile last moved the HTTPRoute's weights: a roll or prune that follows waits for "
        "the Gateway to accept the route's generation, or for the settle delay where it reports no status.",
    )
    refused: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Objects (Kind/name) whose last apply the API server refused and that have not been applied "
        "since (Degraded has the server's message); each is announced by one Warning event.",
    )


class SpecServeStatus(Model):
    observed_generation: int | None = None
    # A list map keyed by type: the reconcile and the switching loop each server-side apply their own conditions.
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    active_mode: Mode | None = None
    weights: Weights | None = None
    load: LoadSnapshot | None = None
    last_decision: Decision | None = None
    history: list[Decision] = Field(default_factory=list, max_length=HISTORY_LIMIT)
    switching: SwitchingState | None = None
    pools: list[PoolStatus] = Field(default_factory=list, max_length=8, description="Each pool as observed.")
    rollout: RolloutState | None = Field(default=None, description="The reconcile's rollout state.")
    learning: LearningStatus | None = Field(
        default=None, description="The switching loop's learned throughput curves (docs/learning.md)."
    )

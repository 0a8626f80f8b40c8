"""Every reason the operator writes into a condition or an Event, in blocks by the condition it belongs to (as
kueue keeps its reasons beside their types). No reason is spelled anywhere else in the operator
(tests/unit/test_reasons.py checks), and each is listed in docs/operations.md ("Condition and Event reasons").

A reason is a machine-readable CamelCase word: alerts and `kubectl wait --for` match on it, so a value, once
released, does not change. The condition types are in `specserve.api.conditions`; a decision's Event carries the
`Action` (api.models) as its reason.
"""

from __future__ import annotations

# -- Ready
SERVING = "Serving"
POOLS_NOT_READY = "PoolsNotReady"
ROUTE_NOT_READY = "RouteNotReady"
CONFLICT = "Conflict"  # also Degraded: an object of our names that this SpecServe does not own
RECONCILE_FAILED = "ReconcileFailed"  # also Degraded: an apply or API call failed

# -- SpeculativePoolReady, BaselinePoolReady (False may also carry the pool's failure: Kubernetes' reasons below)
PODS_READY = "PodsReady"
PODS_NOT_READY = "PodsNotReady"
SCALING = "Scaling"  # serving, with pods of a scale-up still starting
SCALED_TO_ZERO = "ScaledToZero"
NOT_USED = "NotUsed"  # Adaptive: one pool, no baseline
INACTIVE = "Inactive"  # Restart: the pool of the mode not served

# -- RouteReady, PodMonitorReady
NOT_REQUESTED = "NotRequested"
NOT_INSTALLED = "NotInstalled"  # the Gateway API's or the Prometheus operator's CRD is not in the cluster
ACCEPTED = "Accepted"
NOT_ACCEPTED = "NotAccepted"
APPLIED = "Applied"
APPLY_FAILED = "ApplyFailed"  # also the Warning event of an apply the API server refused
PENDING = "Pending"

# -- MetricsAvailable
READING = "Reading"
NOT_EVALUATED = "NotEvaluated"  # also Switching: the switching loop has not run yet
QUERY_FAILED = "QueryFailed"
QUERY_REFUSED = "QueryRefused"
NO_DATA = "NoData"
PARTIAL_SERIES = "PartialSeries"
STALE = "Stale"
NO_PROMETHEUS = "NoPrometheus"
KUBE_READ_FAILED = "KubeReadFailed"
IMPLAUSIBLE_READING = "ImplausibleReading"  # a count no deployment produces (a gauge near 1e200, a negative one)
NOT_READ = "NotRead"  # a placeholder replaced once read
EVALUATION_FAILED = "EvaluationFailed"

# -- Switching
STABLE = "Stable"
CONVERGING = "Converging"
PAUSED = "Paused"

# -- CurveDrift (the Warning event's reason is the condition type, CurveDrift)
NO_DRIFT = "NoDrift"
RELEARNING = "Relearning"
RELEARNED = "Relearned"
ACCEPT_LENGTH_MOVED = "AcceptLengthMoved"  # True: the speculative curve is scaled by a moved accept length

# -- Progressing: the rollout step running (True), or settled / stuck (False, the pool's failure)
APPLYING = "Applying"
SETTLED = "Settled"
WAITING_FOR_POOL = "WaitingForPool"
WAITING_FOR_TURN = "WaitingForTurn"
WAITING_FOR_ROLL_SLOT = "WaitingForRollSlot"
WAITING_FOR_GATEWAY = "WaitingForGateway"
ROLLING_POOL = "RollingPool"
DRAINING_POOL = "DrainingPool"
REPLACING_POOL = "ReplacingPool"
PRUNING_POOL = "PruningPool"
DOWNTIME_AHEAD = "DowntimeAhead"  # also the Warning event, posted before the pass that rolls
# The announced restart itself (the pass after DowntimeAhead): its own reason, so that alerts can tell a planned
# gap from an outage (charts/specserve/rules).
PLANNED_RESTART = "PlannedRestart"

# -- Degraded (besides Conflict and ReconcileFailed)
AS_EXPECTED = "AsExpected"
READ_FAILED = "ReadFailed"
INVALID_SPEC = "InvalidSpec"  # also the Warning event: the spec was rejected, nothing applied
AUTOSCALER_CONFLICT = "AutoscalerConflict"  # an autoscaler scales a pool the operator sizes

# -- Events only
METRICS_UNAVAILABLE = "MetricsUnavailable"  # Warning: the load has been unknown for several evaluations
OPERATOR_CONFLICT = "OperatorConflict"  # Warning on the Lease: another operator holds it

# -- Kubernetes' own reasons, passed through into a pool's failure, Progressing and the Warning event. A
# ReplicaFailure's reason (FailedCreate, FailedDelete) is passed through as the Deployment controller words it.
PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
FAILED_CREATE = "FailedCreate"  # a ReplicaFailure without a reason of its own
OOM_KILLED = "OOMKilled"
UNSCHEDULABLE = "Unschedulable"
CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
INVALID_IMAGE_NAME = "InvalidImageName"
ERR_IMAGE_PULL = "ErrImagePull"
IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
CREATE_CONTAINER_ERROR = "CreateContainerError"
RUN_CONTAINER_ERROR = "RunContainerError"
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"


def every() -> frozenset[str]:
    """Every reason above (the test and the docs check read this)."""
    return frozenset(v for k, v in globals().items() if k.isupper() and isinstance(v, str))

"""The switching policy's inputs and outputs (pure data: no I/O, no clock).

One contract for every caller: the operator's switching loop (samples from Prometheus or the pods' /metrics,
wall-clock time), `specserve simulate` (samples from a simulated Prometheus, simulated time) and the tests
(scripted samples). Times are seconds on the caller's clock; the policy never reads a clock itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from specserve.api.models import Action, Mode, PendingKind, Rule, Strategy, Weights
from specserve.policy.forecast import History, Ledger, Regimes, Trend

# Action and PendingKind live in the API (status.history, status.switching.pending); the policy's modules import them
# from here as well.
__all__ = ["Action", "Bar", "Knobs", "Pending", "PendingKind", "PolicyState", "PoolSignal", "Sample", "Verdict"]


@dataclass(frozen=True)
class PoolSignal:
    """One pool's load as read in one evaluation; None = unknown (never read as 0)."""

    ready_replicas: int
    running: float | None = None
    queued: float | None = None
    tokens_per_second: float | None = None
    ttft_p50: float | None = None
    ttft_p99: float | None = None
    tpot_p50: float | None = None
    tpot_p99: float | None = None
    accept_length: float | None = None  # speculative pods only
    spec_num_steps: float | None = None  # the active steps; 0 when Adaptive turned drafting off
    gen_throughput: float | None = None  # the engines' decode tokens/s gauge, summed over the pool's pods
    decode_tokens_per_second: float | None = None  # decoded every step (Signal.DECODE_TOKENS), over the pool's pods
    # Requests in flight by Little's law (metrics.promql.Signal.LATENCY_IN_FLIGHT); None: too few finished to say
    latency_in_flight: float | None = None

    def in_flight(self) -> float | None:
        """Requests in flight on the pool: running + queued, or more where the finished requests' latency says more
        were in flight than the gauges caught (they are snapshots; see LATENCY_IN_FLIGHT). None: the gauges are
        unknown (the latency alone never makes a pool's load known: it lags a change by its window)."""
        if self.running is None:
            return None
        gauges = self.running + (self.queued or 0.0)
        return max(gauges, self.latency_in_flight) if self.latency_in_flight is not None else gauges


@dataclass(frozen=True)
class Sample:
    """One evaluation's reading of the load signal."""

    time: float
    # Requests in flight (PoolSignal.in_flight) across all of the SpecServe's pods, smoothed over the query window.
    # It does not depend on the split, so moving weights does not move it. None = unknown.
    demand: float | None
    speculative: PoolSignal | None = None  # TrafficSplit's speculative pool, or the single pool when speculative
    baseline: PoolSignal | None = None
    error: str | None = None  # why demand is unknown, worded for users (goes into reasons and conditions)
    history: History | None = None  # Restart: the demand recorded a day and a week ago (policy.forecast); None: none


@dataclass(frozen=True)
class Knobs:
    """What the spec (and the operator's observation of its pods) tells the policy; see `from_spec`."""

    strategy: Strategy
    crossover: float | None  # spec.switching.crossoverConcurrency (per replica); None: from the curves
    hysteresis: float
    evaluation_interval: float
    up_stabilization: float  # before moving load towards baseline
    down_stabilization: float  # before moving load back towards speculative
    min_dwell: float
    max_restarts_per_day: int
    advisory: bool
    speculative_replicas: int  # spec.pools.speculative.replicas (the single pool for Restart/Adaptive)
    baseline_replicas: int  # spec.pools.baseline.replicas (TrafficSplit only)
    startup_seconds: float  # what one restart costs in lost serving time (measured when known, else the spec's)
    max_weight_step: int = 25  # percentage points the speculative weight may move per evaluation
    max_surge: int = 0  # spare GPUs: pods that may start before one stops (Restart rolls)
    adaptive_explicit: bool = False  # spec.speculative.adaptiveConfig is set: the user's config, never re-rendered
    tpot_slo: float | None = None  # TPOT goal (s/token): TrafficSplit maximises goodput within it; None: tokens/s
    weight_change_cost: float = 0.0  # TrafficSplit: the least relative predicted gain one weight change must pay
    shared_gpus: bool = False  # TrafficSplit: the pools share GPUs (placement.gpuSharing Shared): all weight on one


@dataclass(frozen=True)
class Pending:
    """What the policy waits on or has recommended (typed: the policy never parses its own state)."""

    kind: PendingKind
    since: float | None = None  # when the wish began (the stabilization window counts from here)
    weight: int | None = None  # TrafficSplit: the speculative weight wanted
    action: Action | None = None  # ADVISED: the recommendation
    mode: Mode | None = None
    crossover: float | None = None  # ADVISED Reconfigure: the crossover recommended

    def same_advice(self, other: Pending | None) -> bool:
        """The same recommendation, whenever it began."""
        return other is not None and replace(self, since=None) == replace(other, since=None)


@dataclass(frozen=True)
class Bar:
    """A mode the policy may not change into before `until`: its last roll into it failed and was undone.
    Adaptive bars its one mode: no re-render before `until`."""

    mode: Mode
    until: float
    failures: int = 1  # consecutive failed rolls into the mode; the back-off doubles with each
    reason: str = ""


@dataclass(frozen=True)
class PolicyState:
    """Everything the policy carries from one evaluation to the next. It lives in the SpecServe's status
    (status.switching), so an operator restarted in the middle of a switch resumes it."""

    mode: Mode  # the mode served now (TrafficSplit: the pool with the larger weight)
    mode_since: float  # when the current mode began
    weights: Weights | None = None  # TrafficSplit: the weights in force
    last_switch: float | None = None  # when the last change was made
    regret: float = 0.0  # Restart: output tokens the other mode would have served more since mode_since
    restarts: tuple[float, ...] = ()  # Restart: times of the restarts of the last 24 h
    pending: Pending | None = None  # the wish a stabilization window waits on, a move under way, or advice given
    unknown_streak: int = 0  # consecutive evaluations whose signal was unknown
    last_evaluation: float | None = None
    adaptive_crossover: float | None = None  # Adaptive: the crossover the rendered config was computed from
    # Adaptive: while a re-render rolls out, the crossover of the config that served before it (the rollback
    # point); None once the roll converged
    served_crossover: float | None = None
    barred: tuple[Bar, ...] = ()  # modes the policy may not change into yet (policy.rollback)
    # Restart: the forecast's recent relative error (policy.forecast); None: no forecast scored yet (no trust)
    forecast_error: float | None = None
    # Restart: the slack banked against the 2x bound (policy.forecast); in memory only, not in status
    forecast_ledger: Ledger = field(default_factory=Ledger)
    # Restart: which mode the demand favoured and for how long (policy.forecast); in memory only, not in status
    regimes: Regimes = field(default_factory=Regimes)
    # Restart: the highest demand read per slice of the last two rolls' duration (policy.restart.remember_peak), as
    # (slice start, requests in flight); in memory only, not in status
    demand_peaks: tuple[tuple[float, float], ...] = ()
    # Restart: the demand's level and slope (policy.forecast.Trend); in memory only, not in status
    trend: Trend = field(default_factory=Trend)
    # TrafficSplit: the last requests in flight read (policy.closed_loop's noise); in memory only, not in status
    recent_demand: tuple[float, ...] = ()
    # TrafficSplit: the arrivals (tokens/s) estimated while a pool queues; None: no pool queues
    # (policy.closed_loop.estimate_arrivals); in memory only, not in status
    arrivals: float | None = None


@dataclass(frozen=True)
class Verdict:
    """What one evaluation decided."""

    state: PolicyState  # the next state (already reflects the change when action != HOLD and not advisory)
    action: Action
    mode: Mode  # desired mode
    weights: Weights | None  # desired weights (TrafficSplit)
    reason: str  # the rule and the numbers behind it, e.g. "demand 31.0 > crossover 20.0 x 1.1 for 60 s"
    applied: bool = True  # False in advisory mode (recorded, not acted on)
    demand: float | None = None
    adaptive_crossover: float | None = None  # Adaptive: the crossover to render the config from
    notes: tuple[str, ...] = field(default=())  # extra facts for status/events (e.g. "no crossover in the curves")
    rule: Rule = Rule.HOLD  # the rule behind a change (status.history, the decisions metric)

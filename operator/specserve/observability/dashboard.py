"""What the SpecServe Grafana dashboard shows (pure data): rows, panels and their PromQL. grafana.py builds the
dashboard from it with the Grafana Foundation SDK (the `dashboard` extra); `specserve dashboard` writes it to
charts/specserve/dashboards/specserve.json (a test fails when the two drift).

Every query is listed in PANELS as plain PromQL with the dashboard's variables ($namespace, $name,
$__rate_interval): tests/integration/test_dashboard_queries.py runs each against a live Prometheus scraping
emulated pods and the operator, so a typo is a failing test, not an empty panel.

One SpecServe is never summed with another: the per-SpecServe row repeats for each selected name, and every
aggregation keeps the SpecServe's labels (namespace and name, or specserve_instance for the engines' series), so
100 and 5000 tok/s stay two lines even where the row is not repeated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# The variables the queries use; the query check substitutes them (see `substitute`).
NS = 'namespace=~"$namespace"'
SEL = f'{NS}, name=~"$name"'  # the operator's own series
ENGINE = f'{NS}, specserve_instance=~"$name"'  # the engines' series, as the operator's PodMonitor labels them
DRAFTING = f'{ENGINE}, specserve_pool=~"speculative|engine"'  # pods that speculate
RATE = "$__rate_interval"

UID = "specserve"
TITLE = "SpecServe"
# The Grafana version the dashboard targets: pyproject's `dashboard` extra pins this SDK build (its epoch marks
# the build; epochs sort before versions, so only an exact pin selects the version) and the JSON carries its schema.
GRAFANA_SDK_BUILD = "1769699379!11.6.0"
GRAFANA_SCHEMA_VERSION = 41


@dataclass(frozen=True)
class PanelQuery:
    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False  # an instant query in table format: every series a row (a table panel shows them all)

    @property
    def is_instant(self) -> bool:
        return self.instant or self.table


@dataclass(frozen=True)
class PanelSpec:
    title: str
    description: str
    targets: tuple[PanelQuery, ...]
    unit: str = "short"
    kind: Literal["timeseries", "table", "stat"] = "timeseries"
    width: int = 12
    height: int = 8
    # A query that may rightly return nothing on a healthy cluster (none here yet: each panel's query must return
    # series in the live check). Kept explicit so a new exception is a decision, not an accident.
    may_be_empty: bool = False


@dataclass(frozen=True)
class RowSpec:
    title: str
    panels: tuple[PanelSpec, ...]
    repeat_by_name: bool = False


POOL = "{{specserve_instance}}/{{specserve_pool}}"  # the legend of a per-pool series
BY_POOL = "namespace, specserve_instance, specserve_pool"  # engines' series: per SpecServe and pool, never summed
BY_SPECSERVE = "namespace, name"  # the operator's series: per SpecServe


def _quantiles(bucket: str, by: str, legend: str, quantiles: tuple[float, ...]) -> tuple[PanelQuery, ...]:
    """histogram_quantile over the rate of the `bucket` series summed by `by` (and le): a target per quantile."""
    return tuple(
        PanelQuery(f"histogram_quantile({q}, sum by ({by}le) (rate({bucket}[{RATE}])))", f"{legend}p{round(q * 100)}")
        for q in quantiles
    )


def _pool_quantiles(histogram: str, fallback: str | None = None) -> tuple[PanelQuery, ...]:
    """p50/p90/p99 per pool of an engine histogram; where a release lacks it, of `fallback` (`or` per series)."""
    quantiles = (0.5, 0.9, 0.99)
    main = _quantiles(f"{histogram}_bucket{{{ENGINE}}}", f"{BY_POOL}, ", f"{POOL} ", quantiles)
    if fallback is None:
        return main
    spare = _quantiles(f"{fallback}_bucket{{{ENGINE}}}", f"{BY_POOL}, ", f"{POOL} ", quantiles)
    return tuple(PanelQuery(f"{m.expr} or {f.expr}", m.legend) for m, f in zip(main, spare, strict=True))


def _operator_quantiles(histogram: str) -> tuple[PanelQuery, ...]:
    """p50/p99 of one of the operator's histograms."""
    return _quantiles(f"{histogram}_bucket", "", "", (0.5, 0.99))


def _per_pool(aggregation: str, expr: str, legend: str = POOL) -> PanelQuery:
    """`expr` (the engines' series) aggregated per SpecServe and pool."""
    return PanelQuery(f"{aggregation} by ({BY_POOL}) ({expr})", legend)


def _per_specserve(title: str, description: str, expr: str, unit: str = "short") -> PanelSpec:
    """An overview panel: one of the operator's series, a line per SpecServe."""
    return PanelSpec(title, description, (PanelQuery(expr, "{{namespace}}/{{name}}"),), unit=unit, width=6)


OVERVIEW = RowSpec(
    "Overview: every SpecServe",
    (
        _per_specserve("Ready", "specserve_ready: 1 when the SpecServe's Ready condition is True.", "specserve_ready"),
        _per_specserve(
            "Demand",
            "Requests in flight across each SpecServe's pods, smoothed (the switching loop's input).",
            "specserve_demand",
        ),
        _per_specserve(
            "Speculative weight",
            "HTTPRoute weight on the speculative pool (TrafficSplit).",
            'specserve_route_weight{pool="speculative"}',
            unit="percent",
        ),
        _per_specserve(
            "Serving speculatively",
            "1 while the mode actually serving is Speculative.",
            'specserve_active_mode{mode="Speculative"}',
        ),
        PanelSpec(
            "Conditions",
            "Every condition's status and reason now, a row per SpecServe and condition; look for Ready=False, "
            "Degraded=True, MetricsAvailable=False, Switching=False/Paused.",
            (PanelQuery(f"max by ({BY_SPECSERVE}, type, status, reason) (specserve_condition) == 1", table=True),),
            kind="table",
            width=24,
        ),
    ),
)

SPECSERVE = RowSpec(
    "$namespace/$name",
    (
        PanelSpec(
            "Demand against the crossover",
            "Demand (requests in flight) against the crossover per replica times the Ready replicas: above the "
            "line baseline serves more tokens/s, below it speculation does.",
            (
                PanelQuery(f"specserve_demand{{{SEL}}}", "demand"),
                PanelQuery(
                    f"specserve_crossover_concurrency{{{SEL}}} * on (namespace, name) "
                    f"sum by (namespace, name) (specserve_pool_ready_replicas{{{SEL}}})",
                    "crossover x ready replicas",
                ),
            ),
        ),
        PanelSpec(
            "Weights and mode",
            "HTTPRoute weights on the route and as decided; the mode serving (1 = that mode). Decisions are the "
            "dashboard's annotations (action in the title, rule in the text).",
            (
                PanelQuery(f"specserve_route_weight{{{SEL}}}", "route {{pool}}"),
                PanelQuery(f"specserve_target_weight{{{SEL}}}", "decided {{pool}}"),
                PanelQuery(f"specserve_active_mode{{{SEL}}} * 100", "mode {{mode}} (100 = serving)"),
            ),
            unit="percent",
        ),
        PanelSpec(
            "Tokens/s per pool",
            "Generated tokens per second, per pool (SGLang's generation_tokens_total).",
            (_per_pool("sum", f"rate(sglang:generation_tokens_total{{{ENGINE}}}[{RATE}])"),),
        ),
        PanelSpec(
            "Requests running and queued per pool",
            "SGLang's num_running_reqs and num_queue_reqs, summed per pool.",
            (
                _per_pool("sum", f"sglang:num_running_reqs{{{ENGINE}}}", f"{POOL} running"),
                _per_pool("sum", f"sglang:num_queue_reqs{{{ENGINE}}}", f"{POOL} queued"),
            ),
        ),
        PanelSpec(
            "Time to first token",
            "p50/p90/p99 per pool from SGLang's time_to_first_token_seconds histogram.",
            _pool_quantiles("sglang:time_to_first_token_seconds"),
            unit="s",
        ),
        PanelSpec(
            "Time per output token",
            "p50/p90/p99 per pool from SGLang's request_time_per_output_token_seconds histogram; releases without it "
            "(0.5.9, 0.5.17) from inter_token_latency_seconds.",
            _pool_quantiles("sglang:request_time_per_output_token_seconds", "sglang:inter_token_latency_seconds"),
            unit="s",
        ),
        PanelSpec(
            "Accept length against the calibrated one",
            "Mean accepted length of the speculative pods against spec.switching.calibratedAcceptLength: far below "
            "it, speculation runs but no longer pays (alert SpecServeAcceptLengthCollapsed).",
            (
                _per_pool("avg", f"sglang:spec_accept_length{{{DRAFTING}}}", f"{POOL} live"),
                PanelQuery(f"specserve_calibrated_accept_length{{{SEL}}}", "calibrated"),
            ),
        ),
        PanelSpec(
            "Active draft steps",
            "SGLang's spec_num_steps: the steps in use now (Adaptive moves them with the batch size; 0: drafting off). "
            "Releases without it (0.5.9): the draft tokens per verify less one, accept_length / accept_rate - 1 "
            "(accept_rate = accepted / drafted tokens; one draft token per step with topk 1).",
            (
                PanelQuery(
                    f"avg by ({BY_POOL}) (sglang:spec_num_steps{{{DRAFTING}}}) or avg by ({BY_POOL}) "
                    f"(sglang:spec_accept_length{{{DRAFTING}}} / (sglang:spec_accept_rate{{{DRAFTING}}} > 0)) - 1",
                    POOL,
                ),
            ),
        ),
        PanelSpec(
            "Pool readiness",
            "Ready against desired pods per pool (from the Deployments).",
            (
                PanelQuery(f"specserve_pool_ready_replicas{{{SEL}}}", "{{pool}} ready"),
                PanelQuery(f"specserve_pool_desired_replicas{{{SEL}}}", "{{pool}} desired"),
            ),
        ),
        PanelSpec(
            "Restarts and the restart budget",
            "Restart strategy: restarts in the last 24 h against spec.switching.maxRestartsPerDay.",
            (
                PanelQuery(f"specserve_restarts_used{{{SEL}}}", "restarts (24 h)"),
                PanelQuery(f"specserve_restart_budget{{{SEL}}}", "budget"),
            ),
        ),
        PanelSpec(
            "Evaluations and metric errors",
            "Switching evaluations per second by whether the load was known, and those without load by reason "
            "(NoData, Stale, QueryFailed, ...).",
            (
                PanelQuery(
                    f"sum by ({BY_SPECSERVE}, load) (rate(specserve_evaluations_total{{{SEL}}}[{RATE}]))",
                    "{{name}} evaluations, load {{load}}",
                ),
                PanelQuery(
                    f"sum by ({BY_SPECSERVE}, reason) (increase(specserve_metric_errors_total{{{SEL}}}[{RATE}]))",
                    "{{name}} error {{reason}}",
                ),
            ),
        ),
        PanelSpec(
            "Decisions",
            "Decisions other than Hold, by action and rule (the reason's leading words), and whether applied.",
            (
                PanelQuery(
                    f"sum by ({BY_SPECSERVE}, action, rule, applied) "
                    f"(increase(specserve_decisions_total{{{SEL}}}[{RATE}]))",
                    "{{name}} {{action}}: {{rule}} (applied {{applied}})",
                ),
            ),
        ),
    ),
    repeat_by_name=True,
)

OPERATOR = RowSpec(
    "Operator",
    (
        PanelSpec(
            "Reconcile latency",
            "p50/p99 of one reconcile (reads, applies, status write).",
            _operator_quantiles("specserve_reconcile_seconds"),
            unit="s",
            width=8,
        ),
        PanelSpec(
            "Evaluation round latency",
            "p50/p99 of one switching round (all SpecServes due, reading included).",
            _operator_quantiles("specserve_evaluation_round_seconds"),
            unit="s",
            width=8,
        ),
        PanelSpec(
            "Leader and queries",
            "1 on the replica that acts (holds the Lease); Prometheus queries and pod scrapes per second.",
            (
                PanelQuery("specserve_leader", "leader {{instance}}"),
                PanelQuery(f"sum by (source) (rate(specserve_metric_queries_total[{RATE}]))", "queries {{source}}"),
            ),
            width=8,
        ),
    ),
)

ROWS = (OVERVIEW, SPECSERVE, OPERATOR)

# Decisions as annotations: the action in the title, the rule (the reason's leading words) in the text.
DECISION_ANNOTATION = PanelQuery(
    f"sum by (namespace, name, action, rule, applied) (changes(specserve_decisions_total{{{SEL}}}[2m])) > 0"
)


@dataclass(frozen=True)
class VariableSpec:
    """A dashboard variable read from an instant query (Grafana's query_result) and the label a regex takes from
    each series: a SpecServe deleted now is gone from the list at once, where label_values would keep it for the
    whole time range. specserve_condition is removed with its SpecServe."""

    query: str
    label: str
    include_all: bool

    @property
    def regex(self) -> str:
        return f'/{self.label}="([^"]+)"/'


VARIABLES = {
    "namespace": VariableSpec("query_result(count by (namespace) (specserve_condition))", "namespace", True),
    # Opens on one SpecServe (not All): pick more to get a row each.
    "name": VariableSpec(
        'query_result(count by (namespace, name) (specserve_condition{namespace=~"$namespace"}))', "name", False
    ),
}


@dataclass(frozen=True)
class Substitution:
    """Values for the dashboard's variables when its queries run outside Grafana (the live check)."""

    namespace: str = ".+"
    name: str = ".+"
    rate_interval: str = "1m"
    extra: dict[str, str] = field(default_factory=dict)


def substitute(expr: str, values: Substitution) -> str:
    out = expr.replace("$__rate_interval", values.rate_interval)
    out = out.replace("$namespace", values.namespace).replace("$name", values.name)
    for key, value in values.extra.items():
        out = out.replace(f"${key}", value)
    return out


def all_queries() -> list[tuple[str, PanelSpec | None, PanelQuery]]:
    """(row title, panel or None for the annotation, target) for every query the dashboard runs."""
    out: list[tuple[str, PanelSpec | None, PanelQuery]] = [
        (row.title, panel, target) for row in ROWS for panel in row.panels for target in panel.targets
    ]
    out.append(("annotations", None, DECISION_ANNOTATION))
    return out

"""What the plugin shows (pure): a SpecServe object -> the data of each view (for -o json|yaml) and its text."""

from __future__ import annotations

import copy
import re
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from specserve.api import reasons
from specserve.api.conditions import ABNORMAL_TRUE, DEGRADED, METRICS_AVAILABLE, SWITCHING, find_condition
from specserve.api.models import (
    Action,
    Condition,
    ConditionStatus,
    Decision,
    PendingKind,
    PendingMove,
    SpecServe,
    SpecServeStatus,
    Strategy,
)
from specserve.api.validation import InvalidSpecServe, parse_object
from specserve.policy.curves import ModeCurves, crossover, curves_from_spec
from specserve.policy.knobs import knobs_from_spec
from specserve.policy.pause import PausedDecide, is_paused
from specserve.policy.switching import decide
from specserve.policy.types import PoolSignal, Sample
from specserve.switching.state import pending_out, resume

JSON = dict[str, Any]
LAST_DECISIONS = 3

# Conditions whose False (or, for these, True) is the normal state.
FINE_REASONS = {
    reasons.NOT_USED,
    reasons.INACTIVE,
    reasons.NOT_REQUESTED,
    reasons.NOT_EVALUATED,
    reasons.STABLE,
    reasons.SETTLED,
    reasons.AS_EXPECTED,
}


class ViewError(ValueError):
    """The object cannot be shown (worded for the user)."""


@dataclass(frozen=True)
class Loaded:
    body: JSON
    obj: SpecServe
    status: SpecServeStatus
    unknown: tuple[str, ...] = field(default=())  # fields this plugin does not know, left out of what it shows

    @property
    def key(self) -> str:
        return f"{self.obj.metadata.namespace}/{self.obj.metadata.name}"


UNKNOWN_FIELD = "unknown field;"  # how validation words extra_forbidden
MAX_UNKNOWN = 50  # passes of leaving fields out; an object with more is not one this plugin can show
UPGRADE = "upgrade the plugin to the operator's version (kubectl krew upgrade specserve, or pip install -U specserve)"
_INDEX = re.compile(r"^(.*)\[(\d+)\]$")


def load(body: JSON) -> Loaded:
    """The object as the views read it. The API server has accepted it, so a field this plugin does not know
    means the cluster's CRD is newer than the plugin: it is left out of the display (and named), not fatal."""
    unknown: list[str] = []
    current = body
    for _ in range(MAX_UNKNOWN):
        try:
            obj = parse_object(current)
            break
        except InvalidSpecServe as exc:
            extra = [e.field for e in exc.errors if e.message.startswith(UNKNOWN_FIELD)]
            if not extra:
                raise ViewError(f"specserve {_name(body)}: {_unreadable(exc)}") from exc
            current = _without(current, extra)
            unknown += extra
        except ValidationError as exc:
            raise ViewError(f"specserve {_name(body)}: {_unreadable(exc)}") from exc
    else:
        raise ViewError(f"specserve {_name(body)}: too many fields this plugin does not know; {UPGRADE}")
    try:
        status = SpecServeStatus.model_validate(body.get("status") or {})
    except ValidationError:
        status = SpecServeStatus()  # an unreadable status shows as empty, as the operator treats it
    return Loaded(body, obj, status, tuple(unknown))


def _unreadable(exc: Exception) -> str:
    # The API server accepted the object: a value this plugin refuses is most likely a newer operator's.
    return f"this plugin cannot read its spec ({exc}); if the operator is newer than the plugin, {UPGRADE}"


def _name(body: JSON) -> str:
    meta = body.get("metadata") or {}
    return f"{meta['namespace']}/{meta.get('name', '?')}" if meta.get("namespace") else str(meta.get("name", "?"))


def _without(body: JSON, paths: list[str]) -> JSON:
    """A copy of body without the fields at these dotted paths (spec.a.b, spec.list[2].c)."""
    out = copy.deepcopy(body)
    for path in paths:
        node: Any = out
        parts = path.split(".")
        for i, part in enumerate(parts):
            found = _INDEX.match(part)
            key, index = (found.group(1), int(found.group(2))) if found else (part, None)
            last = i == len(parts) - 1 and index is None
            if not isinstance(node, dict) or key not in node:
                break
            if last:
                del node[key]
                break
            node = node[key]
            if index is not None:
                if not isinstance(node, list) or index >= len(node):
                    break
                if i == len(parts) - 1:
                    del node[index]
                    break
                node = node[index]
    return out


def unknown_note(item: Loaded) -> str | None:
    """One line naming the fields left out, and the fix (None: the plugin knows every field)."""
    if not item.unknown:
        return None
    return f"note: {item.key} has fields this plugin does not know ({', '.join(item.unknown)}), not shown; {UPGRADE}"


def not_fine(conditions: list[Condition]) -> list[Condition]:
    out = []
    for c in conditions:
        if c.reason in FINE_REASONS:
            continue
        if c.type in ABNORMAL_TRUE:
            if c.status == ConditionStatus.TRUE or c.reason == reasons.PAUSED:
                out.append(c)
        elif c.status != ConditionStatus.TRUE:
            out.append(c)
    return out


def crossover_of(obj: SpecServe) -> tuple[float | None, ModeCurves | None]:
    """The crossover per replica the policy uses (the spec's, else the curves'), and the curves."""
    curves = curves_from_spec(obj.spec.switching)
    cross = obj.spec.switching.crossover_concurrency
    if cross is None and curves is not None:
        cross = crossover(curves)
    return cross, curves


def ready_replicas(status: SpecServeStatus) -> int:
    return sum(p.ready for p in status.pools)


def _decision(d: Decision) -> JSON:
    return d.model_dump(mode="json", by_alias=True, exclude_none=True)


# ------------------------------------------------------------------------------------------------------ status


def status_data(item: Loaded) -> JSON:
    obj, st = item.obj, item.status
    cross, _ = crossover_of(obj)
    ready = ready_replicas(st)
    demand = st.load.concurrency if st.load is not None else None
    return {
        "namespace": obj.metadata.namespace,
        "name": obj.metadata.name,
        "strategy": obj.spec.strategy.value,
        "mode": st.active_mode.value if st.active_mode is not None else None,
        "weights": st.weights.model_dump() if st.weights is not None else None,
        "paused": is_paused(obj.metadata.annotations),
        "advisory": obj.spec.switching.advisory,
        "pools": [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in st.pools],
        "demand": demand,
        "crossoverPerReplica": cross,
        "crossoverTotal": round(cross * ready, 2) if cross is not None and ready else None,
        "conditionsNotFine": [
            {"type": c.type, "status": c.status.value, "reason": c.reason, "message": c.message}
            for c in not_fine(st.conditions)
        ],
        "lastDecisions": [_decision(d) for d in st.history[-LAST_DECISIONS:]],
    }


def status_text(data: JSON) -> str:
    lines = [f"SpecServe {data['namespace']}/{data['name']}  ({data['strategy']})"]
    serving = f"  serving:    {data['mode'] or 'not yet'}"
    if data["weights"] is not None:
        w = data["weights"]
        serving += f"   weights speculative {w['speculative']} / baseline {w['baseline']}"
    if data["paused"]:
        serving += "   PAUSED (kubectl specserve resume to switch again)"
    if data["advisory"]:
        serving += "   advisory (decisions recorded, not acted on)"
    lines.append(serving)
    for p in data["pools"]:
        pool = f"  pool:       {p['role']:<12} {p['name']:<32} ready {p['ready']}/{p['desired']}"
        if p["updated"] < p["desired"]:
            pool += f"  updated {p['updated']}/{p['desired']}"
        failure = p.get("failure")
        if failure:
            pool += f"  FAILING {failure['reason']}: {failure.get('message', '')}"
        lines.append(pool)
    demand, total, per = data["demand"], data["crossoverTotal"], data["crossoverPerReplica"]
    load = f"  demand:     {demand:g} in flight" if demand is not None else "  demand:     unknown"
    if per is not None:
        load += f"   crossover {per:g}/replica"
        if total is not None:
            side = (
                ""
                if demand is None
                else ("  (above: baseline wins)" if demand > total else "  (below: speculation wins)")
            )
            load += f" = {total:g} for the Ready replicas{side}"
    else:
        load += "   no crossover (no curves, no crossoverConcurrency: holding initialMode)"
    lines.append(load)
    if data["conditionsNotFine"]:
        lines.append("  conditions not fine:")
        lines += [f"    {c['type']}={c['status']} {c['reason']}: {c['message']}" for c in data["conditionsNotFine"]]
    else:
        lines.append("  conditions: all fine")
    if data["lastDecisions"]:
        lines.append("  last decisions:")
        lines += [f"    {_decision_line(d)}" for d in reversed(data["lastDecisions"])]
    else:
        lines.append("  last decisions: none yet")
    return "\n".join(lines)


def _decision_line(d: JSON) -> str:
    weights = d.get("weights")
    target = f"weights {weights['speculative']}/{weights['baseline']}" if weights else d["toMode"]
    applied = "" if d.get("applied", True) else " (advisory, not applied)"
    return f"{d['time']}  {d.get('action') or '-'} -> {target}{applied}: {d['reason']}"


# ----------------------------------------------------------------------------------------------------- history


def history_data(item: Loaded) -> list[JSON]:
    return [_decision(d) for d in item.status.history]


def history_text(rows: list[JSON]) -> str:
    if not rows:
        return "No decisions recorded yet."
    header = ("TIME", "ACTION", "FROM", "TO", "WEIGHTS", "DEMAND", "APPLIED", "REASON")
    table = [header]
    for d in rows:
        w = d.get("weights")
        table.append((
            d["time"], d.get("action") or "-", d.get("fromMode") or "-", d["toMode"],
            f"{w['speculative']}/{w['baseline']}" if w else "-",
            f"{d['concurrency']:g}" if d.get("concurrency") is not None else "-",
            "yes" if d.get("applied", True) else "no", d["reason"],
        ))  # fmt: skip
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row[:-1])) + "  " + str(row[-1]) for row in table
    )


# ----------------------------------------------------------------------------------------------------- explain


@dataclass(frozen=True)
class Point:
    demand: float | None  # requests in flight, total
    replicas: int  # Ready replicas the demand spreads over
    per_replica: float | None
    speculative_tps: float | None  # tokens/s per replica of each mode at that point, from the curves
    baseline_tps: float | None


def operating_point(item: Loaded, curves: ModeCurves | None, demand: float | None = None) -> Point:
    if demand is None and item.status.load is not None:
        demand = item.status.load.concurrency
    replicas = ready_replicas(item.status) or _spec_replicas(item.obj)
    per = demand / replicas if demand is not None and replicas else None
    if curves is None or per is None:
        return Point(demand, replicas, per, None, None)
    return Point(demand, replicas, per, round(curves.speculative.at(per), 1), round(curves.baseline.at(per), 1))


def _spec_replicas(obj: SpecServe) -> int:
    pools = obj.spec.pools
    base = pools.baseline.replicas if obj.spec.strategy is Strategy.TRAFFIC_SPLIT else 0
    return pools.speculative.replicas + base


def explain_data(item: Loaded) -> JSON:
    cross, curves = crossover_of(item.obj)
    point = operating_point(item, curves)
    last = item.status.last_decision
    return {
        "namespace": item.obj.metadata.namespace,
        "name": item.obj.metadata.name,
        "strategy": item.obj.spec.strategy.value,
        "lastDecision": _decision(last) if last is not None else None,
        "curves": None
        if curves is None
        else {
            "source": "modelled from crossoverConcurrency" if curves.modelled else "measured (spec.switching.curves)",
            "speculative": [list(p) for p in curves.speculative.points()],
            "baseline": [list(p) for p in curves.baseline.points()],
        },
        "crossoverPerReplica": cross,
        "operatingPoint": {
            "demand": point.demand,
            "readyReplicas": point.replicas,
            "perReplica": round(point.per_replica, 2) if point.per_replica is not None else None,
            "speculativeTokensPerSecond": point.speculative_tps,
            "baselineTokensPerSecond": point.baseline_tps,
        },
        "paused": is_paused(item.obj.metadata.annotations),
        "blocked": blocked(item),
        "memory": _memory(item),
        "learning": _learning(item),
    }


def blocked(item: Loaded) -> list[str]:
    """What stops switching from acting now, from the conditions and the pause annotation (empty: nothing)."""
    conditions = item.status.conditions
    out = []
    metrics = find_condition(conditions, METRICS_AVAILABLE)
    if metrics is not None and metrics.status == ConditionStatus.FALSE:
        out.append(f"load unknown (MetricsAvailable=False {metrics.reason}: {metrics.message}): switching holds")
    degraded = find_condition(conditions, DEGRADED)
    if degraded is not None and degraded.status == ConditionStatus.TRUE:
        out.append(f"Degraded ({degraded.reason}: {degraded.message})")
    switching = find_condition(conditions, SWITCHING)
    if is_paused(item.obj.metadata.annotations) or (switching is not None and switching.reason == reasons.PAUSED):
        out.append("paused (kubectl specserve resume to switch again): only failover off a dead pool acts")
    return out


def _learning(item: Loaded) -> JSON | None:
    """What the switching loop learned (status.learning), next to the calibrated curves, and the forecast's trust."""
    learned = item.status.learning
    saved = item.status.switching
    forecast = (
        None
        if saved is None or saved.forecast_trust is None
        else {"error": saved.forecast_error, "trust": saved.forecast_trust}
    )
    if learned is None and forecast is None:
        return None
    data: JSON = {"forecast": forecast}
    if learned is not None:
        data |= {
            "lastUpdate": learned.last_update,
            "crossover": learned.crossover.model_dump(exclude_none=True),
            "coverage": {"speculative": learned.speculative.coverage, "baseline": learned.baseline.coverage},
            "acceptLength": learned.accept_length,
            "acceptLengthReference": learned.accept_length_reference,
            "modelScale": learned.model_scale,
            "lastDrift": learned.last_drift.model_dump(mode="json") if learned.last_drift else None,
        }
    return data


def _learning_lines(learning: JSON, strategy: str) -> list[str]:
    lines: list[str] = []
    if "lastUpdate" in learning:
        cross = learning["crossover"]
        calibrated, effective = cross.get("calibrated"), cross.get("effective")
        # Adaptive re-renders from the calibrated curves; the others decide with the learned ones (docs/learning.md)
        adaptive = strategy == "Adaptive"
        used = "learned (not used: Adaptive renders from the calibrated curves)" if adaptive else "decided with"
        lines.append(
            f"Learned curves (updated {learning['lastUpdate']}): crossover per replica "
            f"{_num(effective)} {used}, {_num(calibrated)} calibrated"
        )
        for mode, span in learning["coverage"].items():
            where = f"confident from {span[0]:g} to {span[1]:g} per replica" if span else "no confident range yet"
            lines.append(f"  {mode}: {where} (calibrated elsewhere)")
        if learning["acceptLength"] is not None and learning["acceptLengthReference"] is not None:
            lines.append(
                f"  accept length {learning['acceptLength']:.2f} (curves normalised to "
                f"{learning['acceptLengthReference']:.2f})"
            )
        if learning.get("modelScale") is not None:
            lines.append(
                f"  units: {learning['modelScale']:.1f} tok/s per model unit, from the pools' readings (curves "
                "modelled on crossoverConcurrency; calibrate to measure them)"
            )
        drift = learning["lastDrift"]
        if drift is not None:
            lines.append(f"  last drift: {drift['mode']} at {drift['time']}, {drift['shift']:+.0%} off the curve")
    forecast = learning["forecast"]
    if forecast is not None:
        error = "not scored yet" if forecast["error"] is None else f"recent error {forecast['error']:.0%}"
        lines.append(f"Forecast (yesterday / last week): {error}, trust {forecast['trust']:.2f}")
    return lines


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _memory(item: Loaded) -> JSON | None:
    """The policy's memory in status.switching that explains a Hold: a pending wish, regret, the budget."""
    saved = item.status.switching
    if saved is None:
        return None
    return {
        "mode": saved.mode.value,
        "modeSince": saved.mode_since,
        "lastSwitch": saved.last_switch,
        "pending": _pending_words(saved.pending),
        "pendingSince": saved.pending.since if saved.pending else None,
        "regret": round(saved.regret, 1),
        "restarts24h": len(saved.restarts),
        "restartBudget": item.obj.spec.switching.max_restarts_per_day,
        "barred": [f"{b.mode.value} until {b.until}: {b.reason}" for b in saved.barred],
    }


def _pending_words(pending: PendingMove | None) -> str | None:
    """A pending move in the words the views print: "w=40", "Restart->Baseline" or "crossover=64.00"."""
    if pending is None:
        return None
    if pending.speculative_weight is not None:
        return f"w={pending.speculative_weight}"
    if pending.action is Action.RECONFIGURE and pending.adaptive_crossover is not None:
        return f"crossover={pending.adaptive_crossover:.2f}"
    if pending.action is not None and pending.mode is not None:
        return f"{pending.action}->{pending.mode.value}"
    return pending.kind.value


def _memory_lines(memory: JSON, strategy: str) -> list[str]:
    lines = [f"Policy memory: serving {memory['mode']} since {memory['modeSince']}"
             + (f", last switch {memory['lastSwitch']}" if memory["lastSwitch"] else "")]  # fmt: skip
    if memory["pending"]:
        lines.append(f"  waiting: {memory['pending']} since {memory['pendingSince']} (stabilization window)")
    if strategy == Strategy.RESTART:
        lines.append(
            f"  regret {memory['regret']:g} tokens (a restart when it covers the restart cost); "
            f"restarts in 24 h: {memory['restarts24h']} of {memory['restartBudget']}"
        )
    lines += [f"  barred: {b}" for b in memory["barred"]]
    return lines


def explain_text(data: JSON) -> str:
    lines = [f"SpecServe {data['namespace']}/{data['name']} ({data['strategy']})"]
    last = data["lastDecision"]
    if last is None:
        lines.append("No decision yet: the switching loop has not changed anything since it started.")
    else:
        advisory = "" if last.get("applied", True) else " (advisory, not applied)"
        move = f"{last.get('action') or '-'} {last.get('fromMode') or '-'} -> {last['toMode']}"
        lines.append(f"Last decision, {last['time']}: {move}{advisory}")
        lines.append(f"  why: {last['reason']}")
        if last.get("concurrency") is not None:
            lines.append(f"  demand then: {last['concurrency']:g} requests in flight")
    point = data["operatingPoint"]
    cross = data["crossoverPerReplica"]
    if point["perReplica"] is not None:
        lines.append(
            f"Now: {point['demand']:g} in flight over {point['readyReplicas']} Ready replica(s) = "
            f"{point['perReplica']:g} per replica"
            + (f"; crossover {cross:g} per replica" if cross is not None else "; no crossover")
        )
    elif data["blocked"]:
        lines.append("Now: demand unknown")
    else:
        lines.append("Now: demand unknown (no load recorded in status yet)")
    if data["blocked"]:
        lines.append("Switching is blocked:")
        lines += [f"  {why}" for why in data["blocked"]]
    spec_tps, base_tps = point["speculativeTokensPerSecond"], point["baselineTokensPerSecond"]
    if spec_tps is not None and base_tps is not None:
        better = "speculation" if spec_tps > base_tps else "baseline"
        ratio = spec_tps / base_tps if base_tps else float("inf")
        lines.append(
            f"At this point the curves give speculative {spec_tps:g} vs baseline {base_tps:g} tokens/s per replica "
            f"({ratio:.2f}x): {better} serves more."
        )
    if data["memory"] is not None:
        lines += _memory_lines(data["memory"], data["strategy"])
    if data["learning"] is not None:
        lines += _learning_lines(data["learning"], data["strategy"])
    if data["curves"] is not None:
        lines.append(f"Curves: {data['curves']['source']}.")
    else:
        lines.append("Curves: none (run `specserve bench` and `specserve calibrate`).")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------- what-if


def what_if(item: Loaded, demand: float, now: float | None = None) -> JSON:
    """What the policy would decide now at `demand`, from the live state in status (pure: nothing is written).
    One evaluation: a stabilization window that has not run yet shows as a Hold with the wish pending."""
    now = time.time() if now is None else now
    obj, st = item.obj, item.status
    state = resume(obj, st, now)
    ready = {p.role: p.ready for p in st.pools}
    n_spec, n_base = obj.spec.pools.speculative.replicas, obj.spec.pools.baseline.replicas
    baseline: PoolSignal | None = None
    if obj.spec.strategy is Strategy.TRAFFIC_SPLIT:
        speculative = PoolSignal(ready_replicas=ready.get("speculative", n_spec))
        baseline = PoolSignal(ready_replicas=ready.get("baseline", n_base))
    else:
        speculative = PoolSignal(ready_replicas=ready.get("engine", n_spec))
    sample = Sample(time=now, demand=demand, speculative=speculative, baseline=baseline)
    paused = is_paused(obj.metadata.annotations)
    decider = PausedDecide(decide) if paused else decide
    _, curves = crossover_of(obj)
    verdict = decider(knobs_from_spec(obj), curves, state, sample)
    point = operating_point(item, curves, demand)
    return {
        "namespace": obj.metadata.namespace,
        "name": obj.metadata.name,
        "demand": demand,
        "current": {"mode": state.mode.value, "weights": state.weights.model_dump() if state.weights else None},
        "action": verdict.action.value,
        "mode": verdict.mode.value,
        "weights": verdict.weights.model_dump() if verdict.weights is not None else None,
        "applied": verdict.applied,
        "reason": verdict.reason,
        "pending": _pending_words(pending_out(verdict.state.pending)),
        "pendingKind": verdict.state.pending.kind.value if verdict.state.pending else None,
        "paused": paused,
        "speculativeTokensPerSecond": point.speculative_tps,
        "baselineTokensPerSecond": point.baseline_tps,
    }


def what_if_text(data: JSON) -> str:
    current = data["current"]
    now = current["mode"] + (f" (weights {_w(current['weights'])})" if current["weights"] else "")
    target = data["mode"] + (f" (weights {_w(data['weights'])})" if data["weights"] else "")
    lines = [f"At demand {data['demand']:g}, {data['namespace']}/{data['name']} now serving {now}:"]
    if data["action"] == Action.HOLD:
        lines.append(f"  Hold: stays {now}")
    else:
        lines.append(f"  {data['action']} -> {target}" + ("" if data["applied"] else " (advisory: recorded only)"))
    lines.append(f"  because: {data['reason']}")
    pending = data["pending"]
    if pending and data["pendingKind"] == PendingKind.MOVING:
        lines.append(f"  then: {pending} (the move steps on over the next evaluations)")
    elif pending:
        lines.append(f"  pending: {pending} (waits for its stabilization window)")
    if data["speculativeTokensPerSecond"] is not None:
        lines.append(
            f"  curves at that demand: speculative {data['speculativeTokensPerSecond']:g} vs baseline "
            f"{data['baselineTokensPerSecond']:g} tokens/s per replica"
        )
    lines.append("  (nothing was written: this is the policy's answer on the live state)")
    return "\n".join(lines)


def _w(weights: JSON) -> str:
    return f"{weights['speculative']}/{weights['baseline']}"

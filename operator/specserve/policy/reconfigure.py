"""Adaptive: the engine turns drafting off by batch size by itself (SGLang's --speculative-adaptive); the
operator only keeps the config's crossover current. It re-renders the config (which rolls the pods) only when the
crossover moves by more than the dead band relative to the one the rendered config was computed from
(state.adaptive_crossover), so re-measured curves that differ by noise roll nothing."""

from __future__ import annotations

from dataclasses import replace

from specserve.api.models import Mode, Rule
from specserve.policy.curves import ModeCurves, better_mode, crossover
from specserve.policy.rollback import active_bar
from specserve.policy.step import Step, hold
from specserve.policy.types import Action, Knobs, PolicyState, Sample


def engine_notes(sample: Sample) -> tuple[str, ...]:
    pool = sample.speculative
    if pool is None:
        return ()
    notes = []
    if pool.spec_num_steps is not None:
        off = " (drafting off)" if pool.spec_num_steps == 0 else ""
        notes.append(f"active speculative steps {pool.spec_num_steps:g}{off}")
    if pool.accept_length is not None:
        notes.append(f"accept length {pool.accept_length:.2f}")
    return tuple(notes)


DRAFT_NEVER = 1.0  # a crossover at one request: drafting off at every batch size
DRAFT_ALWAYS = 4096.0  # past SGLang's largest CUDA-graph capture size (render.adaptive): drafting at every batch


def everywhere(curves: ModeCurves) -> Mode | None:
    """The mode that serves at least as much at every measured concurrency (and more at some), if one does."""
    grid = sorted(set(curves.speculative.xs) | set(curves.baseline.xs))
    diffs = [curves.rate(Mode.SPECULATIVE, x) - curves.rate(Mode.BASELINE, x) for x in grid]
    if all(d >= 0 for d in diffs) and any(d > 0 for d in diffs):
        return Mode.SPECULATIVE
    if all(d <= 0 for d in diffs) and any(d < 0 for d in diffs):
        return Mode.BASELINE
    return None


def decide_adaptive(knobs: Knobs, curves: ModeCurves | None, state: PolicyState, sample: Sample) -> Step:
    held = replace(state, pending=None)
    notes = engine_notes(sample)
    if knobs.adaptive_explicit:
        return hold(held, "spec.speculative.adaptiveConfig is set: the engine follows it, nothing to re-render", notes)
    c = knobs.crossover if knobs.crossover is not None else (crossover(curves) if curves is not None else None)
    if c is None:
        if curves is None:
            return hold(held, "no curves and no crossoverConcurrency: the engine keeps its config", notes)
        wins = everywhere(curves)
        if wins is None:
            mode = better_mode(curves)
            return hold(held, f"the curves give no crossover ({mode} wins overall): the engine keeps its config", notes)
        # one mode wins at every measured concurrency: a config that drafts always, or never (SGLang's default
        # drafts at small batches, which on seed-like hardware loses to a plain engine at every load)
        c = DRAFT_ALWAYS if wins is Mode.SPECULATIVE else DRAFT_NEVER
    previous = state.adaptive_crossover
    if previous is not None and abs(c - previous) <= knobs.hysteresis * previous:
        return hold(
            held,
            f"crossover {c:.1f} is within ±{knobs.hysteresis:g} of the rendered {previous:.1f}: config unchanged",
            notes,
        )
    bar = active_bar(state.barred, state.mode, sample.time)
    if bar is not None:
        return hold(
            held,
            f"crossover {c:.1f} moved from the rendered one, but re-rendering is barred for "
            f"{bar.until - sample.time:.0f} s more: the last re-rendered config did not roll out ({bar.reason})",
            notes,
        )
    was = f"{previous:.1f}" if previous is not None else "none"
    return Step(
        held=held,
        action=Action.RECONFIGURE,
        reason=f"crossover {c:.1f} moved from {was} by more than ±{knobs.hysteresis:g}: re-render the adaptive config",
        # the config that served is the rollback point until the new one has rolled out (policy.rollback)
        changed=replace(held, adaptive_crossover=c, served_crossover=previous, last_switch=sample.time),
        mode=state.mode,
        adaptive_crossover=c,
        notes=notes,
        rule=Rule.RECONFIGURE,
    )

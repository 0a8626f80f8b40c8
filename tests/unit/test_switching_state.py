"""PolicyState <-> status.switching, and what is worth an API write."""

from __future__ import annotations

from dataclasses import replace

from specserve.api.models import Mode, SpecServeStatus, Weights
from specserve.api.validation import parse_object
from specserve.policy.types import PolicyState
from specserve.switching.state import epoch, from_status, resume, rfc3339, to_status, worth_writing

T = 1_800_000_000.0


def full_state() -> PolicyState:
    return PolicyState(
        mode=Mode.BASELINE,
        mode_since=T,
        weights=Weights(speculative=25, baseline=75),
        last_switch=T + 1.5,
        regret=1234.5,
        restarts=(T - 3600, T - 60.25),
        pending="w=0",
        pending_since=T + 2,
        unknown_streak=2,
        last_evaluation=T + 3.125,
        adaptive_crossover=24.0,
    )


def test_round_trip_through_status_json_is_exact() -> None:
    state = full_state()
    saved = to_status(state)
    wire = SpecServeStatus(switching=saved).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["switching"]["modeSince"] == "2027-01-15T08:00:00Z"
    assert wire["switching"]["lastSwitch"] == "2027-01-15T08:00:01.500Z"
    back = from_status(SpecServeStatus.model_validate(wire).switching)  # type: ignore[arg-type]
    assert back == state


def test_rfc3339_is_utc_to_the_millisecond() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00Z"
    assert epoch(rfc3339(T + 0.0004)) == T
    assert epoch("2027-01-15T08:00:00+00:00") == T


def test_resume_starts_from_status_or_from_initial_mode(kimi_doc: dict[str, object]) -> None:
    obj = parse_object(kimi_doc)
    first = resume(obj, SpecServeStatus(), T)
    assert (first.mode, first.mode_since, first.weights) == (Mode.BASELINE, T, Weights(speculative=0, baseline=100))
    saved = full_state()
    assert resume(obj, SpecServeStatus(switching=to_status(saved)), T + 99) == saved  # an operator restart


def test_volatile_fields_alone_are_not_worth_a_write() -> None:
    state = full_state()
    assert not worth_writing(state, replace(state, last_evaluation=T + 60, unknown_streak=0))
    assert worth_writing(state, replace(state, pending=None, pending_since=None))
    assert worth_writing(state, replace(state, weights=Weights(speculative=0, baseline=100)))


def test_regret_is_written_geometrically() -> None:
    state = replace(full_state(), regret=1000.0)
    assert not worth_writing(state, replace(state, regret=1200.0))
    assert worth_writing(state, replace(state, regret=1400.0))
    assert worth_writing(state, replace(state, regret=0.0))  # a reset always

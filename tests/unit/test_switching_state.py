"""PolicyState <-> status.switching, and what is worth an API write."""

from __future__ import annotations

from dataclasses import replace

from specserve.api.models import Mode, SpecServeStatus, Weights
from specserve.api.validation import parse_object
from specserve.clock import epoch
from specserve.policy.types import Action, Bar, Pending, PendingKind, PolicyState
from specserve.switching.state import from_status, resume, status_time, to_status, worth_writing

T = 1_800_000_000.0


def full_state() -> PolicyState:
    return PolicyState(
        mode=Mode.BASELINE,
        mode_since=T,
        weights=Weights(speculative=25, baseline=75),
        last_switch=T + 1.5,
        regret=1234.5,
        restarts=(T - 3600, T - 60.25),
        pending=Pending(PendingKind.WAITING, T + 2, weight=0),
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


def test_a_status_time_is_utc_to_the_millisecond() -> None:
    assert status_time(0) == "1970-01-01T00:00:00Z"
    assert epoch(status_time(T + 0.0004)) == T
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
    assert worth_writing(state, replace(state, pending=None))
    assert worth_writing(state, replace(state, weights=Weights(speculative=0, baseline=100)))


def test_regret_is_written_geometrically() -> None:
    state = replace(full_state(), regret=1000.0)
    assert not worth_writing(state, replace(state, regret=1200.0))
    assert worth_writing(state, replace(state, regret=1400.0))
    assert worth_writing(state, replace(state, regret=0.0))  # a reset always


def test_advice_and_bars_round_trip_too() -> None:
    advised = Pending(PendingKind.ADVISED, T + 2, None, Action.RESTART, Mode.SPECULATIVE)
    state = replace(full_state(), pending=advised, barred=(Bar(Mode.SPECULATIVE, T + 600, 2, "OOMKilled"),))
    wire = SpecServeStatus(switching=to_status(state)).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["switching"]["pending"] == {"kind": "Advised", "since": "2027-01-15T08:00:02Z", "action": "Restart",
                                            "mode": "Speculative"}  # fmt: skip
    back = SpecServeStatus.model_validate(wire).switching
    assert back is not None and from_status(back) == state


def test_a_status_written_before_the_typed_pending_move_keeps_its_wish() -> None:
    since = "2027-01-15T08:00:02Z"
    legacy = {"mode": "Baseline", "modeSince": "2027-01-15T08:00:00Z"}
    cases = {
        "w=40": Pending(PendingKind.WAITING, T + 2, weight=40),
        "moving w=40": Pending(PendingKind.MOVING, T + 2, weight=40),
        "advised w=40": Pending(PendingKind.ADVISED, T + 2, weight=40, action=Action.SET_WEIGHTS),
        "advised Restart->Speculative": Pending(
            PendingKind.ADVISED, T + 2, action=Action.RESTART, mode=Mode.SPECULATIVE
        ),
        "advised crossover=64.00": Pending(PendingKind.ADVISED, T + 2, action=Action.RECONFIGURE, crossover=64.0),
        "something else": None,
    }
    for text, pending in cases.items():
        status = SpecServeStatus.model_validate({"switching": {**legacy, "pending": text, "pendingSince": since}})
        assert status.switching is not None and from_status(status.switching).pending == pending, text

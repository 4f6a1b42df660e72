"""The task state machine."""

from __future__ import annotations

import itertools

import pytest

from mesh.a2a import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    TRANSITIONS,
    TaskState,
    can_transition,
    check_transition,
    is_terminal,
)
from mesh.errors import IllegalTransitionError, ProtocolError

S = TaskState

# Written out edge by edge so the table in states.py is checked against a second copy.
ALLOWED = {
    # the seed's diagram
    (S.submitted, S.working),
    (S.submitted, S.rejected),
    (S.submitted, S.auth_required),
    (S.working, S.completed),
    (S.working, S.failed),
    (S.working, S.input_required),
    (S.working, S.canceled),
    (S.input_required, S.working),
    (S.input_required, S.canceled),
    (S.auth_required, S.working),
    (S.auth_required, S.rejected),
    (S.unknown, S.working),
    (S.unknown, S.failed),
    # added: cancel any non-terminal task, fail before work starts
    (S.submitted, S.canceled),
    (S.submitted, S.failed),
    (S.auth_required, S.canceled),
    # added: answer at once (no working first); reject or ask for authentication once working
    (S.submitted, S.completed),
    (S.submitted, S.input_required),
    (S.working, S.rejected),
    (S.working, S.auth_required),
    # same-state updates of non-terminal states
    (S.submitted, S.submitted),
    (S.working, S.working),
    (S.input_required, S.input_required),
    (S.auth_required, S.auth_required),
    (S.unknown, S.unknown),
}


def test_every_state_has_an_entry() -> None:
    assert set(TRANSITIONS) == set(TaskState)


@pytest.mark.parametrize(("current", "new"), sorted(ALLOWED))
def test_allowed_transitions(current: TaskState, new: TaskState) -> None:
    assert can_transition(current, new)
    check_transition(current, new)


def test_table_is_exactly_the_allowed_set() -> None:
    table = {(c, n) for c, nexts in TRANSITIONS.items() for n in nexts}
    assert table == ALLOWED
    forbidden = set(itertools.product(TaskState, TaskState)) - ALLOWED
    assert all(not can_transition(c, n) for c, n in forbidden)


@pytest.mark.parametrize(
    ("current", "new"),
    [
        (S.working, S.submitted),
        (S.input_required, S.completed),
        (S.input_required, S.failed),
        (S.auth_required, S.completed),
        (S.unknown, S.completed),
        (S.completed, S.working),
        (S.failed, S.failed),
        (S.canceled, S.working),
        (S.rejected, S.submitted),
    ],
)
def test_forbidden_transitions_raise(current: TaskState, new: TaskState) -> None:
    assert not can_transition(current, new)
    with pytest.raises(IllegalTransitionError):
        check_transition(current, new)


def test_terminal_states_have_no_way_out() -> None:
    assert {S.completed, S.failed, S.canceled, S.rejected} == TERMINAL_STATES
    for state in TaskState:
        assert is_terminal(state) == (state in TERMINAL_STATES)
        assert (TRANSITIONS[state] == frozenset()) == (state in TERMINAL_STATES)


def test_interrupted_states() -> None:
    assert {S.input_required, S.auth_required} == INTERRUPTED_STATES
    assert not INTERRUPTED_STATES & TERMINAL_STATES


def test_error_names_both_states_and_the_allowed_ones() -> None:
    with pytest.raises(IllegalTransitionError) as info:
        check_transition(S.input_required, S.completed)
    exc = info.value
    assert isinstance(exc, ProtocolError) and isinstance(exc, ValueError)
    assert str(exc) == (
        "illegal task transition 'input-required' -> 'completed'; from 'input-required' the "
        "allowed next states are: canceled, input-required, working"
    )
    assert (exc.current, exc.new) == ("input-required", "completed")


def test_error_from_a_terminal_state() -> None:
    with pytest.raises(IllegalTransitionError, match=r"allowed next states are: none \(terminal state\)"):
        check_transition("completed", "working")


def test_wire_strings_are_accepted_and_unknown_ones_rejected() -> None:
    assert can_transition("working", "input-required")
    assert is_terminal("canceled")
    with pytest.raises(ValueError):
        can_transition("working", "cancelled")

"""The A2A task state machine, as data.

:data:`TRANSITIONS` maps every :class:`TaskState` to the states it may move to next. It is the
state diagram of the A2A types (seed ``a2a-python-types``) plus three edges the diagram leaves
out, plus a self-loop on every non-terminal state (a ``working`` -> ``working`` update carries
a new progress message). Terminal states have no way out.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..errors import IllegalTransitionError
from .tasks import TaskState

_S = TaskState

# The seed's state diagram, edge for edge.
_DIAGRAM: dict[TaskState, frozenset[TaskState]] = {
    _S.submitted: frozenset({_S.working, _S.rejected, _S.auth_required}),
    _S.working: frozenset({_S.completed, _S.failed, _S.input_required, _S.canceled}),
    _S.input_required: frozenset({_S.working, _S.canceled}),
    _S.auth_required: frozenset({_S.working, _S.rejected}),
    _S.unknown: frozenset({_S.working, _S.failed}),
    _S.completed: frozenset(),
    _S.failed: frozenset(),
    _S.canceled: frozenset(),
    _S.rejected: frozenset(),
}

# tasks/cancel applies to any non-terminal task, and a task can fail before its work starts
# (the handler crashes, a delegate is unreachable); the diagram has no edge for either. An
# agent may also answer at once, with no working state first (completed, or input needed),
# and reject a task or ask for authentication once its work has started.
_ADDED: dict[TaskState, frozenset[TaskState]] = {
    _S.submitted: frozenset({_S.canceled, _S.failed, _S.completed, _S.input_required}),
    _S.working: frozenset({_S.rejected, _S.auth_required}),
    _S.auth_required: frozenset({_S.canceled}),
}

#: States a task never leaves.
TERMINAL_STATES: frozenset[TaskState] = frozenset(s for s, nxt in _DIAGRAM.items() if not nxt)

#: States in which the task waits for the client (input or authentication).
INTERRUPTED_STATES: frozenset[TaskState] = frozenset({_S.input_required, _S.auth_required})

#: Allowed next states of every state.
TRANSITIONS: Mapping[TaskState, frozenset[TaskState]] = MappingProxyType(
    {state: nxt | _ADDED.get(state, frozenset()) | ({state} - TERMINAL_STATES) for state, nxt in _DIAGRAM.items()}
)


def is_terminal(state: TaskState | str) -> bool:
    """True for completed, failed, canceled and rejected."""
    return TaskState(state) in TERMINAL_STATES


def can_transition(current: TaskState | str, new: TaskState | str) -> bool:
    """Whether a task in ``current`` may move to ``new``."""
    return TaskState(new) in TRANSITIONS[TaskState(current)]


def check_transition(current: TaskState | str, new: TaskState | str) -> None:
    """Raise :class:`~mesh.errors.IllegalTransitionError` unless ``current`` -> ``new`` is legal."""
    current, new = TaskState(current), TaskState(new)
    allowed = TRANSITIONS[current]
    if new not in allowed:
        raise IllegalTransitionError(current.value, new.value, frozenset(s.value for s in allowed))

"""What comes back from a call, parsed once: :class:`Answer`.

Every answer to a call (a stream event on its status topic, or the final JSON-RPC response on
its reply topic) is read by :func:`read_answer` exactly once, in :mod:`mesh.calls`:

- the payload is decoded and its JSON-RPC envelope checked (:func:`mesh.a2a.parse_response`);
- an error response raises its :class:`~mesh.a2a.RpcError` (the subclass of its code);
- anything malformed raises :class:`~mesh.a2a.InvalidAgentResponse`;
- a success becomes an :class:`Answer` holding the ``result`` as decoded JSON (``.json``) and
  validating it into the A2A types only when asked (``.value``, ``.parse(model)``), once.

Why lazily: the gateway passes answers on as A2A 0.3 JSON (its E2A frames) and never needs
the models; validating and dumping them again cost ~45 us per answer (about 3 answers per
request), measured against ~14 us for the decode alone. Clients and delegating agents read
``.value`` and pay for the validation once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from mesh.a2a import (
    InvalidAgentResponse,
    JSONRPCErrorResponse,
    Message,
    RpcError,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
    parse_response,
    parse_result,
)
from mesh.a2a.parse import find_unserializable
from mesh.a2a.validation import format_validation_error, validation_error_details
from mesh.properties import MessageProperties

__all__ = ["Answer", "AnswerValue", "parse_model", "read_answer"]

M = TypeVar("M", bound=BaseModel)

#: What a task-shaped answer is: the final Task or Message, or a stream event.
AnswerValue = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent

_RESULT_TYPES = (Task, Message, TaskStatusUpdateEvent, TaskArtifactUpdateEvent)
_UNSET: Any = object()


@dataclass(eq=False, slots=True)
class Answer:
    """One successful answer of a call: a stream event (``final=False``) or the final answer."""

    final: bool
    #: The JSON-RPC ``result`` as decoded JSON (A2A 0.3 camelCase for tasks and events).
    json: Any
    #: The MQTT properties it came with (``a2aInstance`` and such are in ``extra``).
    properties: MessageProperties
    _value: Any = field(default=_UNSET, repr=False)

    @property
    def value(self) -> AnswerValue:
        """The result as Task, Message, status- or artifact-update (by ``kind``), validated once.

        Raises :class:`InvalidAgentResponse` naming the bad field.
        """
        if self._value is _UNSET:
            self._value = parse_result(self.json)
        return self._value  # type: ignore[no-any-return]

    def parse(self, model: type[M]) -> M:
        """The result as ``model`` (e.g. ``Task`` or ``TaskPushNotificationConfig``).

        A task-shaped ``model`` must match the result's ``kind``; anything that does not
        validate raises :class:`InvalidAgentResponse`.
        """
        if model not in _RESULT_TYPES:
            return parse_model(model, self.json)
        if not isinstance(self._value, model):
            self._value = parse_result(self.json, model)  # type: ignore[type-var]  # raises on another kind
        return self._value

    @property
    def task_id(self) -> str | None:
        """The id of the task this answer is about, read from the JSON (no validation)."""
        result = self.json
        if type(result) is not dict:
            return None
        task_id = result.get("id") if result.get("kind") == "task" else result.get("taskId")
        return task_id if isinstance(task_id, str) else None


#: How deep an answer may nest: far beyond any task an agent builds from requests bounded at
#: ``DEFAULT_MAX_DEPTH``, well below what would exhaust the stack of whoever re-encodes it.
MAX_ANSWER_DEPTH = 100


def read_answer(payload: bytes, properties: MessageProperties, *, final: bool) -> Answer:
    """Parse one answer; raises the :class:`RpcError` it carries, or :class:`InvalidAgentResponse`
    (also for an answer nested deeper than :data:`MAX_ANSWER_DEPTH`: a hostile agent or forger)."""
    response = parse_response(payload)
    # Deep nesting needs many brackets: only then is the decoded tree walked.
    if payload.count(b"{") + payload.count(b"[") > MAX_ANSWER_DEPTH:
        value = response.error.data if isinstance(response, JSONRPCErrorResponse) else response.result
        found = find_unserializable(value, "response", MAX_ANSWER_DEPTH, surrogates=False)
        if found is not None:
            where, reason = found
            raise InvalidAgentResponse(f"invalid response: {where}: {reason.partition(' (')[0]}")
    if isinstance(response, JSONRPCErrorResponse):
        raise RpcError.from_response(response)
    return Answer(final, response.result, properties)


def parse_model(model: type[M], data: Any) -> M:
    """``model`` validated from answer JSON; a mismatch is an :class:`InvalidAgentResponse`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidAgentResponse(
            f"invalid result: expected a {model.__name__}: {format_validation_error(exc, prefix='result')}",
            data={"errors": validation_error_details(exc, prefix="result")},
        ) from None

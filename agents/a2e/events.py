"""From A2E answers to the agent's updates: events in ``seq`` order, and the call's outcome."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agents.a2e.messages import (
    A2EError,
    A2EEvent,
    A2EMessage,
    ArtifactData,
    LogData,
    ProgressData,
    SkillCallResponse,
    StatusData,
)
from agents.updates import FileArtifact, Reply, Status, TextArtifact, Update

__all__ = ["CallFailure", "EventTranslator", "outcome"]

log = logging.getLogger(__name__)

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "warn": logging.WARNING}
_LEVELS |= {"error": logging.ERROR, "critical": logging.CRITICAL}


@dataclass(frozen=True, slots=True)
class CallFailure:
    """A call the worker answered with a failure: ``code`` is an A2E error code."""

    code: str
    message: str
    retryable: bool = False

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code


class EventTranslator:
    """Turns one call's events into updates, in ``seq`` order.

    An event ahead of the next expected ``seq`` waits for the ones before it; whatever still
    waits when the call ends is released in order then, so a gap never holds events forever.
    """

    def __init__(self, worker: str, task_id: str) -> None:
        self.worker = worker
        self.task_id = task_id
        self._next: int | None = None
        self._held: dict[int, A2EEvent] = {}
        self._started: set[str] = set()  # artifacts with a first chunk already sent

    def accept(self, event: A2EEvent) -> list[Update]:
        if self._next is None:
            self._next = event.seq
        if event.seq > self._next:
            self._held[event.seq] = event
            return []
        ready = [event]
        self._next = max(self._next, event.seq + 1)
        while self._next in self._held:
            ready.append(self._held.pop(self._next))
            self._next += 1
        return [u for e in ready if (u := self._update(e)) is not None]

    def flush(self) -> list[Update]:
        held, self._held = [self._held[s] for s in sorted(self._held)], {}
        if held:
            self._next = held[-1].seq + 1
        return [u for e in held if (u := self._update(e)) is not None]

    def _update(self, event: A2EEvent) -> Update | None:
        try:
            data = event.payload()
        except ValidationError as exc:
            log.warning("worker %s (task %s): %s event skipped: %s", self.worker, self.task_id, event.kind.value, exc)
            return None
        if isinstance(data, ProgressData):
            text = data.message or (f"{data.pct}%" if data.pct is not None else "")
            return Status(text, metadata={"progress": data.pct} if data.pct is not None else None)
        if isinstance(data, StatusData):
            return Status(data.message)
        if isinstance(data, LogData):
            level = _LEVELS.get(data.level.lower(), logging.INFO)
            log.log(level, "worker %s (task %s): %s", self.worker, self.task_id, data.message)
            return None
        return self._artifact(data)

    def _artifact(self, data: ArtifactData) -> Update | None:
        try:
            content = base64.b64decode(data.chunk, validate=True)
        except (binascii.Error, ValueError):
            log.warning(
                "worker %s (task %s): artifact %r chunk is not base64; skipped", self.worker, self.task_id, data.name
            )
            return None
        artifact_id = f"{self.task_id}-{data.name}"
        append = data.name in self._started
        self._started.add(data.name)
        options: dict[str, Any] = {"artifact_id": artifact_id, "append": append, "last_chunk": data.final}
        if data.mime.startswith("text/") or data.mime == "application/json":
            return TextArtifact(data.name, content.decode(errors="replace"), **options)
        return FileArtifact(data.name, content=content, mime_type=data.mime, **options)


def outcome(final: A2EMessage) -> Reply | CallFailure:
    """The task's end from the message that ended the call."""
    if isinstance(final, A2EError):
        return CallFailure(final.code, final.message, final.retryable)
    if not isinstance(final, SkillCallResponse):
        return CallFailure("invalid_message", f"the worker answered the call with a {final.type or 'untyped'} message")
    if final.error:
        error = final.error
        return CallFailure(
            str(error.get("code", "runtime_error")), str(error.get("message", "")), bool(error.get("retryable"))
        )
    result = final.data
    if result is None:
        return CallFailure("invalid_message", "the worker answered the call with neither a result nor an error")
    if not result.success:
        return CallFailure(result.error_code or "skill_error", result.error or "the skill failed")
    summary, data = result.summary, result.data
    text = summary if isinstance(summary, str) else None if summary is None else json.dumps(summary)
    if text is None and isinstance(data, str):
        text, data = data, None
    if data is not None and not isinstance(data, dict):
        data = {"result": data}
    return Reply(text=text, data=data)

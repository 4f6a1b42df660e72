"""Ordered production and checking of the response frames of one request (spec 12.2-12.3).

:class:`ResponseSequencer` is the producer side: every frame it builds echoes the request's
correlation fields, carries the next ``sequence`` and a fresh ``response_id``, and after the
final frame it refuses to emit more.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from mesh.e2a.constants import (
    E2A_A2A_STREAM_BRANCHES,
    E2A_CHUNK_DELTA_KINDS,
    E2A_RESPONSE_KIND_A2A_STREAM_EVENT,
    E2A_RESPONSE_KIND_E2A_CHUNK,
    E2A_RESPONSE_KIND_E2A_COMPLETE,
    E2A_RESPONSE_KIND_E2A_ERROR,
    E2A_RESPONSE_KINDS,
    E2A_RESPONSE_STATUS_FAILED,
    E2A_RESPONSE_STATUS_IN_PROGRESS,
    E2A_RESPONSE_STATUS_SUCCEEDED,
    E2A_RESPONSE_STATUSES,
)
from mesh.e2a.errors import E2ASequenceError, E2AStreamClosedError, E2AValidationError
from mesh.e2a.models import (
    E2AEnvelope,
    E2AProvenance,
    E2AResponse,
    IdentityOrigin,
)
from mesh.timestamps import utc_now_iso


def _uuid_hex() -> str:
    return uuid.uuid4().hex


class ResponseSequencer:
    """Builds the :class:`E2AResponse` frames answering one :class:`E2AEnvelope`.

    ``sequence`` runs 0, 1, 2, ...; the first frame with ``is_final`` closes the sequencer and
    any later emit raises :class:`E2AStreamClosedError`; a ``failed`` frame must be ``e2a.error``.
    Emits are serialized by a lock, so one sequencer may be shared between threads.

    ``clock`` and ``new_id`` exist so tests can pin ``timestamp`` and ``response_id``.
    """

    def __init__(
        self,
        envelope: E2AEnvelope,
        *,
        provenance: E2AProvenance | None = None,
        identity_origin: IdentityOrigin = IdentityOrigin.AGENT,
        clock: Callable[[], str] = utc_now_iso,
        new_id: Callable[[], str] = _uuid_hex,
    ) -> None:
        if not envelope.request_id:
            raise E2AValidationError(
                "E2AEnvelope.request_id",
                "a non-empty string, since responses are correlated by it (assign one at the gateway edge)",
                envelope.request_id,
            )
        self._envelope = envelope
        self._provenance = provenance or E2AProvenance()
        self._identity_origin = identity_origin
        self._clock = clock
        self._new_id = new_id
        self._lock = threading.Lock()
        self._next_sequence = 0
        self._final: E2AResponse | None = None

    @property
    def request_id(self) -> str:
        return self._envelope.request_id or ""

    @property
    def next_sequence(self) -> int:
        """The ``sequence`` the next frame will carry."""
        return self._next_sequence

    @property
    def finished(self) -> bool:
        """True once the final frame has been emitted."""
        return self._final is not None

    def emit(
        self,
        kind: str,
        body: Mapping[str, Any],
        *,
        status: str = E2A_RESPONSE_STATUS_IN_PROGRESS,
        final: bool = False,
        projections: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> E2AResponse:
        """The next frame, of any kind; the helpers below cover the usual cases."""
        if kind not in E2A_RESPONSE_KINDS:
            raise E2AValidationError("E2AResponse.response_kind", "one of E2A_RESPONSE_KINDS", kind)
        if status not in E2A_RESPONSE_STATUSES:
            raise E2AValidationError("E2AResponse.status", "one of E2A_RESPONSE_STATUSES", status)
        if not isinstance(body, Mapping):
            raise E2AValidationError("E2AResponse.body", "a JSON object", body)
        if status == E2A_RESPONSE_STATUS_FAILED and kind != E2A_RESPONSE_KIND_E2A_ERROR:
            raise E2ASequenceError(
                f"a failed frame must have response_kind 'e2a.error', not {kind!r}; "
                "use error(), and put an ACP/A2A error shape in projections if the edge needs one"
            )
        if final and status == E2A_RESPONSE_STATUS_IN_PROGRESS:
            raise E2ASequenceError("a final frame must be 'succeeded' or 'failed', not 'in_progress'")
        env = self._envelope
        with self._lock:
            if self._final is not None:
                raise E2AStreamClosedError(
                    f"request {env.request_id!r} already ended with its final frame "
                    f"(sequence {self._final.sequence}); nothing may follow it"
                )
            frame = E2AResponse(
                protocol_version=env.protocol_version,
                response_id=self._new_id(),
                request_id=env.request_id,
                sequence=self._next_sequence,
                is_final=final,
                status=status,
                response_kind=kind,
                timestamp=self._clock(),
                provenance=replace(self._provenance, details=dict(self._provenance.details)),
                body=dict(body),
                jsonrpc_id=env.jsonrpc_id,
                correlation_id=env.correlation_id,
                task_id=env.task_id,
                context_id=env.context_id,
                session_id=env.session_id,
                is_stream=env.is_stream,
                identity_origin=self._identity_origin,
                channel=env.channel,
                user_id=env.user_id,
                source_agent_id=env.source_agent_id,
                method=env.method,
                projections=dict(projections or {}),
                metadata=dict(metadata or {}),
            )
            self._next_sequence += 1
            if final:
                self._final = frame
        return frame

    def chunk(
        self, delta: str | Mapping[str, Any], *, delta_kind: str = "text", mime_type: str | None = None
    ) -> E2AResponse:
        """An ``e2a.chunk`` frame (in progress)."""
        if delta_kind not in E2A_CHUNK_DELTA_KINDS:
            raise E2AValidationError("e2a.chunk body.delta_kind", f"one of {E2A_CHUNK_DELTA_KINDS}", delta_kind)
        body: dict[str, Any] = {"delta_kind": delta_kind, "delta": delta}
        if mime_type is not None:
            body["mime_type"] = mime_type
        return self.emit(E2A_RESPONSE_KIND_E2A_CHUNK, body)

    def event(self, kind: str, body: Mapping[str, Any], *, projections: Mapping[str, Any] | None = None) -> E2AResponse:
        """An in-progress frame of any kind, e.g. ``acp.session_update``."""
        return self.emit(kind, body, projections=projections)

    def complete(self, result: Any = None, *, projections: Mapping[str, Any] | None = None) -> E2AResponse:
        """The final ``e2a.complete`` frame with ``body.result``."""
        return self.finish(E2A_RESPONSE_KIND_E2A_COMPLETE, {"result": result}, projections=projections)

    def finish(
        self, kind: str, body: Mapping[str, Any], *, projections: Mapping[str, Any] | None = None
    ) -> E2AResponse:
        """A final succeeded frame of another kind, e.g. ``acp.prompt_result`` or ``a2a.task``."""
        return self.emit(kind, body, status=E2A_RESPONSE_STATUS_SUCCEEDED, final=True, projections=projections)

    def error(
        self,
        code: int | str,
        message: str,
        details: Any = None,
        *,
        external: Mapping[str, Any] | None = None,
        final: bool = True,
        projections: Mapping[str, Any] | None = None,
    ) -> E2AResponse:
        """A failed ``e2a.error`` frame, final unless ``final=False``.

        ``external`` is ``{"protocol", "type", "payload"}`` describing a foreign error.
        """
        body: dict[str, Any] = {
            "code": code,
            "message": message,
            "details": {} if details is None else details,
        }
        if external is not None:
            body["external"] = dict(external)
        return self.emit(
            E2A_RESPONSE_KIND_E2A_ERROR,
            body,
            status=E2A_RESPONSE_STATUS_FAILED,
            final=final,
            projections=projections,
        )

    def a2a_stream_event(self, branch: str, payload: Mapping[str, Any], final: bool = False) -> E2AResponse:
        """An ``a2a.stream_event`` frame; ``final=True`` ends the stream as succeeded.

        A failed A2A task is still a succeeded *frame*: the task state in ``payload`` says so.
        """
        if branch not in E2A_A2A_STREAM_BRANCHES:
            raise E2AValidationError("a2a.stream_event body.branch", f"one of {E2A_A2A_STREAM_BRANCHES}", branch)
        if not isinstance(payload, Mapping):
            raise E2AValidationError("a2a.stream_event body.payload", "a JSON object", payload)
        status = E2A_RESPONSE_STATUS_SUCCEEDED if final else E2A_RESPONSE_STATUS_IN_PROGRESS
        return self.emit(
            E2A_RESPONSE_KIND_A2A_STREAM_EVENT,
            {"branch": branch, "payload": dict(payload)},
            status=status,
            final=final,
        )

"""A2E 1.0 messages (the a2e-message-protocol seed; shared/reference/protocols.md section 2).

Every message is a pydantic model tagged by its ``type`` string. The base fields are ``type``,
``id`` (uuid hex), ``version`` ("1.0") and ``ts`` (epoch seconds). The SDK writes the version
as ``version`` while its docs show ``a2e``: we write ``version`` and read either. Unknown
fields are ignored, so either side may add some.
"""

from __future__ import annotations

import time
import uuid
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

__all__ = [
    "A2E_VERSION",
    "EVENT_DATA",
    "RETRYABLE_CODES",
    "A2EError",
    "A2EErrorCode",
    "A2EEvent",
    "A2EMessage",
    "ArtifactData",
    "Capability",
    "EventData",
    "EventKind",
    "GenericMessage",
    "HandshakeRequest",
    "HandshakeResponse",
    "LogData",
    "Ping",
    "Pong",
    "ProgressData",
    "Shutdown",
    "SkillCallRequest",
    "SkillCallResponse",
    "SkillCancel",
    "SkillDefinition",
    "SkillDiscoverRequest",
    "SkillDiscoverResponse",
    "SkillEvent",
    "SkillResult",
    "StatusData",
]

A2E_VERSION = "1.0"


def _new_id() -> str:
    return uuid.uuid4().hex


class A2EMessage(BaseModel):
    """The base of every A2E message; ``TYPE`` is the type string a subclass stands for."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    TYPE: ClassVar[str] = ""

    type: str = ""
    id: str = Field(default_factory=_new_id)
    version: str = Field(default=A2E_VERSION, validation_alias=AliasChoices("version", "a2e"))
    ts: float = Field(default_factory=time.time)

    def model_post_init(self, context: Any, /) -> None:
        if not self.type:
            self.type = self.TYPE

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def new_id(self) -> str:
        """Give the message a fresh id (e.g. to send it again) and return it."""
        self.id = _new_id()
        return self.id


class GenericMessage(A2EMessage):
    """A message of a type nobody registered (or that failed its model): all fields kept."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    req_id: str | None = None


class A2EErrorCode(StrEnum):
    """The protocol codes, then the skill namespace's own."""

    parse_error = "parse_error"
    runtime_error = "runtime_error"
    invalid_message = "invalid_message"
    version_mismatch = "version_mismatch"
    unauthorized = "unauthorized"
    schema_violation = "schema_violation"
    timeout = "timeout"
    out_of_memory = "out_of_memory"
    sandbox_crash = "sandbox_crash"
    unknown_skill = "unknown_skill"
    skill_error = "skill_error"


RETRYABLE_CODES = frozenset({"runtime_error", "timeout", "out_of_memory", "sandbox_crash"})
"""Codes the A2E docs mark retryable; an error's own ``retryable`` flag decides."""


class EventKind(StrEnum):
    """What an event reports; its ``data`` is, in order: ``{pct, message}``,
    ``{name, mime, chunk (base64), final}``, ``{level, message}``, ``{message}``."""

    progress = "progress"
    artifact = "artifact"
    log = "log"
    status = "status"


class ProgressData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    pct: int | float | None = None
    message: str = ""


class ArtifactData(BaseModel):
    """One chunk of an artifact; ``chunk`` is base64, ``final`` marks the last one."""

    model_config = ConfigDict(extra="ignore")

    name: str = "artifact"
    mime: str = "text/plain"
    chunk: str = ""
    final: bool = False


class LogData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    level: str = "info"
    message: str = ""


class StatusData(BaseModel):
    model_config = ConfigDict(extra="ignore")

    message: str = ""


EventData = ProgressData | ArtifactData | LogData | StatusData
EVENT_DATA: dict[EventKind, type[EventData]] = {
    EventKind.progress: ProgressData,
    EventKind.artifact: ArtifactData,
    EventKind.log: LogData,
    EventKind.status: StatusData,
}


class Capability(BaseModel):
    model_config = ConfigDict(extra="ignore")

    capability: str
    enabled: bool = True
    metadata: dict[str, Any] = Field(default_factory=dict)


class HandshakeRequest(A2EMessage):
    TYPE = "handshake/req"

    agent_id: str = ""
    agent_caps: list[str] = Field(default_factory=list)
    auth_token: str = ""


class HandshakeResponse(A2EMessage):
    TYPE = "handshake/resp"

    req_id: str
    session_id: str = Field(default_factory=_new_id)
    accepted_caps: list[Capability] = Field(default_factory=list)
    max_parallel: int = Field(default=4, ge=1)
    ok: bool = True
    reason: str = ""


class A2EEvent(A2EMessage):
    """A mid-operation update of the request ``req_id``; ``seq`` increases within it."""

    TYPE = "invoke/event"

    kind: EventKind = EventKind.status
    req_id: str
    data: dict[str, Any] = Field(default_factory=dict)
    seq: int = 0

    def payload(self) -> EventData:
        """``data`` in the shape of its ``kind``; ``ValidationError`` if it does not fit."""
        return EVENT_DATA[self.kind].model_validate(self.data)


class SkillEvent(A2EEvent):
    TYPE = "skill/event"


class Ping(A2EMessage):
    TYPE = "ping"


class Pong(A2EMessage):
    TYPE = "pong"

    req_id: str
    uptime_seconds: float = 0.0


class Shutdown(A2EMessage):
    """Asks the host to drain and stop within ``timeout`` seconds."""

    TYPE = "shutdown"

    timeout: int = 10


class A2EError(A2EMessage):
    """A request that could not be processed; it may answer any request instead of its response."""

    TYPE = "error"

    req_id: str = ""
    code: str
    message: str = ""
    detail: dict[str, Any] = Field(default_factory=dict)
    retryable: bool = False
    capability_name: str = ""


class SkillDefinition(BaseModel):
    """A skill a host serves. The SDK requires more fields; we default them so a worker in any
    language may send just ``name`` and ``description``."""

    model_config = ConfigDict(extra="ignore")

    name: str
    version: str = "1.0"
    description: str = ""
    triggers: list[str] = Field(default_factory=list)
    status: Literal["Created", "Blocked", "Published", "Archived"] = "Published"
    when_to_use: str = ""
    argument_hint: str = ""
    source: str = "user"
    input_schema: dict[str, Any] = Field(default_factory=dict)
    output_schema: dict[str, Any] = Field(default_factory=dict)
    arguments: list[str] = Field(default_factory=list)
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    timeout_seconds: int | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class SkillDiscoverRequest(A2EMessage):
    TYPE = "skill/discover/req"

    filter_tags: list[str] = Field(default_factory=list)
    filter_categories: list[str] = Field(default_factory=list)


class SkillDiscoverResponse(A2EMessage):
    TYPE = "skill/discover/resp"

    req_id: str
    skills: list[SkillDefinition] = Field(default_factory=list)


class SkillCallRequest(A2EMessage):
    TYPE = "skill/call/req"

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    correlation_id: str = ""
    timeout: int = 60
    streaming: bool = True
    llm_override: dict[str, Any] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class SkillResult(BaseModel):
    model_config = ConfigDict(extra="ignore")

    success: bool
    duration_ms: int = 0
    data: Any = None
    summary: Any = None
    truncated: bool = False
    error: str = ""
    error_code: str = ""
    events: list[Any] = Field(default_factory=list)


class SkillCallResponse(A2EMessage):
    """``data`` is the result; ``error`` a transport-level ``{code, message, retryable}``."""

    TYPE = "skill/call/resp"

    req_id: str
    name: str = ""
    data: SkillResult | None = None
    error: dict[str, Any] | None = None
    created_at: float = Field(default_factory=time.time)


class SkillCancel(A2EMessage):
    """Not in A2E 1.0: sent only to a worker that accepted the ``cancel`` capability."""

    TYPE = "skill/cancel"

    req_id: str

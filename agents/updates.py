"""What a handler yields (or returns) to report progress and results.

A handler is an async generator yielding these, or a coroutine returning one of them (or a
plain ``str`` / :class:`~mesh.a2a.Message`, shorthand for :class:`Reply`)::

    async def handle(self, message, ctx):
        yield Status("looking it up")                     # working, with a progress message
        yield TextArtifact("report", "...")               # an artifact-update event
        city = yield InputRequired("Which city?")         # input-required; resumes with the reply
        yield Reply(f"Weather in {get_text_from_message(city)}: sunny")   # completed

A bare ``str`` yielded is a :class:`Status`. Ending without :class:`Reply` completes the task
with no final message. The other endings: :class:`Rejected` (the agent will not do it),
:class:`AuthRequired` (it waits, as for input, until the client authenticates) and
:class:`MessageOnly` (the answer is a bare Message: no task for the client).

The task becomes ``working`` with the first :class:`Status` (or on resuming after input): a
handler that answers at once goes from ``submitted`` straight to its end.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from mesh.a2a import DataPart, FilePart, FileWithBytes, FileWithUri, Message, Part, TextPart


def _parts(text: str | None, data: dict[str, Any] | None, parts: Sequence[Part]) -> list[Part]:
    out: list[Part] = []
    if text is not None:
        out.append(TextPart(text=text))
    if data is not None:
        out.append(DataPart(data=data))
    out.extend(parts)
    return out


@dataclass(frozen=True, slots=True)
class Status:
    """Progress while working: a status-update whose message carries ``text``, ``data`` or ``parts``.

    ``metadata`` goes on the status message (e.g. ``forwardedFrom`` on a peer's forwarded event).
    """

    text: str | None = None
    data: dict[str, Any] | None = None
    parts: Sequence[Part] = ()
    metadata: dict[str, Any] | None = None

    def to_parts(self) -> list[Part]:
        return _parts(self.text, self.data, self.parts)


@dataclass(frozen=True, slots=True)
class Reply:
    """The final answer: the task completes with this message as its status message.

    ``metadata`` goes on that message (e.g. an LLM agent's token usage).
    """

    text: str | None = None
    data: dict[str, Any] | None = None
    parts: Sequence[Part] = ()
    metadata: dict[str, Any] | None = None

    @classmethod
    def from_message(cls, message: Message) -> Reply:
        return cls(parts=tuple(message.parts))

    def to_parts(self) -> list[Part]:
        return _parts(self.text, self.data, self.parts)


@dataclass(frozen=True, slots=True)
class InputRequired:
    """Ask the client for more input; the task waits in ``input-required``.

    In a generator, ``reply = yield InputRequired(...)`` resumes with the client's next
    message on the same task. Returned from a plain coroutine, the next message on the task
    calls the handler again (with the exchange so far in ``ctx.history``).

    ``metadata`` goes on the question's message, so it is in the journal (a remote agent's task
    id, an LLM run's pending approvals). ``timeout_s`` bounds the wait for this question (before
    ``AgentSettings.input_timeout_s``): past it the task fails with ``timeout_reason``.
    """

    text: str | None = None
    data: dict[str, Any] | None = None
    parts: Sequence[Part] = ()
    metadata: dict[str, Any] | None = None
    timeout_s: float | None = None
    timeout_reason: str = ""

    def to_parts(self) -> list[Part]:
        return _parts(self.text, self.data, self.parts)


@dataclass(frozen=True, slots=True)
class AuthRequired:
    """Ask the client to authenticate (A2A ``auth-required``); the task waits, then resumes as
    after :class:`InputRequired` with the client's next message on the task."""

    text: str | None = None
    data: dict[str, Any] | None = None

    def to_parts(self) -> list[Part]:
        return _parts(self.text, self.data, ())


@dataclass(frozen=True, slots=True)
class Rejected:
    """Refuse the task (A2A ``rejected``, terminal): the agent will not do it, and says why."""

    text: str | None = None
    data: dict[str, Any] | None = None

    def to_parts(self) -> list[Part]:
        return _parts(self.text, self.data, ())


@dataclass(frozen=True, slots=True)
class MessageOnly:
    """Answer with a bare Message instead of a task: the A2A result is this Message (for a quick
    answer that needs no task the client could follow; the agent still records it as completed)."""

    text: str | None = None
    data: dict[str, Any] | None = None
    parts: Sequence[Part] = ()

    def to_parts(self) -> list[Part]:
        return _parts(self.text, self.data, self.parts)


@dataclass(frozen=True, slots=True)
class _ArtifactOptions:
    """Options every artifact takes, by keyword."""

    _: KW_ONLY
    artifact_id: str | None = None
    description: str | None = None
    # With the artifact_id of an earlier artifact: add these parts to it (streamed chunks).
    append: bool = False
    last_chunk: bool | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TextArtifact(_ArtifactOptions):
    """A text artifact: ``TextArtifact("report", "...")``."""

    name: str | None
    text: str

    def to_parts(self) -> list[Part]:
        return [TextPart(text=self.text)]


@dataclass(frozen=True, slots=True)
class DataArtifact(_ArtifactOptions):
    """A structured-data artifact: ``DataArtifact("result", {"value": 42})``."""

    name: str | None
    data: dict[str, Any]

    def to_parts(self) -> list[Part]:
        return [DataPart(data=self.data)]


@dataclass(frozen=True, slots=True)
class PartsArtifact(_ArtifactOptions):
    """An artifact made of any parts (e.g. a peer's artifact passed on as it came)."""

    name: str | None
    parts: Sequence[Part]

    def to_parts(self) -> list[Part]:
        return list(self.parts)


@dataclass(frozen=True, slots=True)
class FileArtifact(_ArtifactOptions):
    """A file artifact, inline (``content=`` bytes, base64 on the wire) or by ``uri=``."""

    name: str | None
    content: bytes | None = field(default=None, kw_only=True)
    uri: str | None = field(default=None, kw_only=True)
    mime_type: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if (self.content is None) == (self.uri is None):
            raise ValueError("FileArtifact needs exactly one of content= (bytes) or uri=")

    def to_parts(self) -> list[Part]:
        if self.content is not None:
            encoded = base64.b64encode(self.content).decode("ascii")
            return [FilePart(file=FileWithBytes(bytes=encoded, name=self.name, mime_type=self.mime_type))]
        if self.uri is None:
            raise ValueError(f"file {self.name!r} has neither content nor a uri")
        return [FilePart(file=FileWithUri(uri=self.uri, name=self.name, mime_type=self.mime_type))]


class TaskFailed(Exception):
    """Raise from a handler to fail the task with exactly this message (no exception name).

    Any other exception fails the task too, with ``"<ExceptionType>: <message>"``; this is for
    failures the handler explains itself, such as bad input.
    """

    def __init__(self, text: str, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(text)
        self.text = text
        self.data = data

    def to_parts(self) -> list[Part]:
        return _parts(self.text, self.data, ())


ArtifactUpdate = TextArtifact | DataArtifact | FileArtifact | PartsArtifact
Update = (
    Status
    | Reply
    | InputRequired
    | AuthRequired
    | Rejected
    | MessageOnly
    | TextArtifact
    | DataArtifact
    | FileArtifact
    | PartsArtifact
)
#: The updates that end a handler's segment (the task ends, or waits for the client).
Ending = Reply | InputRequired | AuthRequired | Rejected | MessageOnly

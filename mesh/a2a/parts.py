"""Message and artifact content: text, file and data parts.

A part is told apart by ``kind``. SAM's documented examples omit ``kind``, so when it is
missing the kind is inferred from the one content key present (``text``, ``file``, ``data``);
a dump always writes ``kind`` back.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from .base import A2AModel
from .validation import discriminator, read_field, tag


class FileWithBytes(A2AModel):
    """File content inline: ``bytes`` is the base64-encoded content."""

    bytes: str
    name: str | None = None
    mime_type: str | None = None

    @property
    def size(self) -> int:
        """How many bytes the content decodes to (without decoding it)."""
        return decoded_size(self.bytes)


def decoded_size(encoded: str) -> int:
    """The length of what base64 ``encoded`` decodes to: 3 bytes per 4 characters, less the padding."""
    return len(encoded.rstrip("=\n\r ")) * 3 // 4


class FileWithUri(A2AModel):
    """File content by reference."""

    uri: str
    name: str | None = None
    mime_type: str | None = None


def _file_variant(value: dict[str, Any]) -> str | None:
    has_bytes, has_uri = "bytes" in value, "uri" in value
    if has_bytes != has_uri:  # exactly one; both or neither is ambiguous
        return "bytes" if has_bytes else "uri"
    return None


FileContent = Annotated[
    Annotated[FileWithBytes, tag(FileWithBytes)] | Annotated[FileWithUri, tag(FileWithUri)],
    discriminator(
        {"bytes": FileWithBytes, "uri": FileWithUri},
        read=_file_variant,
        field=None,
        expected="an object with exactly one of 'bytes' (base64) or 'uri'",
    ),
]


class TextPart(A2AModel):
    """Plain text."""

    kind: Literal["text"] = "text"
    text: str
    metadata: dict[str, Any] | None = None


class FilePart(A2AModel):
    """A file, inline or by URI."""

    kind: Literal["file"] = "file"
    file: FileContent
    metadata: dict[str, Any] | None = None


class DataPart(A2AModel):
    """Structured JSON data."""

    kind: Literal["data"] = "data"
    data: dict[str, Any]
    metadata: dict[str, Any] | None = None


_PART_KINDS = ("text", "file", "data")
_read_kind = read_field("kind")


def _part_kind(value: dict[str, Any]) -> Any:
    kind = _read_kind(value)
    if kind is None:
        for key in _PART_KINDS:
            if key in value:
                return key
    return kind


#: A message or artifact part, discriminated by ``kind`` (inferred when missing).
Part = Annotated[
    Annotated[TextPart, tag(TextPart)] | Annotated[FilePart, tag(FilePart)] | Annotated[DataPart, tag(DataPart)],
    discriminator(
        {"text": TextPart, "file": FilePart, "data": DataPart},
        read=_part_kind,
        field="kind",
        expected=("'text', 'file' or 'data' (or left out when the part has a text, file or data key)"),
    ),
]

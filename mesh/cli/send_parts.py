"""What ``mesh send`` sends: its text, ``--data`` (a DataPart) and ``--file`` (FileParts).

``--data`` takes a JSON object as the argument itself, ``@FILE`` (a JSON file) or ``-``
(standard input). Each ``--file PATH`` is an inline FilePart (its name, and a MIME type guessed
from it); one above the artifact store's inline threshold is stored in the namespace's store
and travels by ``artifact://`` URI instead, as the HTTP gateway and the chat do with uploads
(:func:`mesh.artifacts.offload_inline_files`). Every problem is a :class:`ConfigError` naming
the option, what is wrong and what to give instead.
"""

from __future__ import annotations

import json
import mimetypes
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mesh.a2a import (
    FilePart,
    FileWithBytes,
    Message,
    Part,
    TextPart,
    create_data_part,
    create_file_part_from_bytes,
    create_user_message,
)
from mesh.artifacts import ArtifactError, offload_inline_files, open_store, resolve_settings
from mesh.errors import ConfigError

__all__ = ["DATA_EXAMPLE", "data_part_value", "file_parts", "store_large_files", "user_message"]

DATA_EXAMPLE = """--data '{"expression": "6*7"}'"""


def data_part_value(spec: str, *, stdin_taken: bool = False) -> dict[str, Any]:
    """The object of ``--data JSON|@FILE|-``."""
    where = "--data"
    if spec == "-":
        if stdin_taken:
            raise ConfigError("--data - and the text '-' both read standard input; give one of them another way")
        text, where = sys.stdin.read(), "--data - (standard input)"
    elif spec.startswith("@") and len(spec) > 1:
        path = Path(spec[1:])
        where = f"--data {spec}"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(f"{where}: cannot read {path} ({reason}); give a UTF-8 JSON file") from exc
    else:
        text = spec
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"{where} is not JSON ({exc}); give a JSON object, e.g. {DATA_EXAMPLE} (mind the shell's quotes), "
            "@FILE.json or - for standard input"
        ) from None
    if not isinstance(value, dict):
        raise ConfigError(
            f"{where} is a JSON {type(value).__name__}, not an object; a DataPart holds an object, e.g. {DATA_EXAMPLE}"
        )
    return value


def file_parts(paths: Sequence[Path]) -> list[Part]:
    """An inline FilePart per ``--file PATH``, named after the file."""
    parts: list[Part] = []
    for path in paths:
        if path.is_dir():
            raise ConfigError(f"--file {path} is a folder; give a file (repeat --file for several)")
        try:
            content = path.read_bytes()
        except FileNotFoundError:
            raise ConfigError(f"--file {path}: no such file; give the path of a file to attach") from None
        except OSError as exc:
            reason = exc.strerror or exc
            raise ConfigError(f"--file {path}: cannot read it ({reason}); give a file you can read") from None
        mime_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        parts.append(create_file_part_from_bytes(content, name=path.name, mime_type=mime_type))
    return parts


def user_message(text: str, data: dict[str, Any] | None, files: list[Part], metadata: dict[str, Any] | None) -> Message:
    """The message: the text (if any), then the data, then the files."""
    parts: list[Part] = [TextPart(text=text)] if text else []
    if data is not None:
        parts.append(create_data_part(data))
    parts += files
    return create_user_message(parts, metadata=metadata)


async def store_large_files(message: Message, namespace: str, context_id: str | None) -> Message:
    """``message`` with each inline file above the store's threshold stored and sent by URI, in
    ``context_id`` (a new context when None: the message then names it)."""
    store = open_store(resolve_settings(None), namespace)
    try:
        threshold = store.limits.inline_threshold_bytes
        inline = [p.file.size for p in message.parts if isinstance(p, FilePart) and isinstance(p.file, FileWithBytes)]
        if all(size <= threshold for size in inline):
            return message
        context = context_id or uuid.uuid4().hex
        wire = message.model_copy(update={"context_id": context}).to_wire_dict()
        try:
            await offload_inline_files(wire, store, context_id=context)
        except ArtifactError as exc:
            raise ConfigError(f"--file: could not store the file in the artifact store: {exc}") from exc
        return Message.model_validate(wire)
    finally:
        await store.close()

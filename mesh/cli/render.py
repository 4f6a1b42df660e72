"""How tasks, messages and stream events print on a terminal (and as JSON with --json)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from mesh.a2a import (
    Artifact,
    DataPart,
    FilePart,
    FileWithUri,
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
    TextPart,
)
from mesh.a2a.base import A2AModel


def parts_text(parts: Sequence[Part]) -> str:
    """What a person reads: the text parts; without any, data as JSON and files by location.

    Data riding along with a text answer is for programs; ``--json`` shows it.
    """
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    if texts:
        return "".join(texts)
    chunks = []
    for part in parts:
        if isinstance(part, DataPart):
            chunks.append(json.dumps(part.data, separators=(",", ":"), ensure_ascii=False))
        elif isinstance(part, FilePart):
            size = f"{part.file.size} bytes inline" if not isinstance(part.file, FileWithUri) else ""
            where = part.file.uri if isinstance(part.file, FileWithUri) else size
            chunks.append(" ".join(x for x in ("<file", part.file.name or "", where) if x) + ">")
    return "\n".join(chunks)


def message_text(message: Message | None) -> str:
    return parts_text(message.parts) if message is not None else ""


def event_line(item: A2AModel) -> str:
    """One line per stream event: ``[state] text`` or ``[artifact name] text``."""
    if isinstance(item, TaskStatusUpdateEvent):
        text = message_text(item.status.message)
        return f"[{item.status.state.value}] {text}".rstrip()
    if isinstance(item, TaskArtifactUpdateEvent):
        return (
            f"[artifact {item.artifact.name or item.artifact.artifact_id}] {parts_text(item.artifact.parts).rstrip()}"
        )
    if isinstance(item, Task):
        return f"[task {item.id}] {item.status.state.value}"
    if isinstance(item, Message):
        return message_text(item)
    return item.model_dump_json()


def artifact_block(artifact: Artifact) -> str:
    return f"[artifact {artifact.name or artifact.artifact_id}]\n{parts_text(artifact.parts).rstrip()}"


def task_summary(task: Task) -> str:
    """For ``mesh task get``: id, state, status message and artifacts."""
    lines = [f"task     {task.id}", f"context  {task.context_id}", f"state    {task.status.state.value}"]
    text = message_text(task.status.message)
    if text:
        lines.append(f"message  {text}")
    for artifact in task.artifacts or []:
        lines.append(artifact_block(artifact))
    return "\n".join(lines)


def tasks_table(tasks: Sequence[Task]) -> str:
    """For ``mesh task list``: columns TASK, STATE, CONTEXT, UPDATED and the status message's first line."""
    header = ["TASK", "STATE", "CONTEXT", "UPDATED", "MESSAGE"]
    rows = [
        [
            t.id,
            t.status.state.value,
            t.context_id,
            t.status.timestamp or "-",
            _first_line(message_text(t.status.message), 50),
        ]
        for t in tasks
    ]
    table = [header, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


def _first_line(text: str, width: int) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def answer_text(result: Task | Message) -> str:
    """For ``mesh send``: what the agent said, then its artifacts."""
    if isinstance(result, Message):
        return message_text(result)
    blocks = [message_text(result.status.message)] if result.status.message is not None else []
    blocks += [artifact_block(a) for a in result.artifacts or []]
    return "\n".join(b for b in blocks if b)


def as_json(item: A2AModel, *, indent: int | None = None) -> str:
    return json.dumps(item.to_wire_dict(), indent=indent, ensure_ascii=False)

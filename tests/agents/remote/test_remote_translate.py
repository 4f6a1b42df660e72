"""The proxy's reading of remote events: the direct reading of plain statuses (agents.remote.translate
``updates_of``) gives what the general ProtoJSON path gives, refusals included."""

from __future__ import annotations

import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf import struct_pb2

from agents.remote.translate import RemoteIds, incoming, translate, updates_of
from agents.updates import TaskFailed
from mesh.limits import MessageLimits

LIMITS = MessageLimits(max_parts=3, max_text_part_bytes=50)


def agent_message(*parts: pb.Part, metadata: dict[str, str] | None = None) -> pb.Message:
    message = pb.Message(message_id="m2", role=pb.ROLE_AGENT, parts=parts, task_id="t1", context_id="c1")
    if metadata is not None:
        message.metadata.CopyFrom(
            struct_pb2.Struct(fields={k: struct_pb2.Value(string_value=v) for k, v in metadata.items()})
        )
    return message


def status(state: int, message: pb.Message | None = None) -> pb.StreamResponse:
    event = pb.TaskStatusUpdateEvent(task_id="t1", context_id="c1", status=pb.TaskStatus(state=state))
    if message is not None:
        event.status.message.CopyFrom(message)
    return pb.StreamResponse(status_update=event)


TEXT = pb.Part(text="hello")
EVENTS = {
    "submitted task": pb.StreamResponse(
        task=pb.Task(
            id="t1",
            context_id="c1",
            status=pb.TaskStatus(state=pb.TASK_STATE_SUBMITTED),
            history=[pb.Message(message_id="m1", role=pb.ROLE_USER, parts=[TEXT])],
        )
    ),
    "working": status(pb.TASK_STATE_WORKING),
    "working with text": status(pb.TASK_STATE_WORKING, agent_message(TEXT, pb.Part(text="more"))),
    "completed": status(pb.TASK_STATE_COMPLETED, agent_message(TEXT)),
    "input-required": status(pb.TASK_STATE_INPUT_REQUIRED, agent_message(pb.Part(text="Which city?"))),
    "input-required without a message": status(pb.TASK_STATE_INPUT_REQUIRED),
    "auth-required": status(pb.TASK_STATE_AUTH_REQUIRED, agent_message(TEXT)),
    "rejected": status(pb.TASK_STATE_REJECTED),
    "failed": status(pb.TASK_STATE_FAILED, agent_message(pb.Part(text="boom"))),
    "canceled": status(pb.TASK_STATE_CANCELED),
    "completed task": pb.StreamResponse(
        task=pb.Task(
            id="t1", context_id="c1", status=pb.TaskStatus(state=pb.TASK_STATE_COMPLETED, message=agent_message(TEXT))
        )
    ),
    "a data part": status(pb.TASK_STATE_COMPLETED, agent_message(pb.Part(data=struct_pb2.Value(string_value="x")))),
    "message metadata": status(pb.TASK_STATE_COMPLETED, agent_message(TEXT, metadata={"k": "v"})),
    "a text part with a media type": status(
        pb.TASK_STATE_COMPLETED, agent_message(pb.Part(text="x", media_type="text/markdown"))
    ),
    "too many parts": status(pb.TASK_STATE_COMPLETED, agent_message(TEXT, TEXT, TEXT, TEXT)),
    "too long a text": status(pb.TASK_STATE_COMPLETED, agent_message(pb.Part(text="x" * 51))),
}


def read(reader: str, event: pb.StreamResponse) -> tuple[str, str | None, str | None]:
    ids = RemoteIds(context_id="c0")
    try:
        if reader == "direct":
            got = repr(updates_of(event, ids, LIMITS))
        else:
            got = repr(translate(incoming(event, LIMITS), ids, with_artifacts=True))
    except TaskFailed as failure:
        got = f"failed: {failure}"
    return got, ids.task_id, ids.context_id


@pytest.mark.parametrize("name", EVENTS)
def test_the_direct_reading_matches_the_general_one(name: str) -> None:
    event = EVENTS[name]
    assert read("direct", event) == read("general", event)

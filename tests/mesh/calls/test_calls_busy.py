"""Callers retry "busy" (-32050) with jittered backoff within their deadline (mesh.calls)."""

from __future__ import annotations

import itertools
import json
import time

import pytest

from mesh.a2a import AgentBusy, MessageSendParams, Task, TextPart, create_user_message
from mesh.calls import CallOptions, CallPath
from mesh.properties import MessageProperties
from mesh.transport import InboundMessage, Transport
from tests.conftest import TransportFactory
from tests.support import within
from topics import get_agent_request_topic

BUSY = {"code": -32050, "message": "Agent busy", "data": {"maxConcurrentTasks": 1}}


async def busy_agent(transport: Transport, namespace: str, busy_times: int) -> list[float]:
    """A stand-in agent on the broker: "busy" to the first ``busy_times`` requests, then a Task."""
    arrivals: list[float] = []

    def on_request(message: InboundMessage) -> None:
        arrivals.append(time.monotonic())
        request = json.loads(message.payload)
        answer: dict[str, object] = {"jsonrpc": "2.0", "id": request["id"]}
        if len(arrivals) <= busy_times:
            answer["error"] = BUSY
        else:
            status = {"state": "completed"}
            answer["result"] = {"kind": "task", "id": request["id"], "contextId": "c", "status": status}
        props = MessageProperties(correlation_data=message.properties.correlation_data)
        assert message.properties.reply_to is not None
        transport.publish_nowait(message.properties.reply_to, json.dumps(answer).encode(), properties=props)

    await transport.subscribe(get_agent_request_topic(namespace, "worker"), on_request)
    return arrivals


def params() -> MessageSendParams:
    return MessageSendParams(message=create_user_message([TextPart(text="work")]))


async def test_a_busy_answer_is_retried_until_the_agent_takes_the_request(
    make_transport: TransportFactory, namespace: str
) -> None:
    arrivals = await busy_agent(await make_transport(client_id="worker"), namespace, busy_times=3)
    calls = CallPath(await make_transport(client_id="caller"), namespace, "caller", role="client")
    answer = await calls.request("worker", "message/send", params(), CallOptions(deadline_s=10))
    assert isinstance(answer.value, Task) and answer.value.status.state.value == "completed"
    assert len(arrivals) == 4  # three refusals, then the one taken
    waits = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert all(wait >= 0.02 for wait in waits)  # backed off, not resent at once


async def test_busy_is_raised_once_the_deadline_leaves_no_room_to_retry(
    make_transport: TransportFactory, namespace: str
) -> None:
    arrivals = await busy_agent(await make_transport(client_id="worker"), namespace, busy_times=1_000_000)
    calls = CallPath(await make_transport(client_id="caller"), namespace, "caller", role="client")
    started = time.monotonic()
    with pytest.raises(AgentBusy):
        await calls.request("worker", "message/send", params(), CallOptions(deadline_s=1.5))
    # Raised at the deadline, not after the 60 s idle timeout.
    assert time.monotonic() - started < within(1.5)
    assert 2 <= len(arrivals) < 30

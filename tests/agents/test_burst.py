"""A burst far beyond an agent's concurrency bound waits in the broker's queue: all answered, none busy.

10,000 requests to echo at once, half through ``MeshClient`` and half from raw publishers (QoS 1,
no retry of their own). The agent holds what it cannot run yet, unacknowledged (Receive
Maximum), so the broker keeps the rest queued; nobody is answered busy (docs/backpressure.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid

from agents import AgentSettings, journalwriter
from mesh.a2a import MessageSendParams, Task, TaskState, create_user_message, get_text_from_message, request_bytes
from mesh.a2a import TextPart as Text
from mesh.client import MeshClient
from mesh.properties import MessageProperties
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent
from tests.support import Inbox
from topics import get_agent_request_topic, get_client_response_topic

BURST = int(os.environ.get("MESH_TEST_BURST", "10000"))
#: What the burst may add to the process (agent and the 10,000-call client together): see
#: docs/backpressure.md for the figures measured.
RSS_BOUND_MB = 250


def rss_mb() -> float:
    """This process's RSS and its task journals' writer process's (the agent's both)."""
    writer = journalwriter.writer_for(asyncio.get_running_loop()).pid
    return sum(_rss_mb(pid) for pid in (os.getpid(), writer) if pid is not None)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


async def test_a_burst_of_10000_requests_is_answered_in_full_without_busy(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    # A small bound makes the whole burst go through the hold (the default, 1000, would too).
    service = await serve_agent(Echo(), AgentSettings(max_concurrent_tasks=50))
    before = rss_mb()
    started = time.monotonic()

    raw_replies = Inbox()
    reply_topic = get_client_response_topic(client.namespace, f"raw-{uuid.uuid4().hex[:12]}")
    await client.transport.subscribe(reply_topic, raw_replies)
    request_topic = get_agent_request_topic(client.namespace, "echo")
    raw_ids = [f"raw-{n}" for n in range(BURST // 2)]
    for request_id in raw_ids:
        params = MessageSendParams(message=create_user_message([Text(text=request_id)]))
        props = MessageProperties(reply_to=reply_topic, correlation_data=request_id.encode())
        payload = request_bytes("message/send", request_id, params)
        client.transport.publish_nowait(request_topic, payload, properties=props)

    async def via_client(n: int) -> str:
        task = await client.send("echo", f"client-{n}", timeout=120)
        assert isinstance(task, Task) and task.status.state is TaskState.completed
        return get_text_from_message(task.status.message)  # type: ignore[arg-type]

    texts = await asyncio.gather(*(via_client(n) for n in range(BURST // 2)))
    await raw_replies.wait_for(len(raw_ids), timeout=120)
    elapsed = time.monotonic() - started
    grown = rss_mb() - before

    assert texts == [f"client-{n}" for n in range(BURST // 2)]
    answers = {m.properties.correlation_data: json.loads(m.payload) for m in raw_replies.messages}
    assert len(answers) == len(raw_ids) == len(raw_replies.messages)  # each answered once
    busy = [a for a in answers.values() if "error" in a]
    assert busy == []
    for request_id in raw_ids:
        result = answers[request_id.encode()]["result"]
        assert result["status"]["state"] == "completed"
        assert result["status"]["message"]["parts"][0]["text"] == request_id
    assert service.admission.held_total > 0  # the bound was reached: requests waited
    assert service.admission.refused_total == 0 and service.admission.held == 0
    assert grown < RSS_BOUND_MB, f"the burst grew the process by {grown:.0f} MB"
    print(f"burst of {BURST}: {elapsed:.1f} s, held {service.admission.held_total}, RSS +{grown:.0f} MB")

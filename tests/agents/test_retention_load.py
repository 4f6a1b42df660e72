"""Memory under load: 1,000 requests of 0.9 MB leave the task store within its byte bound.

The figure that matters to an operator, the agent process's RSS, is measured by
``bench/retention.py`` (it varies with the allocator); this test asserts the store's own
accounting, through the service's public attributes, whatever the store behind them.
"""

from __future__ import annotations

import asyncio

from agents import AgentSettings
from mesh.a2a import Message, Task, TaskState, TextPart, create_user_message
from mesh.client import MeshClient
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent

REQUESTS = 1_000
BOUND = 50_000_000
IN_FLIGHT = 8


def big_message() -> Message:
    # Ten text parts of 90 KB: ~0.9 MB, valid under the default limits (100 KB per text part, 1 MB per message).
    return create_user_message([TextPart(text=f"{n}" * 90_000) for n in range(10)])


async def test_a_thousand_requests_of_0_9_mb_stay_within_the_byte_bound(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    service = await serve_agent(Echo(), AgentSettings(max_retained_bytes=BOUND))
    bound = service.settings.max_retained_bytes
    assert len(big_message().model_dump_json(by_alias=True)) > 900_000
    ids: list[str] = []
    high_water = 0
    todo = iter(range(REQUESTS))

    async def sender() -> None:
        nonlocal high_water
        for _ in todo:
            task = await client.send("echo", big_message(), history_length=0, timeout=30)
            assert isinstance(task, Task) and task.status.state is TaskState.completed
            ids.append(task.id)
            high_water = max(high_water, service.tasks.retained_bytes)

    await asyncio.gather(*(sender() for _ in range(IN_FLIGHT)))

    assert len(ids) == REQUESTS
    assert service.tasks.retained_bytes <= bound and high_water <= bound
    kept = [task_id for task_id in ids if service.tasks.get(task_id) is not None]
    per_task = service.tasks.retained_bytes / len(kept)
    assert per_task > 1_800_000  # each kept task holds its 0.9 MB request and its 0.9 MB echo
    assert service.tasks.retained_bytes + per_task > bound  # as many as fit: one more would overflow
    assert set(kept) <= set(ids[-(len(kept) + IN_FLIGHT) :])  # the newest (finishes overlap by IN_FLIGHT)

    still = await client.send("echo", "still answering", timeout=10)
    assert isinstance(still, Task) and still.status.state is TaskState.completed

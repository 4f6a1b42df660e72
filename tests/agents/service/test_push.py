"""Push-notification config methods and webhook delivery through a running agent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agents import AgentSettings
from mesh.a2a import (
    InvalidParams,
    PushNotificationAuthenticationInfo,
    PushNotificationConfig,
    PushNotificationNotSupported,
    Task,
    TaskState,
)
from mesh.client import MeshClient
from tests.agents.service_agents import Blocker, Echo
from tests.conftest import ServeAgent
from tests.http_receiver import Receiver
from tests.http_receiver import serve as serve_http

PRIVATE_OK = AgentSettings(allow_private_push_urls=True)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from serve_http(Receiver())


def webhook(receiver: Receiver, **options: object) -> PushNotificationConfig:
    return PushNotificationConfig(
        url=receiver.url("/hook"),
        token="tok-1",
        authentication=PushNotificationAuthenticationInfo(schemes=["Bearer"], credentials="s3cret"),
        **options,  # type: ignore[arg-type]
    )


async def test_push_with_the_send_delivers_every_state_in_order(
    serve_agent: ServeAgent, client: MeshClient, receiver: Receiver
) -> None:
    await serve_agent(Echo(), PRIVATE_OK)
    task = await client.send("echo", "notify me", push_notification=webhook(receiver))
    assert isinstance(task, Task) and task.status.state is TaskState.completed
    requests = await receiver.wait_for(2)
    assert [r.task.status.state for r in requests] == [TaskState.working, TaskState.completed]
    assert all(r.task.id == task.id for r in requests)
    assert requests[0].headers["authorization"] == "Bearer s3cret"
    assert requests[0].headers["x-a2a-notification-token"] == "tok-1"
    assert requests[0].path == "/hook"


async def test_config_methods_set_get_list_delete(
    serve_agent: ServeAgent, client: MeshClient, receiver: Receiver
) -> None:
    agent = Blocker()
    await serve_agent(agent, PRIVATE_OK)
    task = await client.send("blocker", "x", blocking=False)
    stored = await client.set_push_config("blocker", task.id, webhook(receiver, id="cfg-1"))
    assert stored.task_id == task.id and stored.push_notification_config.id == "cfg-1"
    got = await client.get_push_config("blocker", task.id, "cfg-1")
    assert got.push_notification_config.url == receiver.url("/hook")
    second = await client.set_push_config("blocker", task.id, webhook(receiver))
    assert second.push_notification_config.id  # assigned by the agent
    listed = await client.list_push_configs("blocker", task.id)
    assert [c.push_notification_config.id for c in listed] == ["cfg-1", second.push_notification_config.id]
    await client.delete_push_config("blocker", task.id, "cfg-1")
    assert len(await client.list_push_configs("blocker", task.id)) == 1

    await asyncio.wait_for(agent.started.wait(), 5)
    await client.cancel_task("blocker", task.id)
    [canceled] = [r for r in await receiver.wait_for(1) if r.task.status.state is TaskState.canceled]
    assert canceled.task.id == task.id


async def test_loopback_urls_are_refused_unless_allowed(
    serve_agent: ServeAgent, client: MeshClient, receiver: Receiver
) -> None:
    await serve_agent(Echo())
    with pytest.raises(InvalidParams, match="allow_private_push_urls"):
        await client.send("echo", "x", push_notification=webhook(receiver))


async def test_an_agent_without_push_refuses_the_methods(
    serve_agent: ServeAgent, client: MeshClient, receiver: Receiver
) -> None:
    await serve_agent(Echo(), AgentSettings(push_notifications=False))
    task = await client.send("echo", "x")
    with pytest.raises(PushNotificationNotSupported) as caught:
        await client.set_push_config("echo", task.id, webhook(receiver))
    assert caught.value.code == -32003
    card_has_push = (await client.wait_for_agent("echo")).capabilities.push_notifications
    assert card_has_push is False

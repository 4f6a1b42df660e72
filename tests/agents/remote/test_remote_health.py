"""The proxy's auth, health and push: tokens refreshed, a dead remote's card off the mesh and back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agents.remote.http import OAuth2ClientCredentials
from agents.settings import AgentSettings
from mesh.a2a import AgentCard, PushNotificationConfig, Task, TaskState, TextPart
from mesh.brokertools.localbroker import free_port
from mesh.client import MeshClient
from tests.agents.remote.conftest import Remote, ServeRemote
from tests.agents.remote.server import CLIENT_ID, CLIENT_SECRET, Weather, app, serving
from tests.http_receiver import Receiver
from tests.http_receiver import serve as serve_http
from tests.support import Inbox
from topics import get_agent_discovery_topic


def text_of(task: Task | object) -> str:
    assert isinstance(task, Task) and task.status.message is not None, task
    return "".join(p.text for p in task.status.message.parts if isinstance(p, TextPart))


async def test_an_expired_oauth2_token_is_refreshed(
    guarded_remote: Remote, serve_remote: ServeRemote, client: MeshClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = guarded_remote.tokens
    assert tokens is not None
    monkeypatch.setenv("WEATHER_SECRET", CLIENT_SECRET)
    auth = {
        "type": "oauth2",
        "token_url": f"http://127.0.0.1:{guarded_remote.port}/token",
        "client_id": CLIENT_ID,
        "client_secret_env": "WEATHER_SECRET",
    }
    agent, _ = await serve_remote(card_url=guarded_remote.card_url, auth=auth)
    card = await client.wait_for_agent("weather", timeout=5)
    assert CLIENT_SECRET not in card.to_json_bytes().decode()
    assert text_of(await client.send("weather", "first")) == "echo: first"
    tokens.expire_all()  # the server forgets every token it issued: the next call gets a 401
    assert text_of(await client.send("weather", "second")) == "echo: second"
    assert isinstance(agent.auth, OAuth2ClientCredentials)
    assert (agent.auth.fetched, tokens.issued, tokens.refused) == (2, 2, 1)


async def test_a_wrong_bearer_token_fails_naming_the_url_status_and_fix(
    guarded_remote: Remote, serve_remote: ServeRemote, client: MeshClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEATHER_TOKEN", "not-a-token-it-issued")
    await serve_remote(card_url=guarded_remote.card_url, auth={"type": "bearer", "token_env": "WEATHER_TOKEN"})
    await client.wait_for_agent("weather", timeout=5)
    task = await client.send("weather", "hello")
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    text = text_of(task)
    assert guarded_remote.card_url in text and "401" in text and "auth" in text
    assert "not-a-token-it-issued" not in text


async def test_a_remote_that_dies_leaves_the_mesh_and_comes_back(
    serve_remote: ServeRemote, client: MeshClient, namespace: str
) -> None:
    port = free_port()
    card_url = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    inbox = Inbox()
    await client.transport.subscribe(get_agent_discovery_topic(namespace, "weather"), inbox)
    async with serving(app(port, Weather()), port):
        await serve_remote(card_url=card_url, health_interval_s=0.2)
        assert text_of(await client.send("weather", "up")) == "echo: up"
    await inbox.wait_for_payload(b"", timeout=10)  # the remote is gone: so is its card
    gone = await client.send("weather", "anyone?", timeout=10)
    assert isinstance(gone, Task) and gone.status.state is TaskState.failed
    assert f"127.0.0.1:{port}" in text_of(gone) and "unreachable" in text_of(gone)
    seen = len(inbox.messages)
    async with serving(app(port, Weather()), port):
        await inbox.wait_for(seen + 1, timeout=10)
        assert inbox.messages[-1].payload  # the card is back
        assert text_of(await client.send("weather", "back")) == "echo: back"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from serve_http(Receiver())


async def test_push_notifications_of_a_remote_task(
    remote: Remote, serve_remote: ServeRemote, client: MeshClient, receiver: Receiver
) -> None:
    await serve_remote(card_url=remote.card_url, settings=AgentSettings(allow_private_push_urls=True))
    await client.wait_for_agent("weather", timeout=5)
    push = PushNotificationConfig(url=receiver.url("/hook"), token="t-1")
    task = await client.send("weather", "ask", push_notification=push)
    assert isinstance(task, Task) and task.status.state is TaskState.input_required
    configs = await client.list_push_configs("weather", task.id)
    assert [c.push_notification_config.url for c in configs] == [receiver.url("/hook")]
    await client.send("weather", "Oslo", task_id=task.id, context_id=task.context_id)
    count = 1
    while TaskState.completed not in (states := [r.task.status.state for r in await receiver.wait_for(count)]):
        count += 1  # each notification in turn, until the one of the end
    assert TaskState.input_required in states and states[-1] is TaskState.completed


async def test_a_remote_down_at_start_joins_the_mesh_when_it_answers(
    serve_remote: ServeRemote, client: MeshClient, namespace: str
) -> None:
    port = free_port()
    inbox = Inbox()
    await client.transport.subscribe(get_agent_discovery_topic(namespace, "weather"), inbox)
    agent, _ = await serve_remote(card_url=f"http://127.0.0.1:{port}/.well-known/agent-card.json")
    assert agent.watch.present is False
    async with serving(app(port, Weather()), port):
        card = await client.wait_for_agent("weather", timeout=10)
        assert card.version == "2.1.0"
        assert text_of(await client.send("weather", "late")) == "echo: late"
    # Every card the topic ever held was the remote's: none was published while it was away.
    await inbox.wait_for(1)
    published = [AgentCard.model_validate_json(m.payload) for m in inbox.messages if m.payload]
    assert published and {c.version for c in published} == {"2.1.0"}

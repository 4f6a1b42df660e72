"""A caller learns within 2 s that the agent it waits on is gone (DESIGN, "Delivery guarantees").

Against the real broker: a request nobody subscribes to fails at once (PUBACK 0x10), and kill -9
of an agent with 100 tasks in flight fails every MeshClient call waiting on it ("went away",
from its will). The 2 s bound is part of the contract, so the tests measure it. The delegating
agent and the gateway's HTTP and SSE clients: tests/gateways/test_callee_gone.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mesh.broker import BrokerSettings
from mesh.cli.common import EXIT_UNKNOWN_AGENT
from mesh.client import MeshClient
from mesh.errors import AgentUnavailableError
from tests.conftest import TransportFactory
from tests.mesh.cli_process import mesh
from tests.support import Inbox, ended_at, publish_stale_card, start_agent_process, within

BOUND_S = 2.0  # DESIGN: a caller learns within 2 s that its callee is gone (bench/takeover.py measures it)


@pytest.fixture
async def client(broker_settings: BrokerSettings, namespace: str) -> AsyncIterator[MeshClient]:
    async with MeshClient.connect(broker_settings, namespace) as client:
        yield client


async def stream_until_error(client: MeshClient, agent: str, text: str, started: asyncio.Event) -> Any:
    """Stream to ``agent``; ``started`` is set with the first event (the task is running there)."""
    async for _item in client.stream(agent, text, idle_timeout=60):
        started.set()
    raise AssertionError(f"the stream to {agent!r} ended without an error")


async def test_a_request_nobody_listens_to_fails_at_once_naming_its_topic(client: MeshClient, namespace: str) -> None:
    topic = f"{namespace}/a2a/v1/agent/request/ghost"
    for how in ("send", "stream"):
        started = time.monotonic()
        with pytest.raises(AgentUnavailableError) as caught:
            if how == "send":
                await client.send("ghost", "hello", timeout=30)
            else:
                await stream_until_error(client, "ghost", "hello", asyncio.Event())
        elapsed = time.monotonic() - started
        error = caught.value
        assert str(error).startswith(f"no agent is listening on {topic!r}"), str(error)
        assert (error.agent, error.reason, error.topic) == ("ghost", "not_listening", topic)
        assert elapsed < within(BOUND_S), f"{how}: the refusal took {elapsed:.2f} s (guarantee: {BOUND_S} s)"
    assert client.calls.calls_to("ghost") == []


async def test_mesh_send_to_a_stale_card_says_nobody_listens(
    make_transport: TransportFactory, broker_url: str, namespace: str
) -> None:
    await publish_stale_card(await make_transport(), namespace, "ghost")  # passes discovery; nobody serves
    result = await mesh("send", "ghost", "hello", MESH_BROKER_URL=broker_url, MESH_NAMESPACE=namespace)
    assert result.code == EXIT_UNKNOWN_AGENT, result
    topic = f"{namespace}/a2a/v1/agent/request/ghost"
    assert f"mesh: no agent is listening on {topic!r}" in result.stderr, result.stderr


async def test_kill_9_fails_100_waiting_client_calls_within_2_s(
    client: MeshClient, make_transport: TransportFactory, broker_url: str, namespace: str
) -> None:
    proc = await start_agent_process(broker_url, namespace, "blocker", agent="Blocker")
    try:
        requests = Inbox()  # what reached the agent's request topic
        await (await make_transport()).subscribe(f"{namespace}/a2a/v1/agent/request/blocker", requests)
        streaming = [asyncio.Event() for _ in range(50)]
        waiting = [asyncio.create_task(ended_at(client.send("blocker", f"wait {i}", timeout=60))) for i in range(50)]
        waiting += [
            asyncio.create_task(ended_at(stream_until_error(client, "blocker", f"stream {i}", started)))
            for i, started in enumerate(streaming)
        ]
        await requests.wait_for(100)
        await asyncio.wait_for(asyncio.gather(*(started.wait() for started in streaming)), 10)  # running there
        assert len(client.calls.calls_to("blocker")) == 100
    finally:
        killed = time.monotonic()
        proc.kill()  # kill -9: no clean shutdown, only the will clears the card
        await proc.wait()
    outcomes = await asyncio.wait_for(asyncio.gather(*waiting), 10)
    for error, _at in outcomes:
        assert isinstance(error, AgentUnavailableError), repr(error)
        assert str(error).startswith("agent 'blocker' went away") and error.reason == "gone"
    slowest = max(at for _error, at in outcomes) - killed
    assert slowest < within(BOUND_S), f"the last of 100 failed {slowest:.2f} s after kill -9 (guarantee: {BOUND_S} s)"
    assert client.calls.calls_to("blocker") == []


async def test_a_call_sent_just_after_the_callees_card_went_fails_within_2_s(
    client: MeshClient, make_transport: TransportFactory, broker_url: str, namespace: str
) -> None:
    """The removal came while no call waited on the agent (its caller was still getting ready:
    an LLM agent's tool call before its first delegation subscribed its answer topics). The broker
    keeps the dead agent's session, so it takes the request without a word: the call must still
    learn that the agent went away, from the removal it saw just before."""
    proc = await start_agent_process(broker_url, namespace, "blocker", agent="Blocker")
    card_topic = f"{namespace}/a2a/v1/discovery/agentcards/blocker"
    cards = Inbox()
    await (await make_transport()).subscribe(card_topic, cards)
    try:
        await cards.wait_for(1)  # its card is there
    finally:
        proc.kill()  # kill -9: only the will clears the card
        await proc.wait()
    await cards.wait_for_payload(b"")  # the will cleared it
    client.calls.agent_gone("blocker")  # what a registry following the cards reports now
    started = time.monotonic()
    with pytest.raises(AgentUnavailableError) as caught:
        await client.send("blocker", "are you there?", timeout=30)
    assert str(caught.value).startswith("agent 'blocker' went away"), str(caught.value)
    assert time.monotonic() - started < within(BOUND_S)

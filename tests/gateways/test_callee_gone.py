"""A delegating agent and the gateway's HTTP and SSE clients learn within 2 s that their agent is gone.

Against the real broker (DESIGN, "Delivery guarantees"): a request nobody subscribes to is
answered at once (PUBACK 0x10), and kill -9 of the agent fails the delegating agent's sub-task,
a blocking ``message/send`` and a ``message/stream`` through the gateway with the mesh's "agent
gone" error (-32010) within 2 s, measured. MeshClient and the CLI: tests/mesh/calls/test_callee_gone.py.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from mesh.a2a import ErrorCode, Task, TaskState, get_text_from_message
from mesh.client import MeshClient
from tests.agents.service_agents import Relay
from tests.conftest import ServeAgent, TransportFactory
from tests.gateways.conftest import StartGateway
from tests.gateways.jsonrpc_http import call, error_of, message, stream_events
from tests.support import Inbox, ended_at, publish_stale_card, start_agent_process, within

BOUND_S = 2.0  # DESIGN: a caller learns within 2 s that its callee is gone (bench/takeover.py measures it)


def task_text(task: object) -> str:
    assert isinstance(task, Task) and task.status.message is not None, task
    return get_text_from_message(task.status.message)


async def test_a_stale_card_fails_delegation_and_http_at_once(
    serve_agent: ServeAgent,
    start_gateway: StartGateway,
    make_transport: TransportFactory,
    http: httpx.AsyncClient,
    broker_url: str,
    namespace: str,
) -> None:
    await publish_stale_card(await make_transport(), namespace, "ghost")  # passes discovery; nobody serves
    topic = f"{namespace}/a2a/v1/agent/request/ghost"
    await serve_agent(Relay(name="relay", next_agent="ghost"))
    gateway = await start_gateway(wait_for=("ghost", "relay"))
    async with MeshClient.connect(broker_url, namespace) as client:
        started = time.monotonic()
        task = await client.send("relay", "hello", timeout=30)
        elapsed = time.monotonic() - started
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    expected = f"PeerGoneError: delegation to 'ghost' failed: no agent is listening on {topic!r}"
    assert task_text(task).startswith(expected), task_text(task)
    assert elapsed < within(BOUND_S), f"the delegating task took {elapsed:.2f} s to fail (guarantee: {BOUND_S} s)"

    started = time.monotonic()
    response = await call(http, f"{gateway.public_url}/a2a/agents/ghost", "message/send", {"message": message()})
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    error = error_of(response)
    assert error["code"] == ErrorCode.AGENT_GONE.value == -32010
    assert error["data"]["errorType"] == "AgentGone" and error["data"]["reason"] == "not_listening"
    assert error["message"].startswith(f"no agent is listening on {topic!r}")
    assert elapsed < within(BOUND_S), f"the HTTP answer took {elapsed:.2f} s (guarantee: {BOUND_S} s)"


async def test_kill_9_fails_a_delegating_agent_and_http_clients_within_2_s(
    serve_agent: ServeAgent,
    start_gateway: StartGateway,
    make_transport: TransportFactory,
    http: httpx.AsyncClient,
    broker_url: str,
    namespace: str,
) -> None:
    proc = await start_agent_process(broker_url, namespace, "blocker", agent="Blocker")
    try:
        await serve_agent(Relay(name="relay", next_agent="blocker"))
        gateway = await start_gateway(wait_for=("blocker", "relay"))
        url = f"{gateway.public_url}/a2a/agents/blocker"
        requests = Inbox()  # what reached the agent's request topic
        await (await make_transport()).subscribe(f"{namespace}/a2a/v1/agent/request/blocker", requests)
        async with MeshClient.connect(broker_url, namespace) as client:
            delegating = asyncio.create_task(ended_at(client.send("relay", "wait", timeout=60)))
            blocking = asyncio.create_task(ended_at(call(http, url, "message/send", {"message": message("wait")})))
            streaming = asyncio.create_task(
                ended_at(stream_events(http, url, "message/stream", {"message": message("wait")}))
            )
            await requests.wait_for(3)  # the relay's sub-task, the HTTP send and the HTTP stream
            killed = time.monotonic()
            proc.kill()  # kill -9: no clean shutdown, only the will clears the card
            await proc.wait()
            (task, task_at), (response, response_at), (streamed, stream_at) = await asyncio.wait_for(
                asyncio.gather(delegating, blocking, streaming), 10
            )
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    assert isinstance(task, Task) and task.status.state is TaskState.failed, task
    assert task_text(task).startswith("PeerGoneError: delegation to 'blocker' failed: agent 'blocker' went away")

    assert isinstance(response, httpx.Response), repr(response)
    error = error_of(response)
    assert error["code"] == ErrorCode.AGENT_GONE and error["data"]["errorType"] == "AgentGone"
    assert error["data"]["reason"] == "gone" and error["message"].startswith("agent 'blocker' went away")

    assert isinstance(streamed, tuple), repr(streamed)
    name, last = streamed[1][-1]
    assert name == "error" and last["error"]["code"] == ErrorCode.AGENT_GONE, streamed[1]
    assert last["id"] == "s1" and last["error"]["message"].startswith("agent 'blocker' went away")

    for who, at in (("the delegating agent", task_at), ("the HTTP client", response_at), ("the SSE client", stream_at)):
        elapsed = at - killed
        assert elapsed < within(BOUND_S), f"{who} got its error {elapsed:.2f} s after the kill (guarantee: {BOUND_S} s)"

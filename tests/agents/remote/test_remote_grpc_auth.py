"""``auth:`` and ``headers:`` over gRPC: sent as metadata, to a real a2a-sdk gRPC server that refuses
a call without them; an OAuth 2 token the server stopped honouring is replaced."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from agents.remote.http import OAuth2ClientCredentials
from mesh.a2a import Task, TaskState, TextPart
from mesh.brokertools.localbroker import free_port
from mesh.client import MeshClient
from tests.agents.remote.conftest import ServeRemote
from tests.agents.remote.server import (
    CLIENT_ID,
    CLIENT_SECRET,
    Tokens,
    Weather,
    app,
    card,
    handler_for,
    serving,
    serving_grpc,
)
from tests.support import wait_until

pytest.importorskip("grpc", reason="the grpc extra is not installed")


def text_of(task: object) -> str:
    assert isinstance(task, Task) and task.status.message is not None, task
    return "".join(p.text for p in task.status.message.parts if isinstance(p, TextPart))


Admits = Callable[[dict[str, str]], bool]


@asynccontextmanager
async def grpc_remote(executor: Weather, tokens: Tokens, admits: Admits) -> AsyncIterator[str]:
    """The remote on HTTP (its card, its token endpoint) and gRPC (guarded by ``admits``); its card URL."""
    port, grpc_port = free_port(), free_port()
    the_card = card(port, grpc_port=grpc_port)
    handler = handler_for(executor, the_card)
    async with (
        serving(app(port, executor, tokens, agent_card=the_card, handler=handler), port),
        serving_grpc(handler, grpc_port, admits),
    ):
        yield f"http://127.0.0.1:{port}/.well-known/agent-card.json"


async def test_an_api_key_and_headers_go_as_grpc_metadata(
    serve_remote: ServeRemote, client: MeshClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEATHER_KEY", "k-123")
    executor, tokens = Weather(), Tokens()
    seen: list[dict[str, str]] = []

    def admits(metadata: dict[str, str]) -> bool:
        seen.append(metadata)
        ok = metadata.get("x-api-key") == "k-123" and metadata.get("x-team") == "mesh"
        tokens.refused += not ok
        return ok

    async with grpc_remote(executor, tokens, admits) as card_url:
        auth = {"type": "api_key", "header": "X-API-Key", "key_env": "WEATHER_KEY"}
        agent, _ = await serve_remote(card_url=card_url, binding="GRPC", auth=auth, headers={"X-Team": "mesh"})
        assert type(agent.client_transport).__name__ == "GrpcTransport"
        await client.wait_for_agent("weather", timeout=5)
        assert text_of(await client.send("weather", "keyed")) == "echo: keyed"
        items = [item async for item in client.stream("weather", "steps")]
        assert text_of(items[-1]) == "done"
        slow = await client.send("weather", "slow", blocking=False)  # CancelTask: a unary call
        assert isinstance(slow, Task)
        await wait_until(lambda: "slow" in executor.received, executor.changed, 10)
        canceled = await client.cancel_task("weather", slow.id)
        assert canceled.status.state is TaskState.canceled
        assert len(executor.canceled) == 1 and tokens.refused == 0
        assert len(seen) >= 4  # send, stream, the slow one's and the cancel: each call was checked


async def test_an_oauth2_token_over_grpc_is_fetched_and_replaced_when_refused(
    serve_remote: ServeRemote, client: MeshClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEATHER_SECRET", CLIENT_SECRET)
    executor, tokens = Weather(), Tokens()

    def admits(metadata: dict[str, str]) -> bool:
        ok = metadata.get("authorization", "").removeprefix("Bearer ") in tokens.valid
        tokens.refused += not ok
        return ok

    async with grpc_remote(executor, tokens, admits) as card_url:
        auth = {
            "type": "oauth2",
            "token_url": card_url.replace("/.well-known/agent-card.json", "/token"),
            "client_id": CLIENT_ID,
            "client_secret_env": "WEATHER_SECRET",
        }
        agent, _ = await serve_remote(card_url=card_url, binding="GRPC", auth=auth)
        await client.wait_for_agent("weather", timeout=5)
        assert text_of(await client.send("weather", "first")) == "echo: first"
        tokens.expire_all()  # the server forgets its tokens: the next call is refused once
        assert text_of(await client.send("weather", "second")) == "echo: second"
        tokens.expire_all()
        items = [item async for item in client.stream("weather", "steps")]
        assert text_of(items[-1]) == "done"
        assert isinstance(agent.auth, OAuth2ClientCredentials)
        assert (agent.auth.fetched, tokens.issued, tokens.refused) == (3, 3, 2)
        assert executor.received == ["first", "second", "steps"]

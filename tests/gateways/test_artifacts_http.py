"""Artifacts end to end on the real broker: agents save, the HTTP gateway serves, clients upload.

Each test runs against the embedded store and against a real S3-compatible server (moto).
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.client.client import Client
from a2a.types import GetTaskRequest, Part, Role, SendMessageRequest, TaskState
from a2a.types import Message as SdkMessage
from a2a.types import Task as SdkTask

from agents import Agent, AgentService, TaskContext
from gateways.http.server import HttpGateway
from gateways.http.settings import HttpGatewaySettings
from mesh.a2a import FilePart, FileWithUri, Message, get_text_from_message
from mesh.artifacts import ArtifactLimits, ArtifactSettings, open_store
from mesh.broker import BrokerSettings
from mesh.transport import InboundMessage
from tests.artifact_stores import store_settings

MB = 1 << 20
USERS = {"alice": "alice-pw", "bob": "bob-pw"}
ALICE, BOB = ("alice", "alice-pw"), ("bob", "bob-pw")


class Producer(Agent):
    """``make N name``: saves N MB of random bytes, streamed from an async iterator."""

    name = "producer"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.digests: dict[str, str] = {}

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        _, size, name = get_text_from_message(message).split()
        digest = hashlib.sha256()

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(int(size)):
                chunk = os.urandom(MB)
                digest.update(chunk)
                yield chunk

        uri = await ctx.save_artifact(name, chunks(), "application/x-test")
        self.digests[uri] = digest.hexdigest()
        return uri


class Consumer(Agent):
    """Loads every file part that came by URI; answers ``<uri> <size> <sha256>`` per file."""

    name = "consumer"

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        lines = []
        for part in message.parts:
            if isinstance(part, FilePart) and isinstance(part.file, FileWithUri):
                data = await ctx.load_artifact(part.file.uri)
                lines.append(f"{part.file.uri} {len(data)} {hashlib.sha256(data).hexdigest()}")
            elif isinstance(part, FilePart):
                lines.append("inline")
        return "\n".join(lines)


Start = Callable[..., Awaitable[tuple[HttpGateway, Agent]]]


@pytest.fixture
async def mesh_with_store(
    broker_settings: BrokerSettings, namespace: str, store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Start]:
    """``await start(agent, limits=...)``: the agent and a gateway (basic auth) sharing one store."""
    running: list[Any] = []

    async def start(
        agent: Agent, limits: ArtifactLimits | None = None, *, grpc: bool = False
    ) -> tuple[HttpGateway, Agent]:
        settings = store_settings(store_kind, tmp_path, request, limits)
        service = AgentService(agent, broker=broker_settings, namespace=namespace, artifacts=settings)
        await service.start()
        running.append(service)
        gateway_settings = HttpGatewaySettings.model_validate(
            {
                "port": 0,
                "auth": {"mode": "basic", "users": USERS},
                "limits": {"max_message_bytes": 8_000_000},
                "grpc_port": 0 if grpc else None,
            }
        )
        gateway = HttpGateway(gateway_settings, broker=broker_settings, namespace=namespace, artifacts=settings)
        await gateway.start()
        running.append(gateway)
        await gateway.runtime.registry.wait_for(agent.name, 5)
        request.node.artifact_settings = settings
        return gateway, agent

    yield start
    for component in reversed(running):
        await component.stop()


class BrokerTally:
    """Every non-retained message of the namespace (its '#'), by size."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def __call__(self, message: InboundMessage) -> None:
        if not message.retain:
            self.sizes.append(len(message.payload))


async def _send(http: httpx.AsyncClient, gateway: HttpGateway, agent: str, parts: list[Any], auth: Any = ALICE) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": "r1",
        "method": "message/send",
        "params": {"message": {"role": "user", "messageId": os.urandom(8).hex(), "parts": parts}},
    }
    response = await http.post(f"{gateway.public_url}/a2a/agents/{agent}", json=body, auth=auth)
    response.raise_for_status()
    return response.json()["result"]


def _file_uri(task: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    part = task["artifacts"][0]["parts"][0]
    return part["file"]["uri"], part["metadata"]


async def test_50_mb_artifact_is_downloaded_byte_identical_while_the_broker_carries_only_small_messages(
    mesh_with_store: Start, make_transport: Any, namespace: str
) -> None:
    gateway, producer = await mesh_with_store(Producer())
    tally = BrokerTally()
    watcher = await make_transport()
    await watcher.subscribe(f"{namespace}/#", tally)
    async with httpx.AsyncClient(timeout=60) as http:
        task = await _send(http, gateway, "producer", [{"kind": "text", "text": "make 50 report.bin"}])
        assert task["status"]["state"] == "completed"
        link, metadata = _file_uri(task)
        assert metadata["size_bytes"] == 50 * MB and metadata["version"] == 1
        assert metadata["artifactUri"].startswith(f"artifact://{task['contextId']}/report.bin?version=1")
        assert link.startswith(f"{gateway.public_url}/a2a/artifacts/{task['contextId']}/report.bin?version=1&")
        digest = hashlib.sha256()
        async with http.stream("GET", link) as response:  # the signed link needs no credentials
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/x-test"
            assert response.headers["content-disposition"].startswith('attachment; filename="report.bin"')
            assert response.headers["content-length"] == str(50 * MB)
            async for chunk in response.aiter_bytes():
                digest.update(chunk)
    assert digest.hexdigest() == next(iter(producer.digests.values()))  # type: ignore[attr-defined]
    assert tally.sizes, "the broker carried the request and its answer"
    assert max(tally.sizes) < 4096, f"a message of {max(tally.sizes)} bytes crossed the broker"


async def test_5_mb_upload_reaches_the_agent_as_a_uri_and_loads(
    mesh_with_store: Start, make_transport: Any, namespace: str
) -> None:
    gateway, _ = await mesh_with_store(Consumer())
    tally = BrokerTally()
    watcher = await make_transport()
    await watcher.subscribe(f"{namespace}/#", tally)
    data = os.urandom(5 * MB)
    part = {
        "kind": "file",
        "file": {"name": "in.bin", "mimeType": "application/pdf", "bytes": base64.b64encode(data).decode()},
    }
    small = {"kind": "file", "file": {"name": "small.txt", "bytes": base64.b64encode(b"hi").decode()}}
    async with httpx.AsyncClient(timeout=60) as http:
        task = await _send(http, gateway, "consumer", [part, small])
        uri, size, digest = task["status"]["message"]["parts"][0]["text"].splitlines()[0].split()
        assert task["status"]["message"]["parts"][0]["text"].splitlines()[1] == "inline"  # small ones stay inline
        assert uri == f"artifact://{task['contextId']}/in.bin?version=1"
        assert (int(size), digest) == (len(data), hashlib.sha256(data).hexdigest())
        # The uploader owns it: alice downloads it with her credentials, bob cannot see it.
        path = f"{gateway.public_url}/a2a/artifacts/{task['contextId']}/in.bin"
        mine = await http.get(path, auth=ALICE)
        assert mine.status_code == 200 and mine.content == data
        assert mine.headers["content-type"] == "application/pdf"
        assert (await http.get(path, auth=BOB)).status_code == 404
    assert max(tally.sizes) < 4096


async def test_versions_ranges_and_foreign_users(mesh_with_store: Start) -> None:
    gateway, _ = await mesh_with_store(Producer())
    async with httpx.AsyncClient(timeout=60) as http:
        first = await _send(http, gateway, "producer", [{"kind": "text", "text": "make 1 v.bin"}])
        context = first["contextId"]
        body = {"kind": "text", "text": "make 2 v.bin"}
        second = await _send_in_context(http, gateway, context, body)
        link1, meta1 = _file_uri(first)
        _, meta2 = _file_uri(second)
        assert (meta1["version"], meta2["version"]) == (1, 2)
        base = f"{gateway.public_url}/a2a/artifacts/{context}/v.bin"
        latest = await http.get(base, auth=ALICE)
        v1 = await http.get(f"{base}?version=1", auth=ALICE)
        assert len(latest.content) == 2 * MB and len(v1.content) == MB
        assert (await http.get(link1)).content == v1.content
        part = await http.get(f"{base}?version=1", auth=ALICE, headers={"Range": "bytes=100-199"})
        assert part.status_code == 206 and part.content == v1.content[100:200]
        assert part.headers["content-range"] == f"bytes 100-199/{MB}"
        tail = await http.get(f"{base}?version=1", auth=ALICE, headers={"Range": "bytes=-10"})
        assert tail.status_code == 206 and tail.content == v1.content[-10:]
        beyond = await http.get(f"{base}?version=1", auth=ALICE, headers={"Range": f"bytes={MB}-"})
        assert beyond.status_code == 416 and beyond.headers["content-range"] == f"bytes */{MB}"
        # Another user: 404 by path, by a link re-signed for them, and for a missing one alike.
        assert (await http.get(base, auth=BOB)).status_code == 404
        forged = link1.replace("user=alice", "user=bob")
        assert (await http.get(forged, auth=BOB)).status_code == 404
        assert (await http.get(forged)).status_code == 401  # no valid link, no credentials
        assert (await http.get(f"{base}?version=9", auth=ALICE)).status_code == 404
        assert (await http.get(f"{gateway.public_url}/a2a/artifacts/{context}/..%2Fx", auth=ALICE)).status_code == 404


async def _send_in_context(http: httpx.AsyncClient, gateway: HttpGateway, context: str, part: Any) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": "r2",
        "method": "message/send",
        "params": {
            "message": {"role": "user", "messageId": os.urandom(8).hex(), "contextId": context, "parts": [part]}
        },
    }
    response = await http.post(f"{gateway.public_url}/a2a/agents/producer", json=body, auth=ALICE)
    return response.json()["result"]


async def test_hostile_names_and_a_full_store_fail_the_task_cleanly(
    mesh_with_store: Start, request: pytest.FixtureRequest
) -> None:
    gateway, _ = await mesh_with_store(Producer(), ArtifactLimits(max_namespace_bytes=3 * MB))
    async with httpx.AsyncClient(timeout=60) as http:
        for name in ("../escape.bin", ".hidden", "a//b", "x" * 300):
            task = await _send(http, gateway, "producer", [{"kind": "text", "text": f"make 1 {name}"}])
            assert task["status"]["state"] == "failed"
            assert "InvalidArtifactName" in task["status"]["message"]["parts"][0]["text"]
        await _send(http, gateway, "producer", [{"kind": "text", "text": "make 2 ok.bin"}])
        task = await _send(http, gateway, "producer", [{"kind": "text", "text": "make 2 toomuch.bin"}])
        assert task["status"]["state"] == "failed"
        assert "max_namespace_bytes" in task["status"]["message"]["parts"][0]["text"]
    settings: ArtifactSettings = request.node.artifact_settings
    store = open_store(settings, gateway.runtime.namespace)
    assert [i.name for i in await store.list()] == ["ok.bin"]
    assert await store.usage() == 2 * MB  # nothing partial of the refused one
    await store.close()


async def _grpc_client(http: httpx.AsyncClient, gateway: HttpGateway, agent: str, streaming: bool) -> Client:
    """The a2a-sdk client on the gRPC interface of the card the gateway serves."""
    card = (await http.get(f"{gateway.public_url}/a2a/agents/{agent}/card")).json()
    card["supportedInterfaces"] = [i for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"]
    config = ClientConfig(
        streaming=streaming, supported_protocol_bindings=["GRPC"], grpc_channel_factory=grpc.aio.insecure_channel
    )
    return await create_client(parse_agent_card(card), client_config=config)


def _as(user: tuple[str, str]) -> ClientCallContext:
    token = base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
    return ClientCallContext(service_parameters={"authorization": f"Basic {token}"})


def _sdk_request(*parts: Part) -> SendMessageRequest:
    return SendMessageRequest(message=SdkMessage(role=Role.ROLE_USER, message_id=os.urandom(8).hex(), parts=parts))


async def _final_task(client: Client, request: SendMessageRequest, user: tuple[str, str]) -> SdkTask:
    events = [event async for event in client.send_message(request, context=_as(user))]
    tasks = [event.task for event in events if event.HasField("task")]
    if tasks and tasks[-1].status.state == TaskState.TASK_STATE_COMPLETED:
        return tasks[-1]
    got = await client.get_task(GetTaskRequest(id=tasks[0].id), context=_as(user))
    return got


@pytest.mark.parametrize("streaming", [False, True])
async def test_grpc_answers_carry_the_callers_download_links(mesh_with_store: Start, streaming: bool) -> None:
    """The a2a-sdk gRPC client: artifact:// URIs come back as signed links, as on JSON-RPC and REST."""
    gateway, producer = await mesh_with_store(Producer(), grpc=True)
    async with httpx.AsyncClient(timeout=60) as http:
        async with await _grpc_client(http, gateway, "producer", streaming) as client:
            task = await _final_task(client, _sdk_request(Part(text="make 1 g.bin")), ALICE)
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        [part] = [part for artifact in task.artifacts for part in artifact.parts]
        assert part.url.startswith(f"{gateway.public_url}/a2a/artifacts/{task.context_id}/g.bin?version=1&user=alice")
        downloaded = await http.get(part.url)  # the signed link stands in for credentials
        assert downloaded.status_code == 200 and downloaded.headers["content-type"] == "application/x-test"
        uri = f"artifact://{task.context_id}/g.bin?version=1"
        assert hashlib.sha256(downloaded.content).hexdigest() == producer.digests[uri]  # type: ignore[attr-defined]
        assert (await http.get(part.url.replace("user=alice", "user=bob"))).status_code == 401


async def test_a_grpc_upload_above_the_threshold_reaches_the_agent_as_a_uri(mesh_with_store: Start) -> None:
    gateway, _ = await mesh_with_store(Consumer(), grpc=True)
    data = os.urandom(1_500_000)  # above the 1 MB threshold, within gRPC's 4 MB message
    upload = Part(raw=data, filename="in.bin", media_type="application/pdf")
    async with httpx.AsyncClient(timeout=60) as http:
        async with await _grpc_client(http, gateway, "consumer", False) as client:
            task = await _final_task(client, _sdk_request(upload, Part(text="and a note")), ALICE)
        [line] = "".join(p.text for p in task.status.message.parts).splitlines()
        uri, size, digest = line.split()
        assert uri == f"artifact://{task.context_id}/in.bin?version=1"
        assert (int(size), digest) == (len(data), hashlib.sha256(data).hexdigest())
        path = f"{gateway.public_url}/a2a/artifacts/{task.context_id}/in.bin"
        mine = await http.get(path, auth=ALICE)  # the uploader owns it
        assert mine.content == data and mine.headers["content-type"] == "application/pdf"
        assert (await http.get(path, auth=BOB)).status_code == 404

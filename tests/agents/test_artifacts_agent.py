"""Agents and artifacts on the real broker: save, load, automatic offload, and the CLI's
``mesh send --save-artifacts``."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents import Agent, AgentService, AgentSettings, FileArtifact, Status, TaskContext, Update
from mesh.a2a import FilePart, FileWithBytes, FileWithUri, Message, TaskState, TextPart
from mesh.artifacts import ArtifactRef, ArtifactSettings, open_store, read_all
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from tests.artifact_stores import store_settings
from tests.mesh.cli_process import mesh

BIG = os.urandom(2_000_000)
SMALL = b"small file"


class Files(Agent):
    """Yields a big inline file (stored for it), a small one (inline), and saves one from a path."""

    name = "files"

    def __init__(self, source: Path, **options: Any) -> None:
        super().__init__(**options)
        self.source = source
        self.loaded: bytes | None = None

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update]:
        yield FileArtifact("big.bin", content=BIG, mime_type="application/octet-stream")
        yield FileArtifact("small.txt", content=SMALL, mime_type="text/plain")
        uri = await ctx.save_artifact("docs/from-path.bin", self.source)
        self.loaded = await ctx.load_artifact(uri)
        assert [i.name for i in await ctx.list_artifacts()] == ["big.bin", "docs/from-path.bin"]


async def test_artifacts_of_an_agent_travel_by_uri_and_the_cli_saves_them(
    broker_settings: BrokerSettings, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(1_500_000))
    settings = ArtifactSettings(path=str(tmp_path / "store"))
    agent = Files(source)
    service = AgentService(agent, broker=broker_settings, namespace=namespace, artifacts=settings)
    await service.start()
    try:
        async with MeshClient.connect(broker_settings, namespace) as client:
            await client.wait_for_agent("files", timeout=5)
            task = await client.send("files", "go", timeout=30)
        assert task.status.state is TaskState.completed
        parts = [a.parts[0] for a in task.artifacts or []]
        assert all(isinstance(p, FilePart) for p in parts)
        big, small, from_path = parts
        assert isinstance(big, FilePart) and isinstance(big.file, FileWithUri)
        assert big.file.uri == f"artifact://{task.context_id}/big.bin?version=1"
        assert big.metadata == {"size_bytes": len(BIG), "version": 1}
        assert isinstance(small, FilePart) and isinstance(small.file, FileWithBytes)  # under the threshold
        assert isinstance(from_path, FilePart) and isinstance(from_path.file, FileWithUri)
        assert agent.loaded == source.read_bytes()
        store = open_store(settings, namespace)
        assert await read_all(store, ArtifactRef.parse(big.file.uri)) == BIG
        await store.close()

        out = tmp_path / "out"
        env = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace, "MESH_ARTIFACTS": settings.path or ""}
        result = await mesh("send", "files", "again", "--save-artifacts", str(out), **env)
        assert result.code == 0, result.stderr
        assert (out / "big.bin").read_bytes() == BIG
        assert (out / "small.txt").read_bytes() == SMALL
        assert (out / "docs" / "from-path.bin").read_bytes() == source.read_bytes()
        assert f"saved {out / 'big.bin'} ({len(BIG)} bytes)" in result.stderr
        assert not list(out.rglob("*.part"))
    finally:
        await service.stop()


class Reporter(Agent):
    """Saves one artifact per task, named after the message."""

    name = "reporter"

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update]:
        text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
        await ctx.save_artifact(f"{text}.txt", text.encode(), "text/plain")
        yield Status("saved")


async def test_artifacts_leave_with_their_task_past_its_retention(
    broker_settings: BrokerSettings,
    namespace: str,
    tmp_path: Path,
    store_kind: str,
    request: pytest.FixtureRequest,
) -> None:
    settings = store_settings(store_kind, tmp_path, request)
    store = open_store(settings, namespace)
    # Past retention at once: each finished task is forgotten when the next one finishes, and
    # at a restart every finished task the journal holds is.
    agent_settings = AgentSettings(task_retention_s=1e-9, task_store=str(tmp_path / "tasks.sqlite3"))

    async def owners() -> list[tuple[str, str | None]]:
        return [(i.name, i.owner_task) for i in await store.list()]

    service = AgentService(
        Reporter(), broker=broker_settings, namespace=namespace, settings=agent_settings, artifacts=settings
    )
    await service.start()
    try:
        async with MeshClient.connect(broker_settings, namespace) as client:
            await client.wait_for_agent("reporter", timeout=5)
            first = await client.send("reporter", "first", timeout=30)
            await store.save(first.context_id, "by-hand.txt", b"not a task's")  # no owner: stays
            assert sorted(await owners()) == [("by-hand.txt", None), ("first.txt", first.id)]
            second = await client.send("reporter", "second", timeout=30)
            await service.artifact_reaper.idle()
            assert sorted(await owners()) == [("by-hand.txt", None), ("second.txt", second.id)]
            assert service.artifact_reaper.deleted == 1
    finally:
        await service.stop()
    # The restart finds the second task past its retention in the journal: its artifact goes too.
    service = AgentService(
        Reporter(), broker=broker_settings, namespace=namespace, settings=agent_settings, artifacts=settings
    )
    await service.start()
    try:
        await service.artifact_reaper.idle()
        assert await owners() == [("by-hand.txt", None)]
        assert service.artifact_reaper.deleted == 1
    finally:
        await service.stop()
        await store.close()

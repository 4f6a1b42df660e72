"""A2E workers save and load artifacts through the mesh (artifact/save, artifact/load)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agents import AgentService
from agents.a2e import WorkerAgent
from mesh.a2a import FilePart, FileWithUri, TaskState, get_text_from_message
from mesh.artifacts import ArtifactSettings
from mesh.broker import BrokerSettings
from mesh.client import MeshClient

SCRIPT = Path(__file__).resolve().parent.parent / "a2e_artifact_worker.py"
FAST = {"backoff_s": 0.05, "ping_interval_s": 0, "handshake_timeout_s": 10.0}


async def test_a_worker_saves_and_loads_artifacts_by_path_and_inline(
    broker_settings: BrokerSettings, namespace: str, tmp_path: Path
) -> None:
    agent = WorkerAgent(name="maker", worker=[sys.executable, str(SCRIPT)], **FAST)
    settings = ArtifactSettings(path=str(tmp_path / "store"))
    service = AgentService(agent, broker=broker_settings, namespace=namespace, artifacts=settings)
    await service.start()
    try:
        async with MeshClient.connect(broker_settings, namespace) as client:
            await client.wait_for_agent("maker", timeout=10)
            task = await client.send("maker", "3000000", timeout=30)
    finally:
        await service.stop()
    assert task.status.state is TaskState.completed, task.status
    assert task.status.message is not None
    seen = json.loads(get_text_from_message(task.status.message))
    assert seen["uri"] == f"artifact://{task.context_id}/made.bin?version=1"
    assert (seen["size"], seen["version"], seen["loaded_same"]) == (3_000_000, 1, True)
    assert seen["loaded_mime"] == "application/x-made" and seen["inline_back"] == "tiny"
    assert "bad segment" in seen["hostile_error"]
    # Each save was announced as the task's artifact, by URI.
    uris = [p.file.uri for a in task.artifacts or [] for p in a.parts if isinstance(p, FilePart)]
    assert all(
        isinstance(p.file, FileWithUri) for a in task.artifacts or [] for p in a.parts if isinstance(p, FilePart)
    )
    assert uris == [seen["uri"], f"artifact://{task.context_id}/tiny.txt?version=1"]

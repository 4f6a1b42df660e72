"""The built-in artifact tools of an LLM agent (list_artifacts, load_artifact, save_artifact),
against the real filesystem store and the real broker."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agents.service import AgentService
from agents.testing import llm_agent
from mesh.a2a import FilePart, Task, TaskArtifactUpdateEvent, TaskState, get_text_from_message
from mesh.artifacts import ArtifactRef, ArtifactSettings, open_store, read_all
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from tests.agents.llm.scripts import call, scripted, tool_returns


def returned(messages: list[ModelMessage]) -> dict[str, Any]:
    """The tool results the model got last, by call id."""
    return {p.tool_call_id: p.content for p in tool_returns(messages)}


def notes_uri(listed: list[dict[str, Any]]) -> str:
    return str(next(a["uri"] for a in listed if a["name"] == "notes.md"))


async def test_the_model_saves_lists_and_loads_the_conversations_files(
    broker_settings: BrokerSettings, namespace: str, client: MeshClient, tmp_path: Path
) -> None:
    context = f"ctx-{uuid.uuid4().hex[:8]}"
    store = open_store(ArtifactSettings(path=str(tmp_path)), namespace)
    # Files the model must not reach: another conversation's, and another user's in this one.
    await store.save("elsewhere", "secret.txt", b"not yours", mime_type="text/plain")
    await store.save(context, "theirs.txt", b"mallory's", mime_type="text/plain", owner_user="mallory")
    await store.save(context, "data.bin", b"\x00\x01\x02", mime_type="application/octet-stream")

    model = scripted(
        [call("save_artifact", {"name": "notes.md", "content": "# Notes\nsunny", "mime_type": "text/markdown"}, "s")],
        [call("list_artifacts", {}, "l")],
        lambda messages: [
            call("load_artifact", {"uri": notes_uri(returned(messages)["l"])}, "a", 0),
            call("load_artifact", {"uri": f"artifact://{context}/data.bin"}, "b", 1),
            call("load_artifact", {"uri": "artifact://elsewhere/secret.txt"}, "x", 2),
            call("load_artifact", {"uri": f"artifact://{context}/theirs.txt"}, "y", 3),
        ],
        lambda messages: [json.dumps(returned(messages), sort_keys=True)],
    )
    await store.close()
    agent = llm_agent({"model": "test"}, model)
    service = AgentService(
        agent, broker=broker_settings, namespace=namespace, artifacts=ArtifactSettings(path=str(tmp_path))
    )
    await service.start()
    try:
        items = [item async for item in client.stream("assistant", "take notes", context_id=context)]
    finally:
        await service.stop()
    store = open_store(ArtifactSettings(path=str(tmp_path)), namespace)  # what is on disk now

    final = items[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.completed
    # save_artifact: stored in this context with the task as owner, and announced to the client.
    [saved] = returned(model.seen[1]).values()  # type: ignore[attr-defined]
    assert saved == {"uri": f"artifact://{context}/notes.md?version=1", "name": "notes.md", "version": 1, "size": 13}
    info = await store.info(ArtifactRef.parse(saved["uri"]))
    assert (info.mime_type, info.owner_task) == ("text/markdown", final.id)
    assert await read_all(store, info.ref) == b"# Notes\nsunny"
    [update] = [i for i in items if isinstance(i, TaskArtifactUpdateEvent)]
    [part] = update.artifact.parts
    assert isinstance(part, FilePart) and getattr(part.file, "uri", None) == saved["uri"]
    # list_artifacts: this conversation's files the user may see, the latest version of each.
    listed = returned(model.seen[2])["l"]  # type: ignore[attr-defined]
    assert sorted(a["name"] for a in listed) == ["data.bin", "notes.md"]
    # load_artifact: text as text, bytes as base64; the others as if they did not exist.
    loaded = json.loads(get_text_from_message(final.status.message)) if final.status.message else {}
    assert loaded["a"]["text"] == "# Notes\nsunny" and loaded["a"]["mimeType"] == "text/markdown"
    assert loaded["b"]["base64"] == "AAEC"
    for refused, uri in (("x", "artifact://elsewhere/secret.txt"), ("y", f"artifact://{context}/theirs.txt")):
        assert loaded[refused] == {"error": f"no artifact {uri} here; list_artifacts shows the ones you can load"}
    await store.close()


async def test_artifact_tools_can_be_turned_off(
    broker_settings: BrokerSettings, namespace: str, client: MeshClient, tmp_path: Path
) -> None:
    offered: list[list[str]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        offered.append(sorted(t.name for t in info.function_tools))
        yield "ok"

    for on in (True, False):
        agent = llm_agent({"model": "test", "artifact_tools": on}, FunctionModel(stream_function=stream))
        store = ArtifactSettings(path=str(tmp_path))
        service = AgentService(agent, broker=broker_settings, namespace=namespace, artifacts=store)
        await service.start()
        try:
            await client.send("assistant", "hi")
        finally:
            await service.stop()
    assert offered == [["ask_user", "list_artifacts", "load_artifact", "save_artifact"], ["ask_user"]]

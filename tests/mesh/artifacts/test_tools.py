"""The artifact tools LLM agents wrap: plain async functions answering JSON-ready dicts."""

from __future__ import annotations

import base64
from pathlib import Path

from mesh.artifacts import ArtifactSettings, open_store
from mesh.artifacts.tools import list_artifacts, load_artifact, save_artifact


async def test_save_list_and_load_and_errors_as_text(tmp_path: Path) -> None:
    store = open_store(ArtifactSettings(path=str(tmp_path)), "tools")
    saved = await save_artifact(store, "ctx", "notes.md", "# one", owner_task="t1", owner_user="u")
    assert saved == {"uri": "artifact://ctx/notes.md?version=1", "name": "notes.md", "version": 1, "size": 5}
    await save_artifact(store, "ctx", "notes.md", "# two", mime_type="text/markdown")
    await save_artifact(store, "ctx", "pic.png", b"\x89PNG....")
    listed = await list_artifacts(store, "ctx")
    assert [(a["name"], a["version"]) for a in listed] == [("notes.md", 2), ("pic.png", 1)]
    text = await load_artifact(store, "artifact://ctx/notes.md")
    assert text["text"] == "# two" and text["mimeType"] == "text/markdown"
    assert (await load_artifact(store, "artifact://ctx/notes.md?version=1"))["text"] == "# one"
    binary = await load_artifact(store, "artifact://ctx/pic.png", max_bytes=4)
    assert base64.b64decode(binary["base64"]) == b"\x89PNG" and "truncated" in binary
    assert "not an artifact URI" in (await load_artifact(store, "https://x/y"))["error"]
    assert "no artifact" in (await load_artifact(store, "artifact://ctx/missing.txt"))["error"]
    assert "bad segment" in (await save_artifact(store, "ctx", "../x", "no"))["error"]
    await store.close()

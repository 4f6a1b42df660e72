"""The chat's store on both engines (SQLite, and PostgreSQL from tests/postgres.py): conversations
per owner, turns in order, the bounds, and a conversation that is another's simply not found."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateways.chat import store as chat
from gateways.chat.store import ChatLimitReached, Conversations
from gateways.http.server import chat_store


@pytest.fixture(params=["sqlite", "postgres"])
async def conversations(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Conversations]:
    namespace = f"test/{uuid.uuid4().hex[:12]}"
    if request.param == "sqlite":
        made = chat_store(str(tmp_path / "chat.sqlite"), namespace, "http")
    else:
        made = chat_store(request.getfixturevalue("postgres_url"), namespace, "http")
    yield made
    await made.aclose()


async def test_turns_come_back_in_order_and_only_to_their_owner(conversations: Conversations) -> None:
    made = await conversations.create("alice", "echo")
    first = await conversations.add_turn("alice", made["id"], "user", {"text": "hello"}, title="hello there")
    second = await conversations.add_turn("alice", made["id"], "agent", {"events": []})
    await conversations.update_turn(made["id"], second, {"events": [], "text": "hi"}, task_id="t-1", state="completed")
    got = await conversations.get("alice", made["id"])
    assert got is not None and got["title"] == "hello there" and got["contextId"] == made["contextId"]
    assert [(t["seq"], t["role"], t.get("text"), t["taskId"]) for t in got["turns"]] == [
        (first, "user", "hello", None),
        (second, "agent", "hi", "t-1"),
    ]
    assert await conversations.get("mallory", made["id"]) is None  # another's: not found
    assert await conversations.delete("mallory", made["id"]) is False
    with pytest.raises(KeyError):
        await conversations.add_turn("mallory", made["id"], "user", {"text": "mine now"})
    assert [c["id"] for c in await conversations.conversations("alice")] == [made["id"]]
    assert await conversations.conversations("mallory") == []
    assert await conversations.delete("alice", made["id"]) is True
    assert await conversations.get("alice", made["id"]) is None


async def test_the_bounds_hold(conversations: Conversations, monkeypatch: pytest.MonkeyPatch) -> None:
    from gateways.chat import pgstore

    for module in (chat, pgstore):
        monkeypatch.setattr(module, "MAX_CONVERSATIONS", 3)
        monkeypatch.setattr(module, "MAX_TURNS", 2)
    made = [await conversations.create("bob", "echo") for _ in range(5)]
    kept = [c["id"] for c in await conversations.conversations("bob")]
    assert len(kept) == 3 and set(kept) <= {c["id"] for c in made[2:]} | {made[1]["id"]}
    last = made[-1]["id"]
    await conversations.add_turn("bob", last, "user", {"text": "1"})
    await conversations.add_turn("bob", last, "agent", {"text": "2"})
    with pytest.raises(ChatLimitReached, match="start a new one"):
        await conversations.add_turn("bob", last, "user", {"text": "3"})
    huge = await conversations.add_turn("bob", made[-2]["id"], "user", {"text": "x" * (chat.MAX_TURN_BYTES + 1)})
    got = await conversations.get("bob", made[-2]["id"])
    assert got is not None and got["turns"][huge]["truncated"] is True

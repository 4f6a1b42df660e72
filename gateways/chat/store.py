"""The chat's conversations, kept by the gateway in SQLite (one file in its state directory).

A conversation belongs to one user (the principal's name), talks to one agent on one A2A
``contextId`` and is a list of turns: the user's (``{"text", "files"}``) and the agent's (the A2A
stream items of its answer, in order). Every read and write names the owner: another user's
conversation is simply not found.

sqlite3 blocks, so each call runs in a worker thread (``asyncio.to_thread``) on one connection
guarded by a lock. Sizes are bounded: conversations per user, turns per conversation, bytes
per turn.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mesh.config.statedir import namespace_state_dir, path_component

__all__ = [
    "ChatLimitReached",
    "ChatStore",
    "Conversations",
    "ScheduledRun",
    "bounded_turn",
    "default_chat_path",
    "scheduled_conversation",
]

MAX_CONVERSATIONS = 500  # per user: the oldest are deleted beyond
MAX_TURNS = 1_000  # per conversation
MAX_TURN_BYTES = 2_000_000  # of one turn's JSON
TITLE_CHARS = 80

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, agent TEXT NOT NULL, context_id TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS conversations_owner ON conversations (owner, updated);
CREATE TABLE IF NOT EXISTS turns (
    conversation TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL, role TEXT NOT NULL, task_id TEXT, state TEXT, body TEXT NOT NULL,
    created REAL NOT NULL, PRIMARY KEY (conversation, seq));
CREATE TABLE IF NOT EXISTS scheduled (
    owner TEXT NOT NULL, schedule TEXT NOT NULL, last_tick INTEGER NOT NULL, imported INTEGER NOT NULL,
    PRIMARY KEY (owner, schedule));
"""


@dataclass(frozen=True, slots=True)
class ScheduledRun:
    """A scheduled run as two turns of its user's conversation with the schedule (gateways.chat.scheduled)."""

    schedule: str
    tick_ms: int
    agent: str
    context_id: str
    title: str
    question: dict[str, Any]  # the user turn's body
    answer: dict[str, Any]  # the agent turn's body
    task_id: str | None
    state: str
    per_conversation: int  # runs in one conversation: the next one goes to a new conversation


def scheduled_conversation(owner: str, schedule: str, generation: int) -> str:
    """The id of ``owner``'s ``generation``-th conversation with the runs of ``schedule``: alike on every host."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"mesh-schedule:{owner}\0{schedule}\0{generation}").hex


class ChatLimitReached(ValueError):
    """A conversation is full (``MAX_TURNS``): start a new one."""


def default_chat_path(namespace: str, gateway_id: str) -> Path:
    """``<state dir>/<namespace>/gateway-<id>-chat.sqlite``."""
    return namespace_state_dir(namespace) / f"gateway-{path_component(gateway_id)}-chat.sqlite"


def _conversation(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "agent": row["agent"],
        "contextId": row["context_id"],
        "title": row["title"],
        "created": row["created"],
        "updated": row["updated"],
    }


class Conversations(Protocol):
    """What the chat asks of its store: this SQLite one, or PostgreSQL's (gateways.chat.pgstore)."""

    async def conversations(self, owner: str) -> list[dict[str, Any]]: ...

    async def create(self, owner: str, agent: str) -> dict[str, Any]: ...

    async def get(self, owner: str, conversation: str, *, turns: bool = True) -> dict[str, Any] | None: ...

    async def delete(self, owner: str, conversation: str) -> bool: ...

    async def add_turn(
        self, owner: str, conversation: str, role: str, body: dict[str, Any], *, title: str | None = None
    ) -> int: ...

    async def update_turn(
        self, conversation: str, seq: int, body: dict[str, Any], *, task_id: str | None, state: str | None
    ) -> None: ...

    async def schedule_marks(self, owner: str) -> dict[str, int]:
        """The latest tick of each schedule whose runs are in ``owner``'s conversations."""
        ...

    async def add_scheduled_run(self, owner: str, run: ScheduledRun) -> bool:
        """Add ``run``'s turns to ``owner``'s conversation with its schedule (made if need be), once:
        False when that tick, or a later one, is in already."""
        ...

    async def aclose(self) -> None: ...


class ChatStore:
    """Conversations and their turns, per owner."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash of the process loses nothing
            db.execute("PRAGMA foreign_keys=ON")
            db.executescript(_SCHEMA)
            self._db = db
        return self._db

    async def _run(self, query: Any, *args: Any) -> Any:
        def locked() -> Any:
            with self._lock:
                return query(self._connection(), *args)

        return await asyncio.to_thread(locked)

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # ---------------------------------------------------------------- conversations

    async def conversations(self, owner: str) -> list[dict[str, Any]]:
        """The owner's conversations, the latest first."""

        def query(db: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = db.execute(
                "SELECT * FROM conversations WHERE owner = ? ORDER BY updated DESC LIMIT ?", (owner, MAX_CONVERSATIONS)
            )
            return [_conversation(r) for r in rows]

        result: list[dict[str, Any]] = await self._run(query)
        return result

    async def create(self, owner: str, agent: str) -> dict[str, Any]:
        """A new, empty conversation of ``owner`` with ``agent`` (on a new context)."""
        now = time.time()
        row = {"id": uuid.uuid4().hex, "agent": agent, "contextId": uuid.uuid4().hex, "title": ""}

        def query(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO conversations VALUES (?, ?, ?, ?, '', ?, ?)",
                (row["id"], owner, agent, row["contextId"], now, now),
            )
            db.execute(  # beyond the bound, the oldest go
                "DELETE FROM conversations WHERE id IN (SELECT id FROM conversations WHERE owner = ? "
                "ORDER BY updated DESC LIMIT -1 OFFSET ?)",
                (owner, MAX_CONVERSATIONS),
            )

        await self._run(query)
        return row | {"created": now, "updated": now}

    async def get(self, owner: str, conversation: str, *, turns: bool = True) -> dict[str, Any] | None:
        """The owner's conversation with its turns, or None (none such, or another's)."""

        def query(db: sqlite3.Connection) -> dict[str, Any] | None:
            row = db.execute("SELECT * FROM conversations WHERE id = ? AND owner = ?", (conversation, owner)).fetchone()
            if row is None:
                return None
            found = _conversation(row)
            if turns:
                found["turns"] = [
                    {
                        "seq": t["seq"],
                        "role": t["role"],
                        "taskId": t["task_id"],
                        "state": t["state"],
                        **json.loads(t["body"]),
                    }
                    for t in db.execute("SELECT * FROM turns WHERE conversation = ? ORDER BY seq", (conversation,))
                ]
            return found

        result: dict[str, Any] | None = await self._run(query)
        return result

    async def delete(self, owner: str, conversation: str) -> bool:
        def query(db: sqlite3.Connection) -> bool:
            cursor = db.execute("DELETE FROM conversations WHERE id = ? AND owner = ?", (conversation, owner))
            return cursor.rowcount > 0

        deleted: bool = await self._run(query)
        return deleted

    # ---------------------------------------------------------------- turns

    async def add_turn(
        self, owner: str, conversation: str, role: str, body: dict[str, Any], *, title: str | None = None
    ) -> int:
        """Append a turn; its number. The first user turn names the conversation (``title``)."""
        text = bounded_turn(body)
        now = time.time()

        def query(db: sqlite3.Connection) -> int:
            db.execute("BEGIN IMMEDIATE")
            try:
                owned = db.execute(
                    "SELECT title FROM conversations WHERE id = ? AND owner = ?", (conversation, owner)
                ).fetchone()
                if owned is None:
                    raise KeyError(conversation)
                (count,) = db.execute("SELECT COUNT(*) FROM turns WHERE conversation = ?", (conversation,)).fetchone()
                if count >= MAX_TURNS:
                    raise ChatLimitReached(f"this conversation has {MAX_TURNS} turns, the most kept; start a new one")
                db.execute(
                    "INSERT INTO turns VALUES (?, ?, ?, NULL, NULL, ?, ?)", (conversation, count, role, text, now)
                )
                new_title = owned["title"] or (title or "").strip()[:TITLE_CHARS]
                db.execute(
                    "UPDATE conversations SET updated = ?, title = ? WHERE id = ?", (now, new_title, conversation)
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return int(count)

        seq: int = await self._run(query)
        return seq

    async def update_turn(
        self, conversation: str, seq: int, body: dict[str, Any], *, task_id: str | None, state: str | None
    ) -> None:
        """Replace a turn's body (the agent's answer so far) and its task and state."""
        text = bounded_turn(body)

        def query(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE turns SET body = ?, task_id = ?, state = ? WHERE conversation = ? AND seq = ?",
                (text, task_id, state, conversation, seq),
            )

        await self._run(query)

    # ---------------------------------------------------------------- scheduled runs

    async def schedule_marks(self, owner: str) -> dict[str, int]:
        def query(db: sqlite3.Connection) -> dict[str, int]:
            rows = db.execute("SELECT schedule, last_tick FROM scheduled WHERE owner = ?", (owner,))
            return {str(r["schedule"]): int(r["last_tick"]) for r in rows}

        marks: dict[str, int] = await self._run(query)
        return marks

    async def add_scheduled_run(self, owner: str, run: ScheduledRun) -> bool:
        question, answer = bounded_turn(run.question), bounded_turn(run.answer)
        now = time.time()

        def query(db: sqlite3.Connection) -> bool:
            db.execute("BEGIN IMMEDIATE")
            try:
                mark = db.execute(
                    "SELECT last_tick, imported FROM scheduled WHERE owner = ? AND schedule = ?", (owner, run.schedule)
                ).fetchone()
                if mark is not None and run.tick_ms <= mark["last_tick"]:
                    db.execute("ROLLBACK")
                    return False
                imported = int(mark["imported"]) if mark is not None else 0
                conversation = scheduled_conversation(owner, run.schedule, imported // run.per_conversation)
                db.execute(
                    "INSERT OR IGNORE INTO conversations VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (conversation, owner, run.agent, run.context_id, run.title[:TITLE_CHARS], now, now),
                )
                (count,) = db.execute("SELECT COUNT(*) FROM turns WHERE conversation = ?", (conversation,)).fetchone()
                if count + 2 <= MAX_TURNS:  # a full one (the user talked on in it) gets no more
                    db.execute(
                        "INSERT INTO turns VALUES (?, ?, 'user', NULL, NULL, ?, ?)",
                        (conversation, count, question, now),
                    )
                    db.execute(
                        "INSERT INTO turns VALUES (?, ?, 'agent', ?, ?, ?, ?)",
                        (conversation, count + 1, run.task_id, run.state, answer, now),
                    )
                    db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation))
                db.execute(
                    "INSERT INTO scheduled VALUES (?, ?, ?, ?) ON CONFLICT (owner, schedule) DO UPDATE SET "
                    "last_tick = excluded.last_tick, imported = excluded.imported",
                    (owner, run.schedule, run.tick_ms, imported + 1),
                )
                db.execute(  # beyond the bound, the oldest go
                    "DELETE FROM conversations WHERE id IN (SELECT id FROM conversations WHERE owner = ? "
                    "ORDER BY updated DESC LIMIT -1 OFFSET ?)",
                    (owner, MAX_CONVERSATIONS),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return True

        added: bool = await self._run(query)
        return added


def bounded_turn(body: dict[str, Any]) -> str:
    """A turn's JSON, within ``MAX_TURN_BYTES``."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    if len(text) > MAX_TURN_BYTES:  # keep the turn, not its overflow
        text = json.dumps({"truncated": True, "events": [], "text": "(this answer was too long to keep)"})
    return text

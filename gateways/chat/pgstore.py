"""The chat's conversations in PostgreSQL (``chat_store: postgresql://...``): what the gateways of
one mesh share when they run on several hosts behind one address.

The same conversations, turns and bounds as :class:`~gateways.chat.store.ChatStore` (which
keeps them in a SQLite file), keyed by the gateway's namespace too; every read and write names
the owner, so another user's conversation is simply not found.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from gateways.chat.store import (
    MAX_CONVERSATIONS,
    MAX_TURNS,
    TITLE_CHARS,
    ChatLimitReached,
    ScheduledRun,
    bounded_turn,
    scheduled_conversation,
)
from mesh.store import Migration, StoreUrl
from mesh.store import postgres as pg

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["MIGRATIONS", "PostgresChatStore"]

COMPONENT = "chat_store"
MIGRATIONS = (
    Migration(
        1,
        (
            """CREATE TABLE IF NOT EXISTS mesh_chat_conversations (
                namespace TEXT NOT NULL, id TEXT NOT NULL, owner TEXT NOT NULL, agent TEXT NOT NULL,
                context_id TEXT NOT NULL, title TEXT NOT NULL DEFAULT '', created DOUBLE PRECISION NOT NULL,
                updated DOUBLE PRECISION NOT NULL, PRIMARY KEY (namespace, id))""",
            "CREATE INDEX IF NOT EXISTS mesh_chat_owner ON mesh_chat_conversations (namespace, owner, updated)",
            """CREATE TABLE IF NOT EXISTS mesh_chat_turns (
                namespace TEXT NOT NULL, conversation TEXT NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL,
                task_id TEXT, state TEXT, body TEXT NOT NULL, created DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (namespace, conversation, seq),
                FOREIGN KEY (namespace, conversation) REFERENCES mesh_chat_conversations (namespace, id)
                    ON DELETE CASCADE)""",
        ),
    ),
    Migration(
        2,
        (
            """CREATE TABLE IF NOT EXISTS mesh_chat_scheduled (
                namespace TEXT NOT NULL, owner TEXT NOT NULL, schedule TEXT NOT NULL, last_tick BIGINT NOT NULL,
                imported INTEGER NOT NULL, PRIMARY KEY (namespace, owner, schedule))""",
        ),
    ),
)
_COLUMNS = "id, agent, context_id, title, created, updated"


def _conversation(row: tuple[Any, ...]) -> dict[str, Any]:
    keys = ("id", "agent", "contextId", "title", "created", "updated")
    return dict(zip(keys, row, strict=True))


class PostgresChatStore:
    """Conversations and their turns, per owner, in the mesh's PostgreSQL."""

    def __init__(self, url: StoreUrl, namespace: str) -> None:
        self.url = url
        self.namespace = namespace
        self._pool: AsyncConnectionPool | None = None

    async def _connected(self) -> AsyncConnectionPool:
        if self._pool is None:
            await asyncio.to_thread(self._migrate)
            self._pool = await pg.open_pool(self.url, max_size=4)
        return self._pool

    def _migrate(self) -> None:
        with pg.connect(self.url) as db:
            pg.migrate(db, COMPONENT, MIGRATIONS)

    async def aclose(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def conversations(self, owner: str) -> list[dict[str, Any]]:
        """The owner's conversations, the latest first."""
        async with (await self._connected()).connection() as db:
            cursor = await db.execute(
                f"SELECT {_COLUMNS} FROM mesh_chat_conversations WHERE namespace = %s AND owner = %s "  # noqa: S608
                "ORDER BY updated DESC LIMIT %s",
                (self.namespace, owner, MAX_CONVERSATIONS),
            )
            return [_conversation(row) for row in await cursor.fetchall()]

    async def create(self, owner: str, agent: str) -> dict[str, Any]:
        """A new, empty conversation of ``owner`` with ``agent`` (on a new context)."""
        now = time.time()
        row = {"id": uuid.uuid4().hex, "agent": agent, "contextId": uuid.uuid4().hex, "title": ""}
        async with (await self._connected()).connection() as db, db.transaction():
            await db.execute(
                "INSERT INTO mesh_chat_conversations (namespace, id, owner, agent, context_id, title, created, "
                "updated) VALUES (%s, %s, %s, %s, %s, '', %s, %s)",
                (self.namespace, row["id"], owner, agent, row["contextId"], now, now),
            )
            await db.execute(  # beyond the bound, the oldest go
                "DELETE FROM mesh_chat_conversations WHERE namespace = %s AND id IN (SELECT id FROM "
                "mesh_chat_conversations WHERE namespace = %s AND owner = %s ORDER BY updated DESC OFFSET %s)",
                (self.namespace, self.namespace, owner, MAX_CONVERSATIONS),
            )
        return row | {"created": now, "updated": now}

    async def get(self, owner: str, conversation: str, *, turns: bool = True) -> dict[str, Any] | None:
        """The owner's conversation with its turns, or None (none such, or another's)."""
        async with (await self._connected()).connection() as db:
            cursor = await db.execute(
                f"SELECT {_COLUMNS} FROM mesh_chat_conversations WHERE namespace = %s AND id = %s AND owner = %s",  # noqa: S608
                (self.namespace, conversation, owner),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            found = _conversation(row)
            if turns:
                cursor = await db.execute(
                    "SELECT seq, role, task_id, state, body FROM mesh_chat_turns WHERE namespace = %s "
                    "AND conversation = %s ORDER BY seq",
                    (self.namespace, conversation),
                )
                found["turns"] = [
                    {"seq": seq, "role": role, "taskId": task_id, "state": state, **json.loads(body)}
                    for seq, role, task_id, state, body in await cursor.fetchall()
                ]
            return found

    async def delete(self, owner: str, conversation: str) -> bool:
        async with (await self._connected()).connection() as db:
            cursor = await db.execute(
                "DELETE FROM mesh_chat_conversations WHERE namespace = %s AND id = %s AND owner = %s",
                (self.namespace, conversation, owner),
            )
            return cursor.rowcount > 0

    async def add_turn(
        self, owner: str, conversation: str, role: str, body: dict[str, Any], *, title: str | None = None
    ) -> int:
        """Append a turn; its number. The first user turn names the conversation (``title``)."""
        text = bounded_turn(body)
        now = time.time()
        async with (await self._connected()).connection() as db, db.transaction():
            cursor = await db.execute(  # the row lock orders two gateways' turns of one conversation
                "SELECT title FROM mesh_chat_conversations WHERE namespace = %s AND id = %s AND owner = %s FOR UPDATE",
                (self.namespace, conversation, owner),
            )
            owned = await cursor.fetchone()
            if owned is None:
                raise KeyError(conversation)
            cursor = await db.execute(
                "SELECT COUNT(*) FROM mesh_chat_turns WHERE namespace = %s AND conversation = %s",
                (self.namespace, conversation),
            )
            count = int((await cursor.fetchone())[0])  # type: ignore[index]
            if count >= MAX_TURNS:
                raise ChatLimitReached(f"this conversation has {MAX_TURNS} turns, the most kept; start a new one")
            await db.execute(
                "INSERT INTO mesh_chat_turns (namespace, conversation, seq, role, body, created) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (self.namespace, conversation, count, role, text, now),
            )
            new_title = owned[0] or (title or "").strip()[:TITLE_CHARS]
            await db.execute(
                "UPDATE mesh_chat_conversations SET updated = %s, title = %s WHERE namespace = %s AND id = %s",
                (now, new_title, self.namespace, conversation),
            )
        return count

    async def update_turn(
        self, conversation: str, seq: int, body: dict[str, Any], *, task_id: str | None, state: str | None
    ) -> None:
        """Replace a turn's body (the agent's answer so far) and its task and state."""
        async with (await self._connected()).connection() as db:
            await db.execute(
                "UPDATE mesh_chat_turns SET body = %s, task_id = %s, state = %s WHERE namespace = %s "
                "AND conversation = %s AND seq = %s",
                (bounded_turn(body), task_id, state, self.namespace, conversation, seq),
            )

    async def schedule_marks(self, owner: str) -> dict[str, int]:
        async with (await self._connected()).connection() as db:
            cursor = await db.execute(
                "SELECT schedule, last_tick FROM mesh_chat_scheduled WHERE namespace = %s AND owner = %s",
                (self.namespace, owner),
            )
            return {str(name): int(tick) for name, tick in await cursor.fetchall()}

    async def add_scheduled_run(self, owner: str, run: ScheduledRun) -> bool:
        now = time.time()
        key = (self.namespace, owner, run.schedule)
        async with (await self._connected()).connection() as db, db.transaction():
            await db.execute("INSERT INTO mesh_chat_scheduled VALUES (%s, %s, %s, -1, 0) ON CONFLICT DO NOTHING", key)
            cursor = await db.execute(  # the row lock orders two gateways taking the same run
                "SELECT last_tick, imported FROM mesh_chat_scheduled WHERE namespace = %s AND owner = %s "
                "AND schedule = %s FOR UPDATE",
                key,
            )
            last_tick, imported = await cursor.fetchone()  # type: ignore[misc]
            if run.tick_ms <= int(last_tick):
                return False
            conversation = scheduled_conversation(owner, run.schedule, int(imported) // run.per_conversation)
            await db.execute(
                "INSERT INTO mesh_chat_conversations (namespace, id, owner, agent, context_id, title, created, "
                "updated) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (self.namespace, conversation, owner, run.agent, run.context_id, run.title[:TITLE_CHARS], now, now),
            )
            cursor = await db.execute(
                "SELECT COUNT(*) FROM mesh_chat_turns WHERE namespace = %s AND conversation = %s",
                (self.namespace, conversation),
            )
            count = int((await cursor.fetchone())[0])  # type: ignore[index]
            if count + 2 <= MAX_TURNS:  # a full one (the user talked on in it) gets no more
                await db.execute(
                    "INSERT INTO mesh_chat_turns (namespace, conversation, seq, role, task_id, state, body, created) "
                    "VALUES (%s, %s, %s, 'user', NULL, NULL, %s, %s), (%s, %s, %s, 'agent', %s, %s, %s, %s)",
                    (
                        *(self.namespace, conversation, count, bounded_turn(run.question), now),
                        *(
                            self.namespace,
                            conversation,
                            count + 1,
                            run.task_id,
                            run.state,
                            bounded_turn(run.answer),
                            now,
                        ),
                    ),
                )
                await db.execute(
                    "UPDATE mesh_chat_conversations SET updated = %s WHERE namespace = %s AND id = %s",
                    (now, self.namespace, conversation),
                )
            await db.execute(
                "UPDATE mesh_chat_scheduled SET last_tick = %s, imported = %s WHERE namespace = %s AND owner = %s "
                "AND schedule = %s",
                (run.tick_ms, int(imported) + 1, *key),
            )
            await db.execute(  # beyond the bound, the oldest go
                "DELETE FROM mesh_chat_conversations WHERE namespace = %s AND id IN (SELECT id FROM "
                "mesh_chat_conversations WHERE namespace = %s AND owner = %s ORDER BY updated DESC OFFSET %s)",
                (self.namespace, self.namespace, owner, MAX_CONVERSATIONS),
            )
        return True

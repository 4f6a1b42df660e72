"""Scheduled runs in their user's chat history: a schedule with ``user: ada`` (docs/schedules.md)
puts each of its runs in Ada's conversations, as if she had sent the message herself.

The scheduler records each run, its message and its answer, in the schedules' record
(:mod:`mesh.schedules.store`: the machine's SQLite file, or the PostgreSQL store its file's
agents share). :class:`ScheduledConversations` wraps the chat's store: when a user lists their
conversations, it first takes their runs that finished since the last one it took (the chat
store keeps, per user and schedule, the latest tick taken, in the same transaction as the
turns, so two gateways or two tabs take a run once) and adds each as two turns of the user's
conversation with the schedule. A conversation the user deleted is not refilled with old runs;
later ones start it again. The chat reads the record; it never writes to it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from gateways.chat.store import Conversations, ScheduledRun
from mesh.schedules.store import ScheduleStore, UserRun

__all__ = ["RUNS_PER_CONVERSATION", "ScheduledConversations"]

log = logging.getLogger(__name__)

#: Runs kept in one conversation (two turns each); the next go to a new conversation with the schedule.
RUNS_PER_CONVERSATION = 200


def scheduled_run(run: UserRun) -> ScheduledRun:
    """The two turns of ``run``: the schedule's message as the user's, its answer as the agent's."""
    request = run.request
    answer = run.answer
    text = str(request.get("text") or "")
    if request.get("data") is not None:
        text = (text + "\n" if text else "") + f"(data: {request['data']})"
    context = request.get("contextId") or (answer or {}).get("contextId") or uuid.uuid4().hex
    state = "failed" if run.outcome.startswith(("error", "unknown")) else run.outcome
    if isinstance(answer, dict) and answer.get("kind") == "task":
        state = str((answer.get("status") or {}).get("state") or state)
    body: dict[str, Any] = {"events": [answer] if answer is not None else []}
    if answer is None:
        body["error"] = run.outcome
    return ScheduledRun(
        schedule=run.schedule,
        tick_ms=run.tick_ms,
        agent=str(request.get("agent") or ""),
        context_id=str(context),
        title=f"{run.schedule} (scheduled)",
        question={"text": text, "files": [], "schedule": {"name": run.schedule, "tick": run.tick_ms}},
        answer=body,
        task_id=run.task_id,
        state=state,
        per_conversation=RUNS_PER_CONVERSATION,
    )


class ScheduledConversations:
    """The chat's :class:`~gateways.chat.store.Conversations`, with each user's scheduled runs taken
    in before their conversations are listed (see the module doc)."""

    def __init__(self, chat: Conversations, schedules: ScheduleStore | None) -> None:
        self.chat = chat
        self.schedules = schedules

    async def take_runs(self, owner: str) -> int:
        """Add ``owner``'s runs finished since the last taken; how many were added. A record that
        cannot be read leaves the chat as it is (logged): the conversations still list."""
        schedules = self.schedules
        if schedules is None:
            return 0
        try:
            if not await asyncio.to_thread(schedules.exists):
                return 0
            marks = await self.chat.schedule_marks(owner)
            runs = await asyncio.to_thread(schedules.user_runs, owner, marks)
        except Exception as exc:  # the store down, a file unreadable: the chat goes on without them
            log.warning("chat: the scheduled runs of %r could not be read from %s: %s", owner, schedules.where, exc)
            return 0
        added = 0
        for run in runs:
            added += await self.chat.add_scheduled_run(owner, scheduled_run(run))
        return added

    async def conversations(self, owner: str) -> list[dict[str, Any]]:
        await self.take_runs(owner)
        return await self.chat.conversations(owner)

    async def create(self, owner: str, agent: str) -> dict[str, Any]:
        return await self.chat.create(owner, agent)

    async def get(self, owner: str, conversation: str, *, turns: bool = True) -> dict[str, Any] | None:
        return await self.chat.get(owner, conversation, turns=turns)

    async def delete(self, owner: str, conversation: str) -> bool:
        return await self.chat.delete(owner, conversation)

    async def add_turn(
        self, owner: str, conversation: str, role: str, body: dict[str, Any], *, title: str | None = None
    ) -> int:
        return await self.chat.add_turn(owner, conversation, role, body, title=title)

    async def update_turn(
        self, conversation: str, seq: int, body: dict[str, Any], *, task_id: str | None, state: str | None
    ) -> None:
        await self.chat.update_turn(conversation, seq, body, task_id=task_id, state=state)

    async def schedule_marks(self, owner: str) -> dict[str, int]:
        return await self.chat.schedule_marks(owner)

    async def add_scheduled_run(self, owner: str, run: ScheduledRun) -> bool:
        return await self.chat.add_scheduled_run(owner, run)

    async def aclose(self) -> None:
        await self.chat.aclose()
        close = getattr(self.schedules, "close", None)
        if close is not None:
            await asyncio.to_thread(close)

"""countdown: streams a countdown as status updates and an artifact, and honours cancel."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator
from typing import Any

from agents.agent import Agent
from agents.context import TaskContext
from agents.updates import InputRequired, Reply, Status, TextArtifact, Update
from mesh.a2a import AgentSkill, Message, get_text_from_message

_NUMBER = re.compile(r"-?\d+")


class CountdownAgent(Agent):
    name = "countdown"
    description = "Counts down from a number, one step per interval, streaming each step."
    skills = (
        AgentSkill(
            id="countdown",
            name="Countdown",
            description="Counts down from N to zero, streaming progress; asks for N if none is given",
            tags=["countdown", "timer", "streaming", "demo"],
            examples=["5", "count down from 10"],
        ),
    )

    def __init__(self, *, interval_s: float = 1.0, max_start: int = 100, **options: Any) -> None:
        super().__init__(**options)
        self.interval_s = interval_s
        self.max_start = max_start

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncGenerator[Update, Message]:
        start = self._number(message)
        while start is None:
            answer = yield InputRequired(f"Count down from how many? Send a whole number from 1 to {self.max_start}.")
            start = self._number(answer)
        artifact_id = f"{ctx.task_id}-countdown"
        for step in range(start, 0, -1):
            yield Status(f"{step}...")
            yield TextArtifact("countdown", f"{step}\n", artifact_id=artifact_id, append=step != start)
            await asyncio.sleep(self.interval_s)  # a cancel lands here
        yield TextArtifact("countdown", "0\n", artifact_id=artifact_id, append=True, last_chunk=True)
        yield Reply(f"Liftoff! Counted down from {start}.")

    def _number(self, message: Message) -> int | None:
        found = _NUMBER.search(get_text_from_message(message))
        if found is None:
            return None
        value = int(found.group())
        return value if 1 <= value <= self.max_start else None

"""echo: answers with the text it was sent."""

from __future__ import annotations

from typing import Any

from agents.agent import Agent
from agents.context import TaskContext
from mesh.a2a import AgentSkill, Message, get_text_from_message


class EchoAgent(Agent):
    name = "echo"
    description = "Repeats what it is told: the text of the message comes back."
    skills = (
        AgentSkill(
            id="echo",
            name="Echo",
            description="Returns the text of the message it receives, unchanged",
            tags=["echo", "test", "repeat"],
            examples=["hello", "repeat after me"],
        ),
    )
    streaming = True

    def __init__(self, *, prefix: str = "", **options: Any) -> None:
        super().__init__(**options)
        self.prefix = prefix

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        return self.prefix + get_text_from_message(message)

"""Small Agent subclasses that the config tests name as ``tests.agents.sample_agents:Class``."""

from __future__ import annotations

from agents.agent import Agent
from agents.context import TaskContext
from mesh.a2a import Message


class Greeter(Agent):
    """A strict constructor: only ``greeting`` besides the card fields."""

    name = "greeter"
    description = "Says hello"

    def __init__(
        self,
        *,
        greeting: str = "hello",
        name: str | None = None,
        description: str | None = None,
        version: str | None = None,
    ) -> None:
        super().__init__(name=name, description=description, version=version)
        if not greeting:
            raise ValueError("greeting must not be empty; give it some text")
        self.greeting = greeting

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        return self.greeting


class Flexible(Agent):
    """Keeps the base constructor: it takes no option besides the card fields."""

    name = "flexible"

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        return "ok"


class Repeater(Agent):
    """Uses an option in a way that raises TypeError when YAML gives the wrong type."""

    name = "repeater"

    def __init__(self, *, count: int = 1, **card: str | None) -> None:
        super().__init__(**card)
        self.text = "x" * count

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        return self.text


class Nameless(Agent):
    """Forgot to set ``name``; only an entry's ``name:`` can run it."""

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        return "?"


class NotAnAgent:
    """Looks like an agent, is not one."""

    name = "impostor"


def make_agent() -> Agent:
    """A factory function, not a class."""
    return Flexible()

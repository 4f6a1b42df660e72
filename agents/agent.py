"""The agent a developer writes: a class with a name, a card and one async handler."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, ClassVar

from agents.context import TaskContext
from agents.updates import Update
from mesh.a2a import AgentCapabilities, AgentCard, AgentProvider, AgentSkill, Message
from topics import validate_identifier

HandlerResult = str | Message | Update | None


class Agent:
    """Subclass, describe the agent in class attributes, and implement :meth:`handle`::

        class Echo(Agent):
            name = "echo"
            description = "Repeats what it is told"
            skills = [AgentSkill(id="echo", name="Echo", description="...", tags=["echo"])]

            async def handle(self, message, ctx):
                return "echo: " + get_text_from_message(message)

    ``handle`` is either an async generator yielding :mod:`agents.updates` values, or a
    coroutine returning a ``str``, a :class:`~mesh.a2a.Message`, a
    :class:`~agents.updates.Reply` / :class:`~agents.updates.InputRequired` /
    :class:`~agents.updates.AuthRequired` / :class:`~agents.updates.Rejected` /
    :class:`~agents.updates.MessageOnly`, or ``None``. ``starts_working = False``: a new task
    stays ``submitted`` until the handler reports progress, so one answered at once has no
    ``working`` state (by default every task is ``working`` as its handler starts).
    Options given in a YAML file (``config:``) arrive as keyword arguments, and ``name`` /
    ``description`` / ``version`` given there override the class attributes.
    """

    name: str = ""
    description: str = ""
    version: str = "1.0.0"
    skills: ClassVar[Sequence[AgentSkill]] = ()
    streaming: ClassVar[bool] = True
    input_modes: ClassVar[Sequence[str]] = ("text/plain",)
    output_modes: ClassVar[Sequence[str]] = ("text/plain",)
    provider: ClassVar[AgentProvider | None] = None
    documentation_url: ClassVar[str | None] = None
    #: Start discovery with the agent (it reads ``ctx.peers()``); otherwise the first
    #: ``ctx.delegate`` starts it, and an agent that never delegates runs no registry.
    uses_discovery: ClassVar[bool] = False
    starts_working: ClassVar[bool] = True
    # Set by the runtime serving the agent (AgentService.start): stops serving it and clears its
    # card. An agent whose backend is gone for good (a worker past its restarts) calls it.
    leave_mesh: Callable[[], Awaitable[None]] | None = None

    def __init__(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        version: str | None = None,
        **options: Any,
    ) -> None:
        # Instance attributes shadow the class defaults, so one class can run under many names.
        self.name = validate_identifier(name or type(self).name, "agent name")
        if description is not None:
            self.description = description
        if version is not None:
            self.version = version
        self.options = options

    def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update] | Awaitable[HandlerResult]:
        """Work on one message of a task; see the class docstring for what to yield or return."""
        raise NotImplementedError(f"{type(self).__name__} must implement handle(message, ctx)")

    async def setup(self) -> None:
        """Called once before the agent takes requests (open clients, load models...)."""

    async def teardown(self) -> None:
        """Called once after the agent stopped taking requests."""

    def card(self, *, url: str, push_notifications: bool) -> AgentCard:
        """The agent card published on the mesh; ``url`` is filled in by the runtime."""
        return AgentCard(
            name=self.name,
            description=self.description or self.name,
            version=self.version,
            url=url,
            preferred_transport="MQTT",
            capabilities=AgentCapabilities(
                streaming=self.streaming,
                push_notifications=push_notifications,
                state_transition_history=True,
            ),
            default_input_modes=list(self.input_modes),
            default_output_modes=list(self.output_modes),
            skills=list(self.skills),
            provider=self.provider,
            documentation_url=self.documentation_url,
        )

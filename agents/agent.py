"""The agent a developer writes: a class with a name, a card and one async handler."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, ClassVar

from agents.context import TaskContext
from agents.updates import Update
from mesh.a2a import AgentCapabilities, AgentCard, AgentProvider, AgentSkill, Message
from topics import validate_identifier

HandlerResult = str | Message | Update | None

log = logging.getLogger(__name__)

#: What every agent's constructor takes besides its own options: the card fields a config overrides.
CARD_OPTIONS = ("name", "description", "version")


def agent_options(agent_class: type[Agent]) -> list[str]:
    """The options ``agent_class`` declares: the keyword parameters of its constructor, besides
    the card fields.

    A ``**kwargs`` of a constructor is taken to be passed on to ``super().__init__`` (the
    cooperative convention), so the parameters of the classes above it count too, up to
    :class:`Agent`, which takes no option of its own. A constructor that keeps its ``**kwargs``
    for itself accepts any option; only the declared ones are listed (for did-you-mean).
    """
    names: list[str] = []
    for cls in agent_class.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        takes_more = False
        for parameter in list(inspect.signature(init).parameters.values())[1:]:  # after self
            if parameter.kind is parameter.VAR_KEYWORD:
                takes_more = True
            elif (
                parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD)
                and parameter.name not in names
                and parameter.name not in CARD_OPTIONS
            ):
                names.append(parameter.name)
        if not takes_more or cls is Agent:
            break
    return names


class UnknownOptionsError(TypeError):
    """Options no constructor of the agent's class took: they reached :class:`Agent` itself."""

    def __init__(self, agent_class: type[Agent], keys: Sequence[str]) -> None:
        self.agent_class = agent_class
        self.keys = list(keys)
        declared = agent_options(agent_class)
        super().__init__(
            f"{agent_class.__name__} takes no option {', '.join(map(repr, self.keys))}; "
            f"its options are: {', '.join(declared) or 'none'}"
        )


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
    ``description`` / ``version`` given there override the class attributes. An agent declares
    its options as keyword parameters of its ``__init__`` (passing the rest on with
    ``super().__init__(**options)``); an option nobody declared reaches this class, which
    refuses it (:class:`UnknownOptionsError`), so a misspelled ``config:`` key is an error, not
    ignored. An ``__init__`` that keeps its ``**kwargs`` for itself accepts any option.
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
    # The background leave give_up started: referenced so it is not collected mid-way.
    _leaving: asyncio.Task[None] | None = None

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
        if options:
            raise UnknownOptionsError(type(self), list(options))

    def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update] | Awaitable[HandlerResult]:
        """Work on one message of a task; see the class docstring for what to yield or return."""
        raise NotImplementedError(f"{type(self).__name__} must implement handle(message, ctx)")

    def give_up(self, reason: str) -> None:
        """The agent's backend is gone for good: leave the mesh in the background, so callers
        hear "unavailable" instead of waiting on an agent that cannot answer."""
        leave = self.leave_mesh
        if leave is None:
            log.error("%s: cannot leave the mesh (no runtime hook); tasks will fail: %s", self.name, reason)
            return
        if self._leaving is not None:
            return  # already leaving

        async def leaving() -> None:
            await leave()

        self._leaving = asyncio.get_running_loop().create_task(leaving(), name=f"leave:{self.name}")
        self._leaving.add_done_callback(self._left)

    def _left(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("%s: leaving the mesh failed: %s", self.name, error, exc_info=error)

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

"""Unit-testing an agent without a broker: the real service and task runtime on an in-memory hub.

::

    from agents.testing import AgentHarness

    async def test_weather_asks_for_a_city():
        async with AgentHarness(Weather()) as mesh:
            task = await mesh.send("weather in")
            assert task.status.state == "input-required"
            task = await mesh.send("Paris", task_id=task.id)
            assert mesh.text(task) == "It is sunny in Paris."

:class:`AgentHarness` serves the agent with the same :class:`~agents.service.AgentService` as
``mesh run`` does, on a :class:`~mesh.transport.memory.MemoryTransport`, and talks to it with
the same :class:`~mesh.client.MeshClient` as ``mesh send``: requests, task lifecycle,
streaming, input-required, cancel, limits and delegation all behave as on a broker. Peers
given with ``peers=`` are served on the same hub, so an agent that delegates finds them.

The mesh's own tests use a real Mosquitto; this harness is for testing what an agent does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.agent import Agent
from agents.journal import NullJournal
from agents.service import AgentService
from agents.settings import AgentSettings
from mesh.a2a import (
    Artifact,
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
    TextPart,
    get_text_from_message,
)
from mesh.client import MeshClient, StreamItem
from mesh.discovery.presence import presence_will
from mesh.transport import MemoryBroker, MemoryTransport, Transport
from topics import get_agent_discovery_topic

if TYPE_CHECKING:
    from agents.llm.agent import LlmAgent

__all__ = ["AgentHarness", "StreamItem", "llm_agent", "text"]

_CLIENT_ID = "harness-client"


def text(item: Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent | Artifact | None) -> str:
    """The text an agent gave, as one string.

    A Task: its status message's text (the reply), else the text of its artifacts. A status
    event: its message's text. An artifact (or its event): its text parts. None gives ``""``.
    """
    if item is None:
        return ""
    if isinstance(item, Message):
        return get_text_from_message(item)
    if isinstance(item, TaskArtifactUpdateEvent):
        return text(item.artifact)
    if isinstance(item, Artifact):
        return "".join(part.text for part in item.parts if isinstance(part, TextPart))
    if isinstance(item, TaskStatusUpdateEvent):
        return text(item.status.message)
    reply = text(item.status.message)
    return reply or "".join(text(artifact) for artifact in item.artifacts or [])


class AgentHarness:
    """Runs ``agent`` (and its ``peers``) through the real runtime on an in-memory hub.

    Use it as an async context manager; the methods talk to ``agent`` unless told ``agent=``
    another name. ``timeout`` bounds each call (and the idle time of each stream).
    """

    def __init__(
        self,
        agent: Agent,
        *,
        settings: AgentSettings | None = None,
        peers: Sequence[Agent] = (),
        namespace: str = "test",
        timeout: float = 10.0,
    ) -> None:
        self.agent = agent
        self.namespace = namespace
        self.timeout = timeout
        self.hub = MemoryBroker()
        #: Every agent served, by name: the peers and ``agent``.
        self.services: dict[str, AgentService] = {}
        for served in (*peers, agent):
            if served.name in self.services:
                raise ValueError(f"two agents named {served.name!r}; give each agent in the harness its own name")
            self.services[served.name] = self._service(served, settings if served is agent else None)
        self._client_transport = MemoryTransport(self.hub, client_id=_CLIENT_ID)
        self.client = MeshClient(self._client_transport, namespace)
        self._started: list[AgentService] = []

    @property
    def service(self) -> AgentService:
        """The service running ``agent`` (its ``settings``, ``tasks``, ``registry``...)."""
        return self.services[self.agent.name]

    async def __aenter__(self) -> AgentHarness:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the peers, then the agent (once it knows every peer), then the client."""
        for service in self.services.values():
            await service.start()
            self._started.append(service)
        for peer in self.services:
            if peer != self.agent.name:
                await (await self.service.discovery.get()).wait_for(peer, self.timeout)
        await self._client_transport.connect()

    async def stop(self) -> None:
        """Stop the agent and its peers (canceling their tasks) and disconnect the client."""
        while self._started:
            await self._started.pop().stop()
        await self._client_transport.close()

    # ------------------------------------------------------------------ talking to the agent

    async def send(
        self,
        message: str | Message,
        *,
        task_id: str | None = None,
        context_id: str | None = None,
        blocking: bool = True,
        metadata: dict[str, Any] | None = None,
        agent: str | None = None,
    ) -> Task:
        """``message/send``: the Task once it settles (completed, failed, input-required...).

        With ``task_id`` the message answers that task's question (input-required); with
        ``blocking=False`` the Task comes back at once, still running.
        """
        result = await self.client.send(
            agent or self.agent.name,
            message,
            task_id=task_id,
            context_id=context_id,
            blocking=blocking,
            metadata=metadata,
            timeout=self.timeout,
        )
        if not isinstance(result, Task):
            raise TypeError(f"message/send answered a {type(result).__name__}, not a Task: {result!r}")
        return result

    async def stream(
        self,
        message: str | Message,
        *,
        task_id: str | None = None,
        context_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        agent: str | None = None,
    ) -> AsyncIterator[StreamItem]:
        """``message/stream``: the status and artifact events in order, then the final Task."""
        async for item in self.client.stream(
            agent or self.agent.name,
            message,
            task_id=task_id,
            context_id=context_id,
            metadata=metadata,
            idle_timeout=self.timeout,
        ):
            yield item

    async def get_task(self, task_id: str, *, history_length: int | None = None, agent: str | None = None) -> Task:
        """``tasks/get``: the task as it is now."""
        return await self.client.get_task(
            agent or self.agent.name, task_id, history_length=history_length, timeout=self.timeout
        )

    async def cancel(self, task_id: str, *, agent: str | None = None) -> Task:
        """``tasks/cancel``: the canceled Task (an error if it already ended)."""
        return await self.client.cancel_task(agent or self.agent.name, task_id, timeout=self.timeout)

    async def resubscribe(self, task_id: str, *, agent: str | None = None) -> AsyncIterator[StreamItem]:
        """``tasks/resubscribe``: the current Task, then the remaining events, then the final Task."""
        async for item in self.client.resubscribe(agent or self.agent.name, task_id, idle_timeout=self.timeout):
            yield item

    text = staticmethod(text)

    # ------------------------------------------------------------------ plumbing

    def _service(self, agent: Agent, settings: AgentSettings | None) -> AgentService:
        card_topic = get_agent_discovery_topic(self.namespace, agent.name)
        transport: Transport = MemoryTransport(self.hub, client_id=f"{agent.name}-1", will=presence_will(card_topic))
        # Tasks in memory: a unit test leaves no files behind.
        return AgentService(
            agent, namespace=self.namespace, settings=settings, transport=transport, journal=NullJournal()
        )


def llm_agent(
    llm: Mapping[str, Any],
    model: Any,
    *,
    name: str = "assistant",
    description: str | None = None,
    tools: Sequence[Callable[..., Any]] = (),
    source: Path | None = None,
) -> LlmAgent:
    """An LLM agent from the mapping an ``llm:`` key holds, answering with ``model`` (a
    pydantic-ai ``FunctionModel`` or ``TestModel``), for :class:`AgentHarness`::

        def model(messages, info):
            return ModelResponse(parts=[TextPart("Hello!")])

        async with AgentHarness(llm_agent({"model": "test"}, FunctionModel(model))) as mesh:
            assert mesh.text(await mesh.send("hi")) == "Hello!"

    Needs the ``llm`` extra; no network is used.
    """
    from agents.llm.agent import LlmAgent
    from agents.llm.config import parse_llm

    # Usage and budget counters in memory too (unless the test names a store): no files left behind.
    config = parse_llm({"usage_store": ":memory:", **llm}, source or Path("<test>"), ("llm",))
    return LlmAgent(name=name, description=description, llm=config, model=model, tools=tools, source=source)

"""The mesh side of ``mesh mcp``: a :class:`~gateways.runtime.GatewayRuntime` and the tools it sees.

A tool call arrives as an :class:`~mesh.e2a.E2AEnvelope` (:func:`call_envelope`) and
:meth:`MeshBridge.forward` sends it through the gateway runtime, as every gateway does, yielding
the answer as :class:`~mesh.e2a.E2AResponse` frames (:mod:`gateways.answers`): progress as
``a2a.stream_event``, then one final ``a2a.task`` / ``a2a.message`` or ``e2a.error`` with the
gateways' codes (agent gone, timeout, an error answer).

The caller stopping (an MCP ``notifications/cancelled`` cancels the handler) cancels the task
on the mesh (``tasks/cancel``, :attr:`~mesh.calls.CallOptions.cancel_on_abandon`): an MCP
client that gave up has nobody to deliver the answer to. The registry (with a trust
store: signed cards only) tells which agents are tools, and its changes are reported to
``on_change`` so the server can send ``notifications/tools/list_changed``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, cast

from gateways.runtime import GatewayRuntime
from mesh.a2a import AgentCapabilities, AgentCard
from mesh.broker import BrokerSettings
from mesh.discovery.registry import DiscoveryRegistry, RegistryEvent
from mesh.e2a import E2AEnvelope, E2AProvenance, E2AResponse, utc_now_iso
from mesh.errors import MeshError
from mesh.transport import Transport
from mesh.trust import Trust
from topics import validate_namespace

from .tools import AgentTool, build_tools, matches

__all__ = ["MeshBridge", "call_envelope"]


def call_envelope(
    tool: AgentTool,
    arguments: dict[str, Any],
    *,
    stream: bool = True,
    request_id: str | None = None,
    user_id: str | None = None,
    parts: list[dict[str, Any]] | None = None,
) -> E2AEnvelope:
    """The E2A envelope of one ``tools/call`` (arguments already validated against the schema).

    ``stream``: ``message/stream`` (the client wants progress), else a blocking ``message/send``,
    which spares the agent and the broker the events nobody would see. ``parts`` replace the
    message's text (the answers to an LLM agent's tool approvals).
    """
    message: dict[str, Any] = {
        "kind": "message",
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": parts or [{"kind": "text", "text": arguments["message"]}],
    }
    for key, field in (("context_id", "contextId"), ("task_id", "taskId")):
        if arguments.get(key):
            message[field] = arguments[key]
    if arguments.get("skill"):
        message["metadata"] = {"skill": arguments["skill"]}  # where A2E workers and skill routers look
    return E2AEnvelope(
        provenance=E2AProvenance(
            source_protocol="mcp",
            converter="gateways.mcp",
            converted_at=utc_now_iso(),
            details={"kind": "jsonrpc_request", "jsonrpc_method": "tools/call", "tool": tool.name},
        ),
        request_id=request_id or uuid.uuid4().hex,
        task_id=message.get("taskId"),
        context_id=message.get("contextId"),
        channel="mcp",
        user_id=user_id,
        agent_id=tool.agent,
        method="message/stream" if stream else "message/send",
        params={"message": message} if stream else {"message": message, "configuration": {"blocking": True}},
        is_stream=stream,
    )


class MeshBridge:
    """One gateway runtime on the mesh for every MCP session of the process, and the tools it sees."""

    def __init__(
        self,
        gateway_id: str,
        *,
        namespace: str,
        broker: BrokerSettings | None = None,
        transport: Transport | None = None,
        patterns: Sequence[str] = (),
        trust: Trust | None = None,
        idle_timeout_s: float = 300.0,
    ) -> None:
        self.gateway_id = gateway_id
        self.namespace = validate_namespace(namespace)
        self.patterns = tuple(patterns)
        self.runtime = GatewayRuntime(
            gateway_id,
            namespace=self.namespace,
            card=self._card_bytes,
            broker=broker,
            transport=transport,
            idle_timeout_s=idle_timeout_s,
            trust=trust,
        )
        self.transport = self.runtime.transport
        self.tools: dict[str, AgentTool] = {}
        self._listeners: list[Callable[[], None]] = []
        self.runtime.discovery.add_listener(self._on_registry)

    @property
    def registry(self) -> DiscoveryRegistry:
        return self.runtime.registry

    async def start(self) -> None:
        await self.runtime.start()
        self._refresh()

    async def stop(self) -> None:
        with contextlib.suppress(MeshError):
            await self.runtime.stop()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever the set of tools (names, descriptions, schemas) changes."""
        self._listeners.append(listener)

    # ------------------------------------------------------------------ tools

    def _on_registry(self, event: RegistryEvent) -> None:
        if event.kind == "agent" and matches(event.name, self.patterns):
            self._refresh()

    def _refresh(self) -> None:
        cards = [entry.card for entry in self.registry.agents() if matches(entry.name, self.patterns)]
        tools = build_tools(cards)
        if tools != self.tools:
            self.tools = tools
            for listener in self._listeners:
                listener()

    # ------------------------------------------------------------------ calls

    async def forward(self, envelope: E2AEnvelope, agent: str) -> AsyncGenerator[E2AResponse, None]:
        """Send ``envelope`` to ``agent``; yield the answer's E2A frames, the final one last.

        Through the gateway runtime (:mod:`gateways.answers`: the gateways' error codes); the
        MCP client stopping cancels the task on the mesh.
        """
        # forward() is an async generator: closing it ends the call on the mesh side too.
        frames = cast(
            AsyncGenerator[E2AResponse, None],
            self.runtime.forward(envelope, agent, events=envelope.is_stream, cancel_on_abandon=True),
        )
        async with contextlib.aclosing(frames) as answers:
            async for frame in answers:
                yield frame

    # ------------------------------------------------------------------ own card

    def _card_bytes(self) -> bytes:
        """The gateway's card, unsigned (the runtime signs each change once)."""
        card = AgentCard(
            name=self.gateway_id,
            description=f"MCP gateway: the agents of namespace {self.namespace!r} as MCP tools",
            version="1.0.0",
            url=f"mcp://{self.gateway_id}",
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[],
        )
        return card.to_json_bytes()

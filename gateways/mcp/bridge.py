"""The mesh side of ``mesh mcp``: its connection, card, registry of agents, and the one call path.

A tool call arrives as an :class:`~mesh.e2a.E2AEnvelope` (:func:`call_envelope`) and
:meth:`MeshBridge.forward` sends it as ``message/stream`` through a
:class:`~mesh.calls.CallPath` (role ``gateway``), yielding the answer as
:class:`~mesh.e2a.E2AResponse` frames: progress as ``a2a.stream_event``, then one final
``a2a.task`` / ``a2a.message`` or ``e2a.error`` (agent gone, timeout, an error answer).

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
from typing import Any

from mesh.a2a import AgentCapabilities, AgentCard, ErrorCode, RpcError
from mesh.broker import BrokerSettings
from mesh.calls import CallOptions, CallPath, follow_registry
from mesh.clientids import connection_for
from mesh.e2a import E2AEnvelope, E2AProvenance, E2AResponse, ResponseSequencer, utc_now_iso
from mesh.errors import AgentUnavailableError, CallTimeoutError, MeshError
from mesh.presence import CardPresence, presence_will
from mesh.registry import DiscoveryRegistry, RegistryEvent
from mesh.transport import Transport
from mesh.trust import Trust
from topics import get_gateway_discovery_topic, validate_namespace

from .tools import AgentTool, build_tools, matches

__all__ = ["MeshBridge", "call_envelope"]

TIMEOUT = -32006  # the gateways' timeout code (gateways.runtime)
_BRANCHES = {"status-update": "status_update", "artifact-update": "artifact_update", "task": "task"}


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
    """One connection to the mesh for every MCP session of the process."""

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
        self.idle_timeout_s = idle_timeout_s
        card_topic = get_gateway_discovery_topic(self.namespace, gateway_id)
        if transport is None:
            if broker is None:
                raise TypeError("MeshBridge needs a broker (BrokerSettings) or a transport")
            # Its own user's client id, or a slot of the CLI user it runs as (mesh.clientids).
            otherwise = f"{gateway_id}-{uuid.uuid4().hex[:8]}"
            claimed = connection_for(broker, "gateway", self.namespace, gateway_id, otherwise)
            transport = claimed.transport(will=presence_will(card_topic))
        self.transport = transport
        self.trust = trust
        self.tokens = trust.token_minter(self.namespace) if trust is not None else None
        verifier = trust.card_verifier() if trust is not None else None
        self.registry = DiscoveryRegistry(transport, self.namespace, verifier=verifier)
        signer = trust.caller_minter("gateway", self.namespace) if trust is not None else None
        self.calls = CallPath(transport, self.namespace, gateway_id, role="gateway", signer=signer)
        follow_registry(self.calls, self.registry)  # an agent's card removed fails the calls waiting on it
        self.presence = CardPresence(transport, card_topic, self._card_bytes)
        self.tools: dict[str, AgentTool] = {}
        self._listeners: list[Callable[[], None]] = []
        self.registry.add_listener(self._on_registry)

    async def start(self) -> None:
        await self.transport.connect()
        await self.calls.start()
        await self.registry.start()
        await self.presence.start()
        self._refresh()

    async def stop(self) -> None:
        with contextlib.suppress(MeshError):
            await self.presence.stop()
            await self.registry.stop()
            await self.calls.flush()
        await self.transport.close()

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
        """Send ``envelope`` to ``agent``; yield the answer's E2A frames, the final one last."""
        sequencer = ResponseSequencer(envelope)
        user = envelope.user_id
        token = self.tokens.mint(user) if self.tokens is not None and user else None
        options = CallOptions(
            user_id=user,
            auth_token=token,
            idle_timeout_s=self.idle_timeout_s,
            events=envelope.is_stream,
            cancel_on_abandon=True,
        )
        try:
            async with self.calls.call(agent, envelope.method or "message/stream", envelope.params, options) as call:
                while not (answer := await call.next()).final:
                    event = answer.json
                    if isinstance(event, dict):
                        yield sequencer.a2a_stream_event(_BRANCHES.get(str(event.get("kind")), "status_update"), event)
        except CallTimeoutError as exc:
            waited = "the deadline" if exc.reason == "deadline" else f"{exc.waited_s:g} s without news"
            canceled = "; the task was canceled" if exc.canceled else ""
            yield sequencer.error(
                TIMEOUT,
                f"timeout: agent {agent!r} did not finish task {exc.task_id!r} ({waited}){canceled}",
                {"errorType": "Timeout", "agentName": agent, "taskId": exc.task_id},
            )
        except AgentUnavailableError as exc:  # nobody listens on its topic, or its card went away
            yield sequencer.error(
                int(ErrorCode.AGENT_GONE),
                str(exc),
                {"errorType": "AgentGone", "agentName": agent, "reason": exc.reason},
            )
        except RpcError as exc:  # the agent's error answer, or a malformed one
            yield sequencer.error(exc.code, f"agent {agent!r} answered an error: {exc.error.message}", exc.data)
        except MeshError as exc:  # the request could not be delivered
            yield sequencer.error(-32603, f"the request to agent {agent!r} failed: {exc}")
        else:
            result = answer.json
            kind = result.get("kind") if isinstance(result, dict) else None
            if isinstance(result, dict) and kind in ("task", "message"):
                yield sequencer.finish(f"a2a.{kind}", result)
            else:
                yield sequencer.complete(result)

    # ------------------------------------------------------------------ own card

    def _card_bytes(self) -> bytes:
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
        if self.trust is not None:
            card = self.trust.sign(card)
        return card.to_json_bytes()

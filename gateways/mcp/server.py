"""``mesh mcp``: an MCP server (the official SDK's low-level ``Server``) whose tools are the mesh's agents.

- ``tools/list``: one tool per agent the bridge's registry holds (:mod:`gateways.mcp.tools`);
- ``tools/call``: the arguments checked, then an E2A envelope sent through the mesh's call path
  (:class:`~gateways.mcp.bridge.MeshBridge`); its frames become progress notifications (when the
  client gave a progress token) and the result (:class:`~gateways.mcp.results.TaskAnswer`). A
  client's ``notifications/cancelled`` cancels the handler, which cancels the task on the mesh.
  An LLM agent's tool calls waiting for approval are asked by elicitation (a form with
  ``approve``) when the client declared it can, and the answers go on the task in the same call;
- ``resources/read`` and ``resources/list``: the ``artifact://`` links of tool results
  (:mod:`gateways.mcp.resources`);
- the tool set changing sends ``notifications/tools/list_changed``: on each handshake-era
  connection that listed the tools (its standalone channel: stdio, or the HTTP GET stream), and
  on every 2026-era ``subscriptions/listen`` stream (the SDK's :class:`ListenHandler`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from opentelemetry import trace

from mesh.version import __version__

from .bridge import MeshBridge, call_envelope
from .resources import ArtifactResources
from .results import TaskAnswer
from .tools import AgentTool

__all__ = ["MAX_MESSAGE_CHARS", "PRINCIPAL_SCOPE_KEY", "McpGateway"]

log = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 1_000_000  # one tool call's message; the broker's own limit is checked on send
MAX_CALLS_IN_FLIGHT = 512  # tool calls this process runs at once; more are refused, not queued without end
MAX_TRACKED_CONNECTIONS = 1024  # handshake-era connections told of list changes (oldest forgotten first)
#: Where the HTTP edge puts the authenticated caller's name in the ASGI scope (gateways.http.mcp_edge).
PRINCIPAL_SCOPE_KEY = "mesh.principal"
_ARGUMENTS = {"message", "context_id", "task_id", "skill"}


class McpGateway:
    """The MCP side of ``mesh mcp``: ``server`` serves any number of connections over one bridge."""

    def __init__(self, bridge: MeshBridge, resources: ArtifactResources | None = None) -> None:
        self.bridge = bridge
        self.resources = resources
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus, max_subscriptions=MAX_TRACKED_CONNECTIONS)
        self.server: Server[Any] = Server(
            "mesh",
            version=__version__,
            instructions=(
                f"Each tool is an agent of the agent mesh (namespace {bridge.namespace!r}); the tool list changes "
                "as agents join and leave. A result that asks a question carries a task_id: call the same tool "
                "again with that task_id and the answer as message."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self.listen,
            on_list_resources=self._list_resources if resources is not None else None,
            on_read_resource=self._read_resource if resources is not None else None,
        )
        self.server.middleware = [
            _OtelWhenInstalled(m) if isinstance(m, OpenTelemetryMiddleware) else m for m in self.server.middleware
        ]
        # Handshake-era connections, by identity: their standalone channel carries list_changed.
        self._connections: OrderedDict[int, ServerSession] = OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._notifying: asyncio.Task[None] | None = None
        self._dirty = False
        self._in_flight = 0
        bridge.on_change(self._tools_changed)

    def initialization_options(self) -> InitializationOptions:
        return self.server.create_initialization_options(NotificationOptions(tools_changed=True))

    def bind_loop(self) -> None:
        """Remember the running loop: registry changes may be reported from another thread."""
        self._loop = asyncio.get_running_loop()

    # ------------------------------------------------------------------ tools/list

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._track(ctx.session)
        tools = [
            types.Tool(
                name=tool.name,
                title=tool.agent if tool.agent != tool.name else None,
                description=tool.description,
                input_schema=tool.input_schema,
                annotations=types.ToolAnnotations(title=tool.agent, open_world_hint=True),
            )
            for tool in self.bridge.tools.values()
        ]
        return types.ListToolsResult(tools=tools, ttl_ms=0)

    # ------------------------------------------------------------------ tools/call

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = self.bridge.tools.get(params.name)
        if tool is None:
            known = ", ".join(self.bridge.tools) or "none"
            raise MCPError(
                types.INVALID_PARAMS, f"unknown tool {params.name!r}: no such agent on the mesh now; tools: {known}"
            )
        try:
            arguments = _checked(tool, params.arguments or {})
        except ValueError as exc:  # a tool error, not a protocol one: the model can fix its arguments
            return types.CallToolResult(content=[types.TextContent(text=str(exc))], is_error=True)
        if self._in_flight >= MAX_CALLS_IN_FLIGHT:
            busy = f"mesh mcp has {MAX_CALLS_IN_FLIGHT} tool calls in flight, its limit; retry when one has ended"
            return types.CallToolResult(content=[types.TextContent(text=busy)], is_error=True)
        self._in_flight += 1
        try:
            result = await self._call(ctx, tool, arguments)
        finally:
            self._in_flight -= 1
        return result if self.resources is None else self.resources.offered(_principal(ctx), result)

    # ------------------------------------------------------------------ resources (artifact links)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await self._artifact_resources().list(_principal(ctx))

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await self._artifact_resources().read(_principal(ctx), params.uri)

    def _artifact_resources(self) -> ArtifactResources:
        if self.resources is None:  # pragma: no cover - the handlers are registered only with resources
            raise MCPError(types.METHOD_NOT_FOUND, "this server has no resources")
        return self.resources

    async def _call(
        self, ctx: ServerRequestContext[Any], tool: AgentTool, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        # Progress asked for: stream the task's events; else one blocking message/send.
        stream = progress_token_from_params(ctx.params) is not None
        envelope = call_envelope(tool, arguments, stream=stream, user_id=_principal(ctx))
        answer = TaskAnswer(tool.agent)
        log.info("tools/call %s -> agent %s (request %s)", tool.name, tool.agent, envelope.request_id)
        while True:
            final = None
            async with contextlib.aclosing(self.bridge.forward(envelope, tool.agent)) as frames:
                async for frame in frames:
                    if frame.is_final:
                        final = frame
                        break
                    message = answer.progress(frame)
                    if message is not None:
                        await ctx.session.report_progress(answer.steps, None, message)
            if final is None:
                raise MCPError(types.INTERNAL_ERROR, f"the call to agent {tool.agent!r} ended without an answer")
            asked = answer.approvals(final)
            caps = ctx.session.client_capabilities
            if not asked or answer.task_id is None or caps is None or caps.elicitation is None:
                return answer.result(final)
            parts = [await _elicited(ctx, tool.agent, call) for call in asked]
            again = {**arguments, "task_id": answer.task_id}
            envelope = call_envelope(tool, again, stream=stream, user_id=_principal(ctx), parts=parts)

    # ------------------------------------------------------------------ list_changed

    def _track(self, session: ServerSession) -> None:
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # 2026-era clients hear of changes on subscriptions/listen
        # The request's ServerSession is new per request; its connection is the lasting thing.
        key = id(getattr(session, "_connection", session))
        self._connections[key] = session
        self._connections.move_to_end(key)
        while len(self._connections) > MAX_TRACKED_CONNECTIONS:
            self._connections.popitem(last=False)

    def _tools_changed(self) -> None:
        loop = self._loop
        if loop is None:
            return  # nobody connected yet: the first tools/list shows the current set
        loop.call_soon_threadsafe(self._schedule)

    def _schedule(self) -> None:
        # Changes that come in a burst (a mesh starting) make one notification each time it is sent.
        self._dirty = True
        if self._notifying is None or self._notifying.done():
            self._notifying = asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        while self._dirty:
            self._dirty = False
            log.info("tools changed: %s", ", ".join(self.bridge.tools) or "none")
            await self.bus.publish(ToolsListChanged())
            for session in list(self._connections.values()):
                try:
                    await session.send_tool_list_changed()  # best effort: a closed channel drops it
                except Exception as exc:  # one dead connection must not stop the others
                    log.debug("list_changed not delivered: %s", exc)

    async def close(self) -> None:
        self.listen.close()
        if self._notifying is not None:
            self._notifying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._notifying


class _OtelWhenInstalled:
    """The SDK's OpenTelemetry middleware, run only once a global tracer provider is installed.

    Without one its span is a no-op, but building it (attributes, context extraction, the
    span's context manager) is a good part of what serving a tool call costs (bench/mcp.py).
    """

    def __init__(self, inner: OpenTelemetryMiddleware) -> None:
        self._inner = inner

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            return await call_next(ctx)
        return await self._inner(ctx, call_next)


_APPROVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve", "description": "run this tool call"},
        "reason": {"type": "string", "title": "Reason", "description": "told to the agent when you deny it"},
    },
    "required": ["approve"],
}


async def _elicited(ctx: ServerRequestContext[Any], agent: str, call: Mapping[str, Any]) -> dict[str, Any]:
    """Ask the client's user about one tool call (elicitation); its tool_approval_result part."""
    arguments = str(call.get("arguments"))[:2000]
    question = f"Agent {agent!r} wants to call {call.get('function_name')} with {arguments}. Approve?"
    said = await ctx.session.elicit_form(question, _APPROVE_SCHEMA)
    content = said.content or {}
    approved = said.action == "accept" and content.get("approve") is True
    data: dict[str, Any] = {"type": "tool_approval_result", "tool_call_id": call.get("tool_call_id")}
    data["approved"] = approved
    if not approved:
        reason = content.get("reason") if said.action == "accept" else f"the user chose {said.action}"
        data["reason"] = str(reason or "denied")
    return {"kind": "data", "data": data}


def _checked(tool: AgentTool, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments if they fit the tool's schema; a ValueError naming the fix if not."""
    unknown = sorted(set(arguments) - _ARGUMENTS)
    if unknown:
        raise _invalid(f"unknown argument(s) {unknown} for tool {tool.name!r}; it takes {sorted(_ARGUMENTS)}")
    message = arguments.get("message")
    if not isinstance(message, str) or not message.strip():
        raise _invalid(f"tool {tool.name!r} needs a non-empty string 'message' (what to ask agent {tool.agent!r})")
    if len(message) > MAX_MESSAGE_CHARS:
        raise _invalid(f"'message' has {len(message)} characters; at most {MAX_MESSAGE_CHARS} are accepted")
    for key in ("context_id", "task_id", "skill"):
        value = arguments.get(key)
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 256):
            raise _invalid(f"{key!r} must be a string of 1 to 256 characters, not {value!r:.60}")
    skill = arguments.get("skill")
    if skill is not None and tool.skills and skill not in tool.skills:
        raise _invalid(f"agent {tool.agent!r} has no skill {skill!r}; its skills: {', '.join(tool.skills)}")
    return {k: v for k, v in arguments.items() if v is not None}


def _invalid(message: str) -> ValueError:
    return ValueError(message)


def _principal(ctx: ServerRequestContext[Any]) -> str | None:
    """The caller the HTTP edge authenticated (none on stdio: the user who started the process)."""
    scope = getattr(ctx.request, "scope", None)
    name = scope.get(PRINCIPAL_SCOPE_KEY) if isinstance(scope, Mapping) else None
    return name if isinstance(name, str) and name != "anonymous" else None

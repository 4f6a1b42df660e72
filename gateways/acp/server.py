"""``mesh acp AGENT``: an ACP agent on stdio that forwards an editor's prompts to a mesh agent.

Every ACP request is first an E2A envelope (:func:`~mesh.e2a.envelope_from_acp_jsonrpc`);
prompts go to the mesh through the gateway runtime (:class:`~gateways.runtime.GatewayRuntime`,
the one call path) as ``message/stream``, and its E2A frames are turned into ``session/update``s
by :class:`~gateways.acp.turn.PromptTurn`; the turn's result or error is an E2A response made
into JSON-RPC by :func:`~mesh.e2a.e2a_response_to_acp_jsonrpc_response`.

A session is an A2A context (``sessionId`` = ``contextId``); its modes are the agents on the
mesh, the one named on the command line first, and ``session/set_mode`` switches agent. An
``input-required`` answer ends the turn with the question; the next prompt answers that task.
An LLM agent's tool calls waiting for approval are asked as ``session/request_permission``
(allow once / reject once), and the answers go on the task within the same turn.
Sessions are recorded (:mod:`gateways.acp.sessions`) for ``session/list``; ``session/load``
replays a session from its agent's task store (``tasks/get`` of each of its tasks).
The broker is connected in the background: a request that needs it waits for the connection,
and an unreachable broker, an unknown agent or an agent gone are JSON-RPC errors that say so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

from acp.exceptions import RequestError

from gateways.acp.sessions import SessionRecord, SessionStore
from gateways.acp.turn import PromptTurn, TurnEnd
from gateways.runtime import GatewayRuntime
from mesh.a2a import AgentCard
from mesh.background import BackgroundTasks, cancel_and_wait
from mesh.brokertools.refusals import refusal_fix
from mesh.e2a import E2AEnvelope, E2AResponse, e2a_response_to_acp_jsonrpc_response, envelope_from_acp_jsonrpc
from mesh.e2a.acp_content import a2a_part_to_acp_block, acp_blocks_to_a2a_parts
from mesh.errors import AgentNotFoundError, MeshError

__all__ = ["PROTOCOL_VERSION", "AcpGateway", "AcpSession"]

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
NOT_FOUND = -32002  # ACP's "resource not found": the agent is not on the mesh
INTERNAL = -32603

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]


@dataclass(slots=True)
class AcpSession:
    session_id: str
    agent: str
    cwd: str
    pending_task: str | None = None  # an input-required task the next prompt answers
    turn: PromptTurn | None = None
    cancel_requested: bool = False
    cancel_sent: bool = False
    running: asyncio.Task[Any] | None = field(default=None, repr=False)


class AcpGateway:
    """The ACP side of ``mesh acp``; ``handle`` is the JSON-RPC handler of the stdio connection."""

    def __init__(
        self, runtime: GatewayRuntime, agent: str, *, wait_s: float = 3.0, store: SessionStore | None = None
    ) -> None:
        self.runtime = runtime
        self.store = store or SessionStore(None)
        self.default_agent = agent
        self.wait_s = wait_s
        self.notify: Notify | None = None
        #: Sends a request to the editor and returns its result (``session/request_permission``).
        self.request: Callable[[str, dict[str, Any]], Awaitable[Any]] | None = None
        self.sessions: dict[str, AcpSession] = {}
        self._connected: asyncio.Task[None] | None = None
        self._background = BackgroundTasks(log, "ACP gateway")

    def connect_in_background(self) -> None:
        self._connected = asyncio.get_running_loop().create_task(self.runtime.start())

    async def stop(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._connected is None:
            return
        if not self._connected.done():  # still starting: stop that, then close what it opened
            await cancel_and_wait(self._connected)
        with contextlib.suppress(MeshError):  # (a start that failed left less to close)
            await self.runtime.stop()

    # ------------------------------------------------------------------ dispatch

    async def handle(self, method: str, params: Any, is_notification: bool) -> Any:
        envelope = envelope_from_acp_jsonrpc(
            method, params if isinstance(params, dict) else {}, session_id=_session_id(params), channel="acp"
        )
        envelope.request_id = uuid.uuid4().hex
        handler = _HANDLERS.get(method)
        if handler is None:
            if is_notification:
                return None
            raise RequestError.method_not_found(method)
        result = await handler(self, envelope)
        if is_notification:
            return None
        # The answer is an E2A response too, made JSON-RPC by the seed's adapter.
        answer = e2a_response_to_acp_jsonrpc_response(
            E2AResponse(
                request_id=envelope.request_id,
                response_kind="acp.prompt_result" if method == "session/prompt" else "e2a.complete",
                body=result,
                is_final=True,
                status="succeeded",
                projections={"acp": {"jsonrpc": "2.0", "result": result}},
            )
        )
        return (answer or {}).get("result")

    # ------------------------------------------------------------------ methods

    async def _initialize(self, envelope: E2AEnvelope) -> dict[str, Any]:
        asked = envelope.params.get("protocolVersion")
        card = await self._card(self.default_agent)
        modes = set(card.default_input_modes or [])
        accepts = _accepts_files(modes)
        return {
            "protocolVersion": min(asked, PROTOCOL_VERSION)
            if isinstance(asked, int) and asked > 0
            else PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "sessionCapabilities": {"list": {}},
                "promptCapabilities": {
                    "image": accepts or any(m.startswith("image/") for m in modes),
                    "audio": accepts or any(m.startswith("audio/") for m in modes),
                    "embeddedContext": True,
                },
            },
            "agentInfo": {"name": card.name, "title": card.description or card.name, "version": card.version},
            "authMethods": [],
        }

    async def _new_session(self, envelope: E2AEnvelope) -> dict[str, Any]:
        await self._card(self.default_agent)
        session = AcpSession(uuid.uuid4().hex, self.default_agent, str(envelope.params.get("cwd") or ""))
        self.sessions[session.session_id] = session
        self.store.save(SessionRecord(session.session_id, session.agent, session.cwd))
        log.info("session %s: agent %s", session.session_id, session.agent)
        return {"sessionId": session.session_id, "modes": self._modes(session)}

    async def _list_sessions(self, envelope: E2AEnvelope) -> dict[str, Any]:
        cwd = envelope.params.get("cwd")
        return {"sessions": [r.info() for r in self.store.list(cwd if isinstance(cwd, str) else None)]}

    async def _load_session(self, envelope: E2AEnvelope) -> dict[str, Any]:
        record = self.store.get(envelope.session_id or "")
        if record is None:
            raise RequestError(NOT_FOUND, f"no session {envelope.session_id!r} was recorded on this namespace")
        await self._card(record.agent)
        session = AcpSession(record.session_id, record.agent, str(envelope.params.get("cwd") or record.cwd))
        self.sessions[session.session_id] = session
        for task_id in record.tasks:
            for update in await self._history(record.agent, task_id):
                await self._notify(session, update)
        return {"modes": self._modes(session)}

    async def _history(self, agent: str, task_id: str) -> list[dict[str, Any]]:
        """A task's conversation as ``user_message_chunk`` / ``agent_message_chunk`` updates."""
        envelope = envelope_from_acp_jsonrpc("tasks/get", {"id": task_id}, channel="acp")
        envelope.request_id = uuid.uuid4().hex
        task: Any = None
        async for frame in self.runtime.forward(envelope, agent):
            if frame.is_final and frame.response_kind == "a2a.task":
                task = frame.body
            elif frame.is_final:
                log.info("session history: task %s of %s is not there any more: %s", task_id, agent, frame.body)
        if not isinstance(task, dict):
            return []
        messages = [m for m in task.get("history") or [] if isinstance(m, dict)]
        final = (task.get("status") or {}).get("message")
        if isinstance(final, dict) and final.get("messageId") not in {m.get("messageId") for m in messages}:
            messages.append(final)
        updates = []
        for message in messages:
            kind = "user_message_chunk" if message.get("role") == "user" else "agent_message_chunk"
            for part in message.get("parts") or []:
                if isinstance(part, dict) and part.get("kind") != "data":
                    updates.append({"sessionUpdate": kind, "content": a2a_part_to_acp_block(part)})
        return updates

    async def _set_mode(self, envelope: E2AEnvelope) -> dict[str, Any]:
        session = self._session(envelope)
        mode = envelope.params.get("modeId")
        if not isinstance(mode, str):
            raise _invalid("modeId must be the name of an agent on the mesh")
        await self._card(mode)
        session.agent, session.pending_task = mode, None  # a task waiting on the old agent is left to it
        await self._notify(session, {"sessionUpdate": "current_mode_update", "currentModeId": mode})
        return {}

    async def _prompt(self, envelope: E2AEnvelope) -> dict[str, Any]:
        session = self._session(envelope)
        if session.running is not None:
            raise RequestError(-32600, "a prompt is already running in this session; cancel it or wait for its end")
        session.running = asyncio.current_task()
        try:
            end = await self._turn(session, envelope)
        finally:
            session.running, session.turn = None, None
            session.cancel_requested = session.cancel_sent = False
        if end.error is not None:
            raise RequestError(
                int(end.error.get("code", INTERNAL)), str(end.error.get("message")), end.error.get("data")
            )
        return {"stopReason": end.stop_reason or "end_turn"}

    async def _cancel(self, envelope: E2AEnvelope) -> dict[str, Any]:
        session = self.sessions.get(envelope.session_id or "")
        if session is not None and session.running is not None:
            session.cancel_requested = True
            self._send_cancel(session)
        return {}

    # ------------------------------------------------------------------ a turn

    async def _turn(self, session: AcpSession, envelope: E2AEnvelope) -> TurnEnd:
        blocks = envelope.params.get("prompt")
        if not isinstance(blocks, list):
            raise _invalid("prompt must be a list of content blocks")
        card = await self._card(session.agent)
        images = _accepts_files(set(card.default_input_modes or [])) or any(
            m.startswith("image/") for m in card.default_input_modes or []
        )
        if not images and any(isinstance(b, dict) and b.get("type") == "image" for b in blocks):
            raise _invalid(f"agent {session.agent!r} does not accept images (its card has no image input mode)")
        turn = session.turn = PromptTurn(images=images)
        message: dict[str, Any] = {
            "kind": "message",
            "role": "user",
            "messageId": uuid.uuid4().hex,
            "contextId": session.session_id,
            "parts": acp_blocks_to_a2a_parts(b for b in blocks if isinstance(b, dict)),
        }
        if session.pending_task:
            message["taskId"], turn.task_id = session.pending_task, session.pending_task
        session.pending_task = None
        envelope.method, envelope.is_stream, envelope.context_id = "session/prompt", True, session.session_id
        while True:
            envelope.params = {"message": message}
            end = await self._stream(session, turn, envelope)
            if not (end.approvals and turn.task_id and self.request is not None and not session.cancel_requested):
                break
            # The editor allows or rejects each call; the answers go on the task in this turn.
            message = await self._permissions(session, turn.task_id, end.approvals)
        for update in turn.closing_updates():
            await self._notify(session, update)
        self._record(session, turn, blocks)
        if session.cancel_requested:
            return TurnEnd("cancelled")  # ACP: after session/cancel the turn ends cancelled
        if end.input_required:
            session.pending_task = turn.task_id
        return end

    async def _stream(self, session: AcpSession, turn: PromptTurn, envelope: E2AEnvelope) -> TurnEnd:
        end = TurnEnd(stop_reason="end_turn")
        # forward() is an async generator: closing it ends the call on the mesh side too.
        forwarded = cast(AsyncGenerator[E2AResponse, None], self.runtime.forward(envelope, session.agent))
        async with contextlib.aclosing(forwarded) as frames:
            async for frame in frames:
                if frame.is_final:
                    updates, end = turn.end(frame)
                else:
                    updates = turn.updates(frame)
                    if session.cancel_requested:
                        self._send_cancel(session)
                for update in updates:
                    await self._notify(session, update)
        return end

    async def _permissions(self, session: AcpSession, task_id: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
        """Ask the editor about each call; the message answering them on the task."""
        request = self.request
        if request is None:  # (checked by the caller)
            raise RuntimeError("the ACP connection cannot send requests")
        parts = []
        for call in calls:
            params = {
                "sessionId": session.session_id,
                "toolCall": {
                    "toolCallId": str(call.get("tool_call_id")),
                    "title": f"Run {call.get('function_name')}",
                    "kind": "other",
                    "status": "pending",
                    "rawInput": call.get("arguments"),
                },
                "options": [
                    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                ],
            }
            answer = await request("session/request_permission", params)
            outcome = (answer or {}).get("outcome") or {}
            approved = outcome.get("outcome") == "selected" and outcome.get("optionId") == "allow"
            data: dict[str, Any] = {"type": "tool_approval_result", "tool_call_id": call.get("tool_call_id")}
            data["approved"] = approved
            if not approved:
                data["reason"] = "rejected in the editor" if outcome.get("outcome") == "selected" else "canceled"
            parts.append({"kind": "data", "data": data})
        return {
            "kind": "message",
            "role": "user",
            "messageId": uuid.uuid4().hex,
            "contextId": session.session_id,
            "taskId": task_id,
            "parts": parts,
        }

    def _record(self, session: AcpSession, turn: PromptTurn, blocks: list[Any]) -> None:
        record = self.store.get(session.session_id) or SessionRecord(session.session_id, session.agent, session.cwd)
        record.agent = session.agent
        if record.title is None:
            words = " ".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
            record.title = words.strip()[:80] or None
        if turn.task_id and turn.task_id not in record.tasks:
            record.tasks.append(turn.task_id)
        self.store.save(record)

    def _send_cancel(self, session: AcpSession) -> None:
        turn = session.turn
        if session.cancel_sent or turn is None or turn.task_id is None:
            return  # sent once the task id is known (the first event)
        session.cancel_sent = True
        envelope = envelope_from_acp_jsonrpc("tasks/cancel", {"id": turn.task_id}, session_id=session.session_id)
        envelope.request_id = uuid.uuid4().hex
        self._background.spawn(self._forget(envelope, session.agent), name=f"forget:{envelope.request_id}")

    async def _forget(self, envelope: E2AEnvelope, agent: str) -> None:
        async for frame in self.runtime.forward(envelope, agent):
            if frame.status == "failed":
                log.warning("tasks/cancel to %s: %s", agent, frame.body.get("message"))

    # ------------------------------------------------------------------ helpers

    async def _card(self, agent: str) -> AgentCard:
        """The agent's card, once the broker is connected; a clear error when it cannot be had."""
        await self._broker()
        try:
            entry = await self.runtime.registry.wait_for(agent, self.wait_s)
        except AgentNotFoundError as exc:
            raise RequestError(NOT_FOUND, str(exc), {"agentName": agent, "availableAgents": exc.available}) from None
        except ValueError as exc:  # not a valid agent name
            raise _invalid(str(exc)) from None
        card: AgentCard = entry.card
        return card

    async def _broker(self) -> None:
        if self._connected is None:
            self.connect_in_background()
        if self._connected is None:  # connect_in_background() sets it
            raise RuntimeError("the ACP gateway did not start connecting to the broker")
        try:
            await asyncio.shield(self._connected)
        except MeshError as exc:
            fix = refusal_fix(exc)  # refused by the broker, which did answer: what to do instead
            raise RequestError(
                INTERNAL,
                f"cannot reach the mesh: {exc}" + (f"; {fix}" if fix else ""),
                {"errorType": "BrokerUnreachable", "broker": self.runtime.broker_url},
            ) from None

    def _session(self, envelope: E2AEnvelope) -> AcpSession:
        session = self.sessions.get(envelope.session_id or "")
        if session is None:
            raise _invalid(f"unknown session {envelope.session_id!r}: open one with session/new")
        return session

    def _modes(self, session: AcpSession) -> dict[str, Any]:
        names = [session.agent, *(n for n in self.runtime.agent_names() if n != session.agent)]
        modes = []
        for name in names:
            entry = self.runtime.agent(name)
            modes.append({"id": name, "name": name, "description": entry.card.description if entry else None})
        return {"currentModeId": session.agent, "availableModes": modes}

    async def _notify(self, session: AcpSession, update: dict[str, Any]) -> None:
        if self.notify is not None:
            await self.notify("session/update", {"sessionId": session.session_id, "update": update})


def _invalid(message: str) -> RequestError:
    return RequestError(-32602, message)


def _session_id(params: Any) -> str | None:
    value = params.get("sessionId") if isinstance(params, dict) else None
    return value if isinstance(value, str) else None


def _accepts_files(modes: set[str]) -> bool:
    return "*/*" in modes or "application/octet-stream" in modes


_HANDLERS: dict[str, Callable[[AcpGateway, E2AEnvelope], Awaitable[dict[str, Any]]]] = {
    "initialize": AcpGateway._initialize,
    "session/new": AcpGateway._new_session,
    "session/load": AcpGateway._load_session,
    "session/list": AcpGateway._list_sessions,
    "session/set_mode": AcpGateway._set_mode,
    "session/prompt": AcpGateway._prompt,
    "session/cancel": AcpGateway._cancel,
}

"""The mesh as a requester of EMQX "A2A over MQTT" profile agents (the profile's requester rules).

Agents of the profile are named ``{org}/{unit}/{agent}`` (a pool: ``{org}/{unit}/pool/{pool}``);
:class:`mesh.client.MeshClient` sends to them through a :class:`ProfileRequester` on its own
connection. The mesh's 0.3 request is translated to A2A 1.0 (:func:`request_to_v1`, with the
1.0 message writer of :mod:`mesh.profile.v1`), the answers back to 0.3 models
(:mod:`mesh.profile.v1_results`), and the profile's rules are kept:

- the requester generates the ``Task.id`` of a new task (a UUID) and keeps it for every retry;
- it subscribes to its reply filter (``$a2a/v1/reply/+/+/{owner}/+``) before publishing, with
  Response Topic ``$a2a/v1/reply/{org}/{unit}/{owner}/{correlation}`` and Correlation Data;
- retry profile: first reply within ``first_reply_timeout_s`` (15 s), else publish again with
  new Correlation Data after 1 s / 2 s / 4 s (±20 %), 3 attempts in all; replies to any of the
  attempts count; once an item arrived, nothing is published again and ``stream_idle_timeout_s``
  (30 s) bounds the wait for the next; -32003 ``request_expired`` and -32004
  ``responder_unavailable`` (named so in ``data.a2a_error``) are retried the same way; A2A's own
  -32003 and -32004 (no such name), -32005 and the others are raised;
- a request nobody subscribes to (PUBACK "no matching subscribers") fails at once
  (:class:`~mesh.errors.AgentUnavailableError`), as any mesh call does.

A responder that answers ``SendMessage`` with stream items (the SDK's does: submitted, working,
artifacts, then a terminal status) is read as such: the events are collected into the Task.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from mesh.a2a import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    InvalidAgentResponse,
    JSONRPCErrorObject,
    Message,
    MessageSendParams,
    RpcError,
    Task,
    TaskArtifactUpdateEvent,
    TaskQueryParams,
    TaskStatusUpdateEvent,
    decode_json,
)
from mesh.a2a.base import A2AModel
from mesh.a2a.methods import STREAMING_METHODS, TASK_ANSWER_METHODS, Method
from mesh.errors import AgentUnavailableError, CallTimeoutError, NoSubscribersError
from mesh.profile.emqx import A2A_ERRORS, AUTHORIZATION, REQUEST_EXPIRED, RESPONDER_UNAVAILABLE
from mesh.profile.v1 import JSON, message_v1
from mesh.profile.v1_results import result_from_v1
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import InboundMessage, Subscription, Transport
from topics import PROFILE_PREFIX, validate_identifier, validate_profile_id

__all__ = ["ProfileRequester", "is_profile_agent", "profile_target", "request_to_v1"]

log = logging.getLogger(__name__)

Item = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
_RETRYABLE = frozenset(A2A_ERRORS[code] for code in (REQUEST_EXPIRED, RESPONDER_UNAVAILABLE))
# The methods a profile requester sends, by their A2A 1.0 names.
_V1_METHODS = {
    str(m): m.v1_name
    for m in (
        Method.message_send,
        Method.message_stream,
        Method.tasks_get,
        Method.tasks_cancel,
        Method.tasks_resubscribe,
    )
}


def is_profile_agent(name: str) -> bool:
    """Whether ``name`` names an agent of the EMQX profile (``org/unit/agent``) rather than a mesh agent."""
    return isinstance(name, str) and "/" in name


def profile_target(name: str) -> tuple[str, str, str]:
    """``(org, unit, agent)`` of ``org/unit/agent`` (``agent`` may be ``pool/<pool>``); a ValueError names the fix."""
    levels = name.split("/")
    if len(levels) == 4 and levels[2] == "pool":
        levels = [levels[0], levels[1], f"pool/{validate_profile_id(levels[3], 'pool')}"]
    if len(levels) != 3:
        raise ValueError(f"profile agent {name!r}: name it org/unit/agent (or org/unit/pool/<pool>)")
    org, unit, agent = levels
    validate_profile_id(org, "org")
    validate_profile_id(unit, "unit")
    if not agent.startswith("pool/"):
        validate_profile_id(agent, "agent id")
    return org, unit, agent


def request_to_v1(method: str, params: A2AModel) -> tuple[str, JSON]:
    """The A2A 1.0 method and params of a mesh request to a profile agent (a new message gets a Task.id)."""
    v1 = _V1_METHODS.get(method)
    if v1 is None:
        raise ValueError(f"{method} is not sent to EMQX profile agents; use one of {', '.join(_V1_METHODS)}")
    if isinstance(params, MessageSendParams):
        message = params.message
        if not message.task_id:  # the profile's rule: the requester names the task
            message = message.model_copy(update={"task_id": str(uuid.uuid4())})
        out: JSON = {"message": message_v1(message)}
        config = params.configuration
        if config is not None:
            configuration: JSON = {}
            if config.blocking is False:
                configuration["returnImmediately"] = True
            if config.history_length is not None:
                configuration["historyLength"] = config.history_length
            if config.accepted_output_modes:
                configuration["acceptedOutputModes"] = config.accepted_output_modes
            if configuration:
                out["configuration"] = configuration
        if params.metadata:
            out["metadata"] = params.metadata
        return v1, out
    out = {"id": getattr(params, "id", None)}
    if isinstance(params, TaskQueryParams) and params.history_length is not None:
        out["historyLength"] = params.history_length
    return v1, out


class _Exchange:
    """One call's replies (from every attempt), in order."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[JSON] = asyncio.Queue()
        self.correlations: list[bytes] = []


class ProfileRequester:
    """Sends one owner's requests to profile agents and reads their answers (see the module doc)."""

    def __init__(
        self,
        transport: Transport,
        owner: str,
        *,
        first_reply_timeout_s: float = 15.0,
        stream_idle_timeout_s: float = 30.0,
        attempts: int = 3,
        backoff_s: Sequence[float] = (1.0, 2.0, 4.0),
    ) -> None:
        self.transport = transport
        self.owner = validate_identifier(owner, "requester id")
        self.first_reply_timeout_s = first_reply_timeout_s
        self.stream_idle_timeout_s = stream_idle_timeout_s
        self.attempts = attempts
        self.backoff_s = tuple(backoff_s)
        self._exchanges: dict[bytes, _Exchange] = {}
        self._subscription: Subscription | None = None
        self._subscribing: asyncio.Future[Subscription] | None = None

    async def start(self) -> None:
        """Subscribe to the reply filter (once)."""
        if self._subscribing is None:
            self._subscribing = asyncio.ensure_future(
                self.transport.subscribe(f"{PROFILE_PREFIX}/reply/+/+/{self.owner}/+", self._on_reply)
            )
        self._subscription = await asyncio.shield(self._subscribing)

    def _on_reply(self, message: InboundMessage) -> None:
        correlation = message.properties.correlation_data
        exchange = self._exchanges.get(correlation) if correlation is not None else None
        if exchange is None:
            return  # late (the call ended) or foreign
        try:
            doc = decode_json(message.payload)
        except ValueError:
            log.warning("%s: a profile reply on %s is not JSON; dropped", self.owner, message.topic)
            return
        if isinstance(doc, dict):
            exchange.queue.put_nowait(doc)

    async def items(
        self, agent: str, method: str, params: A2AModel, *, auth_token: str | None = None
    ) -> AsyncIterator[Item]:
        """The answers to one request, as 0.3 models, until the one that ends it (its last item)."""
        org, unit, agent_id = profile_target(agent)
        v1_method, v1_params = request_to_v1(method, params)
        await self.start()
        exchange = _Exchange()
        streaming = method in STREAMING_METHODS
        config = params.configuration if isinstance(params, MessageSendParams) else None
        returns_at_once = config is not None and config.blocking is False
        artifacts: dict[str, Any] = {}
        try:
            async for doc in self._replies(agent, org, unit, agent_id, v1_method, v1_params, exchange, auth_token):
                item = result_from_v1(doc["result"])
                if isinstance(item, TaskArtifactUpdateEvent):
                    artifacts[item.artifact.artifact_id] = item.artifact
                if not (returns_at_once and isinstance(item, Task)) and not _ends(item, method):
                    yield item
                    continue
                if isinstance(item, TaskStatusUpdateEvent):
                    if streaming:
                        yield item
                    # 1.0 streams (and the SDK's SendMessage) end with a status: the Task is what they built.
                    history: list[Message] = []
                    yield Task(
                        id=item.task_id,
                        context_id=item.context_id,
                        status=item.status,
                        artifacts=list(artifacts.values()),
                        history=history,
                    )
                else:
                    yield item
                return
        finally:
            for correlation in exchange.correlations:
                self._exchanges.pop(correlation, None)

    async def _replies(
        self,
        agent: str,
        org: str,
        unit: str,
        agent_id: str,
        v1_method: str,
        v1_params: JSON,
        exchange: _Exchange,
        auth_token: str | None,
    ) -> AsyncIterator[JSON]:
        """The replies of one call under the retry profile (errors raised, retryable ones retried)."""
        request_id = uuid.uuid4().hex
        payload = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": v1_method, "params": v1_params}, separators=(",", ":")
        ).encode()
        topic = f"{PROFILE_PREFIX}/request/{org}/{unit}/{agent_id}"
        got_any = False
        last_error: JSONRPCErrorObject | None = None
        for attempt in range(self.attempts):
            if attempt:
                base = self.backoff_s[min(attempt - 1, len(self.backoff_s) - 1)]
                await asyncio.sleep(base * (1 + 0.2 * (2 * random.random() - 1)))  # noqa: S311 - jitter
            correlation = uuid.uuid4().hex
            exchange.correlations.append(correlation.encode())
            self._exchanges[correlation.encode()] = exchange
            props = MessageProperties(
                reply_to=f"{PROFILE_PREFIX}/reply/{org}/{unit}/{self.owner}/{correlation}",
                correlation_data=correlation.encode(),
                content_type=JSON_CONTENT_TYPE,
                payload_format_utf8=True,
                extra=[(AUTHORIZATION, f"Bearer {auth_token}")] if auth_token else [],
            )
            try:
                await self.transport.publish_nowait(topic, payload, properties=props, require_subscriber=True)
            except NoSubscribersError:
                raise AgentUnavailableError.not_listening(agent, topic) from None
            timeout = self.first_reply_timeout_s
            while True:
                try:
                    doc = await asyncio.wait_for(exchange.queue.get(), timeout)
                except TimeoutError:
                    if got_any:
                        raise CallTimeoutError(
                            agent=agent,
                            method=v1_method,
                            task_id=None,
                            waited_s=timeout,
                            reason="idle",
                            canceled=False,
                        ) from None
                    break  # no first reply: the next attempt
                if "error" in doc:
                    error = _error(doc["error"])
                    if not got_any and _retryable(error) and attempt + 1 < self.attempts:
                        last_error = error
                        break
                    raise RpcError.from_error(error, request_id=doc.get("id"))
                if "result" not in doc:
                    raise InvalidAgentResponse(f"{agent} answered a JSON-RPC response without result or error")
                got_any = True
                timeout = self.stream_idle_timeout_s
                yield doc
        if last_error is not None:
            raise RpcError.from_error(last_error)
        raise CallTimeoutError(
            agent=agent,
            method=v1_method,
            task_id=None,
            waited_s=self.first_reply_timeout_s,
            reason="idle",
            canceled=False,
        )

    async def close(self) -> None:
        if self._subscription is not None and self.transport.is_connected:
            with contextlib.suppress(Exception):
                await self.transport.unsubscribe(self._subscription)
        self._subscription = self._subscribing = None


def _error(value: Any) -> JSONRPCErrorObject:
    if not isinstance(value, dict):
        return JSONRPCErrorObject(code=-32603, message=f"malformed error {value!r:.200}")
    code = value.get("code")
    message = value.get("message")
    return JSONRPCErrorObject(
        code=code if isinstance(code, int) else -32603,
        message=message if isinstance(message, str) else "error",
        data=value.get("data"),
    )


def _retryable(error: JSONRPCErrorObject) -> bool:
    """A profile condition the profile retries: named by ``data.a2a_error``, with its own code.

    The code alone says nothing: A2A's -32003 (push notifications not supported) and -32004
    (unsupported operation) are permanent."""
    named = error.data.get("a2a_error") if isinstance(error.data, dict) else None
    return named in _RETRYABLE and A2A_ERRORS.get(error.code) == named


def _ends(item: Item, method: str) -> bool:
    """Whether ``item`` is the last of its call."""
    if isinstance(item, Message):
        return True
    if isinstance(item, Task):
        if method in STREAMING_METHODS:
            return item.status.state in TERMINAL_STATES or item.status.state in INTERRUPTED_STATES
        if method == Method.message_send:  # a submitted or working Task may come first from responders that stream
            return item.status.state in TERMINAL_STATES or item.status.state in INTERRUPTED_STATES
        return True
    if isinstance(item, TaskStatusUpdateEvent):
        return bool(item.final) or method in TASK_ANSWER_METHODS
    return False

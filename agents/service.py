"""An agent as a broker-connected service: the A2A methods on its request topic.

Requests arrive on ``{ns}/a2a/v1/agent/request/{agent}``. Answers go to the request's
``replyTo`` (else the client response topic of its ``clientId``; else they are logged and
dropped), streaming events to its ``a2aStatusTopic``, each with the request's Correlation Data.
Every accepted request ends in an answer: a final Task, or a JSON-RPC error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agents.agent import Agent
from agents.context import TaskContext
from agents.push import PushConfigStore, PushNotifier, check_push_url
from agents.runner import TaskRunner
from agents.settings import AgentSettings, Limits
from agents.tasks import ContextHistory, Listener, TaskRecord, TaskStore
from mesh.a2a import (
    INTERRUPTED_STATES,
    DataPart,
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    InternalFailure,
    InvalidParams,
    InvalidRequest,
    ListTaskPushNotificationConfigParams,
    Message,
    MessageSendParams,
    Method,
    ParsedRequest,
    PushNotificationNotSupported,
    RpcError,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskNotCancelable,
    TaskNotFound,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
    UnsupportedOperation,
    parse_request,
    success_response_bytes,
)
from mesh.broker import BrokerSettings
from mesh.errors import TransportError
from mesh.presence import CardPresence, presence_will
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import InboundMessage, MqttTransport
from topics import (
    get_agent_discovery_topic,
    get_agent_request_topic,
    get_client_response_topic,
    get_client_status_topic,
    shared_subscription,
    validate_identifier,
    validate_namespace,
)

log = logging.getLogger("agents.service")

_IDENTIFIER_ERRORS = (ValueError,)
# How long a stopping agent waits for the answers to its canceled tasks to go out.
_STOP_GRACE_S = 10.0


@dataclass(frozen=True, slots=True)
class Route:
    """Where the answer to one request goes, and the Correlation Data it carries."""

    topic: str | None
    correlation: bytes | None
    request_id: str | int | None = None


class AgentService:
    """Serves one :class:`~agents.agent.Agent` on the mesh (a :class:`mesh.component.Component`)."""

    kind = "agent"

    def __init__(
        self,
        agent: Agent,
        *,
        broker: BrokerSettings,
        namespace: str,
        settings: AgentSettings | None = None,
        client_id: str | None = None,
    ) -> None:
        self.agent = agent
        self.name = agent.name
        self.namespace = validate_namespace(namespace)
        self.settings = settings or AgentSettings()
        self.request_topic = get_agent_request_topic(self.namespace, self.name)
        self.card_topic = get_agent_discovery_topic(self.namespace, self.name)
        self.transport = MqttTransport(
            broker,
            client_id=client_id or f"{self.name}-{uuid.uuid4().hex[:8]}",
            will=presence_will(self.card_topic),
        )
        self.url = f"{broker.url}/{self.request_topic}"
        self.tasks = TaskStore(retention_s=self.settings.task_retention_s, max_finished=self.settings.max_retained_tasks)
        self.contexts = ContextHistory(per_context=self.settings.context_history_limit)
        self.push_configs = PushConfigStore()
        self.notifier = PushNotifier(
            allow_private=self.settings.allow_private_push_urls, timeout_s=self.settings.push_timeout_s
        )
        self.runner = TaskRunner(agent, self._on_event, max_concurrent=self.settings.max_concurrent_tasks)
        self.presence = CardPresence(
            self.transport,
            self.card_topic,
            self.card_bytes,
            interval_s=self.settings.card_interval_s,
            expiry_intervals=self.settings.card_expiry_intervals,
        )
        self._methods: dict[Method, Callable[[ParsedRequest, MessageProperties, Route], Awaitable[None]]] = {
            Method.message_send: self._message_send,
            Method.message_stream: self._message_stream,
            Method.tasks_get: self._tasks_get,
            Method.tasks_cancel: self._tasks_cancel,
            Method.tasks_resubscribe: self._tasks_resubscribe,
            Method.push_config_set: self._push_set,
            Method.push_config_get: self._push_get,
            Method.push_config_list: self._push_list,
            Method.push_config_delete: self._push_delete,
        }
        self._requests: set[asyncio.Task[Any]] = set()
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    def card_bytes(self) -> bytes:
        return self.agent.card(url=self.url, push_notifications=self.settings.push_notifications).to_json_bytes()

    async def start(self) -> None:
        """Connect, subscribe to the request topic and announce the card."""
        await self.agent.setup()
        await self.transport.connect()
        topic_filter = self.request_topic
        if self.settings.shared_subscription:
            topic_filter = shared_subscription(self.name, self.request_topic)
        self._subscription = await self.transport.subscribe(topic_filter, self._on_request)
        await self.presence.start()
        log.info("agent %s serving %s on %s", self.name, self.request_topic, self.transport.settings.url)

    async def stop(self) -> None:
        """Stop taking requests, cancel and answer in-flight tasks, clear the card, disconnect."""
        if self._stopping:
            return
        self._stopping = True
        await self.transport.unsubscribe(self._subscription)
        active = list(self.tasks.active())
        await asyncio.gather(*(self.runner.cancel(r, "the agent is shutting down") for r in active))
        await self.runner.wait_idle(_STOP_GRACE_S)
        if self._requests:
            await asyncio.wait(list(self._requests), timeout=_STOP_GRACE_S)
        await self.presence.stop()
        await self.notifier.aclose()
        await self.transport.close()
        await self.agent.teardown()
        log.info("agent %s stopped (%d task(s) canceled)", self.name, len(active))

    # ------------------------------------------------------------------ requests

    async def _on_request(self, message: InboundMessage) -> None:
        this = asyncio.current_task()
        assert this is not None
        self._requests.add(this)
        try:
            await self._serve(message)
        finally:
            self._requests.discard(this)

    async def _serve(self, message: InboundMessage) -> None:
        props = message.properties
        route = self._route(props)
        limit = self.settings.limits.max_message_bytes
        if len(message.payload) > limit:
            await self._send_error(
                route,
                InvalidRequest(
                    f"the request is {len(message.payload)} bytes; agent {self.name!r} accepts at most {limit} "
                    "(limits.max_message_bytes); send large content by URI",
                    data={"size": len(message.payload), "limit": limit},
                ),
            )
            return
        try:
            request = parse_request(message.payload)
        except RpcError as exc:
            await self._send_error(route, exc)
            return
        route = Route(route.topic, route.correlation, request.id)
        try:
            if self._stopping:
                raise InternalFailure(f"agent {self.name!r} is shutting down; send the request again later")
            await self._methods[request.method](request, props, route)
        except RpcError as exc:
            await self._send_error(route, exc)
        except Exception as exc:
            log.exception("%s: %s failed", self.name, request.method)
            await self._send_error(route, InternalFailure(f"{type(exc).__name__}: {exc}"))

    def _route(self, props: MessageProperties) -> Route:
        topic = props.reply_to
        if topic is None and props.client_id:
            try:
                topic = get_client_response_topic(self.namespace, props.client_id)
            except _IDENTIFIER_ERRORS:
                topic = None
        correlation = props.correlation_data
        request_id = correlation.decode(errors="replace") if correlation else None
        return Route(topic, correlation, request_id)

    # ------------------------------------------------------------------ answers

    async def _send(self, route: Route, payload: bytes) -> None:
        if route.topic is None:
            log.warning("%s: request %r had no replyTo and no clientId; its answer is dropped", self.name, route.request_id)
            return
        try:
            await self.transport.publish(route.topic, payload, properties=_reply_properties(route.correlation))
        except TransportError as exc:
            log.warning("%s: could not answer request %r on %s: %s", self.name, route.request_id, route.topic, exc)

    async def _send_result(self, route: Route, result_json: bytes) -> None:
        await self._send(route, success_response_bytes(route.request_id, result_json))

    async def _send_error(self, route: Route, error: RpcError) -> None:
        request_id = error.request_id if error.request_id is not None else route.request_id
        await self._send(route, error.to_response(request_id).to_json_bytes())

    # ------------------------------------------------------------------ events

    def _on_event(self, record: TaskRecord, event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> None:
        """Fan an event out to the task's streams (in order) and push subscribers."""
        if record.listeners:
            result_json = event.to_json_bytes()
            for listener in record.listeners:
                self.transport.publish_nowait(
                    listener.topic,
                    success_response_bytes(listener.request_id, result_json),
                    properties=_reply_properties(listener.correlation),
                )
        if isinstance(event, TaskStatusUpdateEvent) and event.final:
            record.listeners.clear()
            if event.status.message is not None:  # the agent's answer joins the conversation
                self.contexts.append(record.context_id, event.status.message)
        configs = self.push_configs.configs_for(record.id)
        if configs:
            self.notifier.notify(record.snapshot(), configs)
        if record.is_terminal:
            for dropped in self.tasks.finished(record):
                self.push_configs.drop_task(dropped)
        self._arm_input_timeout(record)

    def _arm_input_timeout(self, record: TaskRecord) -> None:
        if record.input_timer is not None:
            record.input_timer.cancel()
            record.input_timer = None
        timeout = self.settings.input_timeout_s
        if timeout is not None and record.state is TaskState.input_required:
            loop = asyncio.get_running_loop()
            record.input_timer = loop.call_later(
                timeout, lambda: loop.create_task(self.runner.cancel(record, f"no input within {timeout:g} s"))
            )

    # ------------------------------------------------------------------ message/send, message/stream

    def _accept(self, request: ParsedRequest, props: MessageProperties) -> tuple[TaskRecord, TaskContext]:
        """Create the task of a new message, or pick up the interrupted task it answers."""
        params = request.params
        assert isinstance(params, MessageSendParams)
        message = params.message
        self._check_limits(message, self.settings.limits)
        if message.task_id:
            record = self._task(message.task_id)
            if record.state not in INTERRUPTED_STATES:
                raise InvalidParams(
                    f"task {record.id!r} is {record.state.value}; a message may continue a task only while it "
                    "is input-required (start a new task by leaving taskId out)",
                    data={"taskId": record.id, "state": record.state.value},
                )
            if message.context_id and message.context_id != record.context_id:
                raise InvalidParams(
                    f"contextId {message.context_id!r} does not match task {record.id!r}'s context "
                    f"{record.context_id!r}"
                )
        else:
            record = TaskRecord.new(self._new_task_id(request.id), message.context_id or uuid.uuid4().hex)
            self.tasks.add(record)
        message.task_id, message.context_id = record.id, record.context_id
        ctx = TaskContext(
            task_id=record.id,
            context_id=record.context_id,
            agent_name=self.name,
            history=self.contexts.messages(record.context_id),
            user_id=props.user_id,
            user_config=props.user_config or {},
            auth_token=props.auth_token,
            metadata=params.metadata or {},
            call_depth=props.call_depth or 0,
            cancelled=record.cancelled,
        )
        record.add_message(message)
        self.contexts.append(record.context_id, message)
        return record, ctx

    def _new_task_id(self, request_id: str | int | None) -> str:
        # SAM's convention: the request id names the task, so the sender knows it up front.
        if isinstance(request_id, str) and request_id not in self.tasks:
            try:
                return validate_identifier(request_id, "task id")
            except _IDENTIFIER_ERRORS:
                pass
        return uuid.uuid4().hex

    async def _start(self, request: ParsedRequest, props: MessageProperties) -> TaskRecord:
        record, ctx = self._accept(request, props)
        params = request.params
        assert isinstance(params, MessageSendParams)
        config = params.configuration
        if config is not None and config.push_notification_config is not None:
            await self._register_push(record, config.push_notification_config)
        return self._launch(record, params.message, ctx)

    def _launch(self, record: TaskRecord, message: Message, ctx: TaskContext) -> TaskRecord:
        self.runner.launch(record, message, ctx)
        return record

    async def _message_send(self, request: ParsedRequest, props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, MessageSendParams)
        config = params.configuration
        history_length = config.history_length if config is not None else None
        record = await self._start(request, props)
        if config is None or config.blocking is not False:
            await record.settled.wait()
        await self._send_result(route, record.snapshot(history_length).to_json_bytes())

    async def _message_stream(self, request: ParsedRequest, props: MessageProperties, route: Route) -> None:
        if not self.agent.streaming:
            raise UnsupportedOperation(f"agent {self.name!r} does not stream; use message/send")
        record, ctx = self._accept(request, props)
        params = request.params
        assert isinstance(params, MessageSendParams)
        record.listeners.append(self._listener(record, props, route))
        config = params.configuration
        if config is not None and config.push_notification_config is not None:
            await self._register_push(record, config.push_notification_config)
        self._launch(record, params.message, ctx)
        await record.settled.wait()
        await self._send_result(route, record.snapshot().to_json_bytes())

    def _listener(self, record: TaskRecord, props: MessageProperties, route: Route) -> Listener:
        topic = props.status_topic
        if topic is None:
            if not props.client_id:
                raise InvalidRequest("streaming needs an a2aStatusTopic user property (or a clientId)")
            topic = get_client_status_topic(self.namespace, props.client_id, record.id)
        return Listener(topic, route.request_id, route.correlation)

    @staticmethod
    def _check_limits(message: Message, limits: Limits) -> None:
        if len(message.parts) > limits.max_parts:
            raise _too_big("params.message.parts", f"{len(message.parts)} parts", limits.max_parts, "max_parts")
        for index, part in enumerate(message.parts):
            if isinstance(part, TextPart):
                size = len(part.text.encode())
                if size > limits.max_text_part_bytes:
                    path = f"params.message.parts.{index}.text"
                    raise _too_big(path, f"{size} bytes", limits.max_text_part_bytes, "max_text_part_bytes")
            elif isinstance(part, DataPart):
                size = len(json.dumps(part.data, separators=(",", ":")))
                if size > limits.max_data_part_bytes:
                    path = f"params.message.parts.{index}.data"
                    raise _too_big(path, f"{size} bytes", limits.max_data_part_bytes, "max_data_part_bytes")

    # ------------------------------------------------------------------ tasks/*

    def _task(self, task_id: str) -> TaskRecord:
        record = self.tasks.get(task_id)
        if record is None:
            raise TaskNotFound(f"agent {self.name!r} has no task {task_id!r}", data={"taskId": task_id})
        return record

    async def _tasks_get(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, TaskQueryParams)
        record = self._task(params.id)
        await self._send_result(route, record.snapshot(params.history_length).to_json_bytes())

    async def _tasks_cancel(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, TaskIdParams)
        record = self._task(params.id)
        if record.is_terminal:
            raise TaskNotCancelable(
                f"task {record.id!r} is already {record.state.value}", data={"taskId": record.id}
            )
        await self.runner.cancel(record)
        await self._send_result(route, record.snapshot().to_json_bytes())

    async def _tasks_resubscribe(self, request: ParsedRequest, props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, TaskIdParams)
        record = self._task(params.id)
        if record.is_terminal:
            raise UnsupportedOperation(
                f"task {record.id!r} is {record.state.value} and has no more events; read it with tasks/get",
                data={"taskId": record.id, "state": record.state.value},
            )
        listener = self._listener(record, props, route)
        # The current Task first, then every later event, in order.
        self.transport.publish_nowait(
            listener.topic,
            success_response_bytes(listener.request_id, record.snapshot().to_json_bytes()),
            properties=_reply_properties(listener.correlation),
        )
        if record.state in INTERRUPTED_STATES:
            await self._send_result(route, record.snapshot().to_json_bytes())
            return
        record.listeners.append(listener)
        await record.settled.wait()
        await self._send_result(route, record.snapshot().to_json_bytes())

    # ------------------------------------------------------------------ push notification config

    def _require_push(self) -> None:
        if not self.settings.push_notifications:
            raise PushNotificationNotSupported(f"agent {self.name!r} does not send push notifications")

    async def _register_push(self, record: TaskRecord, config: Any) -> TaskPushNotificationConfig:
        self._require_push()
        await check_push_url(config.url, allow_private=self.settings.allow_private_push_urls)
        return self.push_configs.set(record.id, config)

    async def _push_set(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, TaskPushNotificationConfig)
        self._require_push()
        record = self._task(params.task_id)
        stored = await self._register_push(record, params.push_notification_config)
        await self._send_result(route, stored.to_json_bytes())

    async def _push_get(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, GetTaskPushNotificationConfigParams)
        self._require_push()
        record = self._task(params.id)
        found = self.push_configs.get(record.id, params.push_notification_config_id)
        await self._send_result(route, found.to_json_bytes())

    async def _push_list(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, ListTaskPushNotificationConfigParams)
        self._require_push()
        record = self._task(params.id)
        listed = b"[" + b",".join(c.to_json_bytes() for c in self.push_configs.list(record.id)) + b"]"
        await self._send_result(route, listed)

    async def _push_delete(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, DeleteTaskPushNotificationConfigParams)
        self._require_push()
        record = self._task(params.id)
        self.push_configs.delete(record.id, params.push_notification_config_id)
        await self._send_result(route, b"null")


def _reply_properties(correlation: bytes | None) -> MessageProperties:
    return MessageProperties(correlation_data=correlation, content_type=JSON_CONTENT_TYPE, payload_format_utf8=True)


def _too_big(path: str, size: str, limit: int, setting: str) -> InvalidParams:
    return InvalidParams(
        f"{path}: {size}; the limit is {limit} (limits.{setting}); send large content as a file by URI",
        data={"errors": [{"path": path, "reason": f"{size} exceeds {limit}", "type": "too_large"}]},
    )

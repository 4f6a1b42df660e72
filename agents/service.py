"""An agent as a broker-connected service: the A2A methods on its request topic.

Requests arrive on ``{ns}/a2a/v1/agent/request/{agent}``. Answers go to the request's
``replyTo`` (else the client response topic of its ``clientId``; else they are logged and
dropped), streaming events to its ``a2aStatusTopic``, each with the request's Correlation Data.
Every accepted request ends in an answer: a final Task, or a JSON-RPC error.

Requests are handled synchronously in the transport's callback, and answers are handed to
the transport in order with ``publish_nowait``: a blocking ``message/send`` registers a
callback that publishes the Task when it settles, rather than a coroutine waiting for it.
Only methods that must wait (cancel, push-URL checks) run as tasks.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agents.agent import Agent
from agents.context import TaskContext
from agents.delegation import Delegator
from agents.push import PushConfigStore, PushNotifier, check_push_url
from agents.runner import TaskRunner
from agents.settings import AgentSettings
from agents.tasks import ContextHistory, Listener, TaskRecord, TaskStore
from mesh.a2a import (
    INTERRUPTED_STATES,
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    InternalFailure,
    InvalidParams,
    InvalidRequest,
    ListTaskPushNotificationConfigParams,
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
    UnsupportedOperation,
    parse_request,
    success_response_bytes,
)
from mesh.broker import BrokerSettings
from mesh.errors import TransportError
from mesh.limits import check_message_limits
from mesh.presence import CardPresence, presence_will
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.registry import DiscoveryRegistry
from mesh.transport import InboundMessage, MqttTransport, Transport
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
        namespace: str,
        broker: BrokerSettings | None = None,
        settings: AgentSettings | None = None,
        client_id: str | None = None,
        transport: Transport | None = None,
    ) -> None:
        """Serve ``agent`` through ``transport``, or through an MQTT connection to ``broker``.

        A given transport must carry this agent's will (an empty retained message on its card
        topic), as the default one does.
        """
        self.agent = agent
        self.name = agent.name
        self.namespace = validate_namespace(namespace)
        self.settings = settings or AgentSettings()
        self.request_topic = get_agent_request_topic(self.namespace, self.name)
        self.card_topic = get_agent_discovery_topic(self.namespace, self.name)
        if transport is None:
            if broker is None:
                raise TypeError("AgentService needs a broker (BrokerSettings) or a transport")
            transport = MqttTransport(
                broker,
                client_id=client_id or f"{self.name}-{uuid.uuid4().hex[:8]}",
                will=presence_will(self.card_topic),
            )
        self.transport: Transport = transport
        self.url = f"{transport.url}/{self.request_topic}"
        self.tasks = TaskStore(
            retention_s=self.settings.task_retention_s, max_finished=self.settings.max_retained_tasks
        )
        self.contexts = ContextHistory(per_context=self.settings.context_history_limit)
        self.push_configs = PushConfigStore()
        self.notifier = PushNotifier(
            allow_private=self.settings.allow_private_push_urls, timeout_s=self.settings.push_timeout_s
        )
        self.runner = TaskRunner(agent, self._on_event, max_concurrent=self.settings.max_concurrent_tasks)
        self.registry = DiscoveryRegistry(self.transport, self.namespace, ttl_s=self.settings.discovery_ttl_s)
        self.delegator = Delegator(self.name, self.namespace, self.transport, self.registry, self.settings.delegation)
        self.presence = CardPresence(
            self.transport,
            self.card_topic,
            self.card_bytes,
            interval_s=self.settings.card_interval_s,
            expiry_intervals=self.settings.card_expiry_intervals,
        )
        self._methods: dict[Method, Callable[[ParsedRequest, MessageProperties, Route], Awaitable[None] | None]] = {
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
        self._answers: set[asyncio.Future[None]] = set()
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    def card_bytes(self) -> bytes:
        return self.agent.card(url=self.url, push_notifications=self.settings.push_notifications).to_json_bytes()

    async def start(self) -> None:
        """Connect, subscribe to the request topic and announce the card."""
        self.agent.leave_mesh = self.stop
        await self.agent.setup()
        await self.transport.connect()
        await self.registry.start()
        await self.delegator.start()
        topic_filter = self.request_topic
        if self.settings.shared_subscription:
            topic_filter = shared_subscription(self.name, self.request_topic)
        self._subscription = await self.transport.subscribe(topic_filter, self._on_request)
        await self.presence.start()
        log.info("agent %s serving %s on %s", self.name, self.request_topic, self.transport.url)

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
        if self._answers:  # the answers to the canceled tasks are on their way: let them land
            await asyncio.wait(list(self._answers), timeout=_STOP_GRACE_S)
        await self.presence.stop()
        await self.registry.stop()
        await self.notifier.aclose()
        await self.transport.close()
        await self.agent.teardown()
        log.info("agent %s stopped (%d task(s) canceled)", self.name, len(active))

    # ------------------------------------------------------------------ requests

    def _on_request(self, message: InboundMessage) -> None:
        props = message.properties
        route = self._route(props)
        limit = self.settings.limits.max_message_bytes
        if len(message.payload) > limit:
            self._send_error(
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
            self._send_error(route, exc)
            return
        route = Route(route.topic, route.correlation, request.id)
        try:
            if self._stopping:
                raise InternalFailure(f"agent {self.name!r} is shutting down; send the request again later")
            pending = self._methods[request.method](request, props, route)
        except RpcError as exc:
            self._send_error(route, exc)
            return
        except Exception as exc:
            log.exception("%s: %s failed", self.name, request.method)
            self._send_error(route, InternalFailure(f"{type(exc).__name__}: {exc}"))
            return
        if pending is not None:
            task = asyncio.get_running_loop().create_task(self._finish(request, route, pending))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)

    async def _finish(self, request: ParsedRequest, route: Route, pending: Awaitable[None]) -> None:
        """The rest of a method that had to wait, with the same error answers."""
        try:
            await pending
        except RpcError as exc:
            self._send_error(route, exc)
        except Exception as exc:
            log.exception("%s: %s failed", self.name, request.method)
            self._send_error(route, InternalFailure(f"{type(exc).__name__}: {exc}"))

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

    def _send(self, route: Route, payload: bytes) -> None:
        if route.topic is None:
            log.warning(
                "%s: request %r had no replyTo and no clientId; its answer is dropped", self.name, route.request_id
            )
            return
        try:
            ack = self.transport.publish_nowait(route.topic, payload, properties=_reply_properties(route.correlation))
        except (TransportError, ValueError) as exc:
            log.warning("%s: could not answer request %r on %r: %s", self.name, route.request_id, route.topic, exc)
            return
        self._answers.add(ack)
        ack.add_done_callback(self._answers.discard)

    def _send_result(self, route: Route, result_json: bytes) -> None:
        self._send(route, success_response_bytes(route.request_id, result_json))

    def _send_task(self, route: Route, record: TaskRecord, history_length: int | None = None) -> None:
        self._send_result(route, record.snapshot(history_length).to_json_bytes())

    def _send_error(self, route: Route, error: RpcError) -> None:
        request_id = error.request_id if error.request_id is not None else route.request_id
        self._send(route, error.to_response(request_id).to_json_bytes())

    # ------------------------------------------------------------------ events

    def _on_event(self, record: TaskRecord, event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> None:
        """Fan an event out to the task's streams (in order) and push subscribers."""
        if record.listeners:
            result_json = event.to_json_bytes()
            for listener in record.listeners:
                if not listener.wants(event):
                    continue
                self.transport.publish_nowait(
                    listener.topic,
                    success_response_bytes(listener.request_id, result_json),
                    properties=_reply_properties(listener.correlation),
                )
        if isinstance(event, TaskStatusUpdateEvent) and event.final:
            record.listeners.clear()
            if event.status.message is not None:  # the agent's answer joins the conversation
                self.contexts.append(record.context_id, event.status.message)
            callbacks, record.on_settle = record.on_settle, []
            for callback in callbacks:
                callback()
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
        check_message_limits(message, self.settings.limits)
        self._check_call_chain(props)
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
            call_chain=list(props.call_chain or ()),
            cancelled=record.cancelled,
            delegator=self.delegator,
        )
        record.add_message(message)
        self.contexts.append(record.context_id, message)
        return record, ctx

    def _check_call_chain(self, props: MessageProperties) -> None:
        """Refuse a delegated request that came too deep or in a cycle (whoever sent it)."""
        delegation = self.settings.delegation
        depth = props.call_depth or 0
        if depth > delegation.max_call_depth:
            raise InvalidRequest(
                f"call depth {depth} exceeds agent {self.name!r}'s maximum of {delegation.max_call_depth} "
                "(delegation.max_call_depth)",
                data={"callDepth": depth, "maxCallDepth": delegation.max_call_depth},
            )
        chain = props.call_chain or []
        if self.name in chain and not delegation.allow_cycles:
            raise InvalidRequest(
                f"the call chain {' -> '.join([*chain, self.name])} is a cycle; agent {self.name!r} "
                "refuses it (delegation.allow_cycles is false)",
                data={"callChain": chain},
            )

    def _new_task_id(self, request_id: str | int | None) -> str:
        # SAM's convention: the request id names the task, so the sender knows it up front.
        if isinstance(request_id, str) and request_id not in self.tasks:
            try:
                return validate_identifier(request_id, "task id")
            except _IDENTIFIER_ERRORS:
                pass
        return uuid.uuid4().hex

    def _message_send(self, request: ParsedRequest, props: MessageProperties, route: Route) -> Awaitable[None] | None:
        params = request.params
        assert isinstance(params, MessageSendParams)
        config = params.configuration
        if config is not None and config.push_notification_config is not None:
            return self._after_push_check(
                config.push_notification_config.url, self._message_send_now, request, props, route
            )
        self._message_send_now(request, props, route)
        return None

    def _message_send_now(self, request: ParsedRequest, props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, MessageSendParams)
        config = params.configuration
        history_length = config.history_length if config is not None else None
        record, ctx = self._accept(request, props)
        if config is not None and config.push_notification_config is not None:
            self.push_configs.set(record.id, config.push_notification_config)
        if props.status_topic is not None:
            # As in SAM, a status topic on message/send gets the events too: a delegating
            # agent resets its idle timeout on them. The Task answer closes it.
            record.listeners.append(self._listener(record, props, route, progress_only=True))
        if config is not None and config.blocking is False:
            self._send_task(route, record, history_length)  # submitted, before the handler runs
        else:
            record.on_settle.append(lambda: self._send_task(route, record, history_length))
        self.runner.launch(record, params.message, ctx)

    def _message_stream(self, request: ParsedRequest, props: MessageProperties, route: Route) -> Awaitable[None] | None:
        if not self.agent.streaming:
            raise UnsupportedOperation(f"agent {self.name!r} does not stream; use message/send")
        params = request.params
        assert isinstance(params, MessageSendParams)
        config = params.configuration
        if config is not None and config.push_notification_config is not None:
            return self._after_push_check(
                config.push_notification_config.url, self._message_stream_now, request, props, route
            )
        self._message_stream_now(request, props, route)
        return None

    def _message_stream_now(self, request: ParsedRequest, props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, MessageSendParams)
        record, ctx = self._accept(request, props)
        config = params.configuration
        if config is not None and config.push_notification_config is not None:
            self.push_configs.set(record.id, config.push_notification_config)
        record.listeners.append(self._listener(record, props, route))
        record.on_settle.append(lambda: self._send_task(route, record))
        self.runner.launch(record, params.message, ctx)

    async def _after_push_check(
        self,
        url: str,
        then: Callable[[ParsedRequest, MessageProperties, Route], None],
        request: ParsedRequest,
        props: MessageProperties,
        route: Route,
    ) -> None:
        """Check a push URL (a DNS lookup, off the loop) before accepting the message."""
        self._require_push()
        await check_push_url(url, allow_private=self.settings.allow_private_push_urls)
        then(request, props, route)

    def _listener(
        self, record: TaskRecord, props: MessageProperties, route: Route, *, progress_only: bool = False
    ) -> Listener:
        topic = props.status_topic
        if topic is None:
            if not props.client_id:
                raise InvalidRequest("streaming needs an a2aStatusTopic user property (or a clientId)")
            topic = get_client_status_topic(self.namespace, props.client_id, record.id)
        return Listener(topic, route.request_id, route.correlation, progress_only)

    # ------------------------------------------------------------------ tasks/*

    def _task(self, task_id: str) -> TaskRecord:
        record = self.tasks.get(task_id)
        if record is None:
            raise TaskNotFound(f"agent {self.name!r} has no task {task_id!r}", data={"taskId": task_id})
        return record

    def _tasks_get(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, TaskQueryParams)
        self._send_task(route, self._task(params.id), params.history_length)

    def _tasks_cancel(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> Awaitable[None]:
        params = request.params
        assert isinstance(params, TaskIdParams)
        record = self._task(params.id)
        if record.is_terminal:
            raise TaskNotCancelable(f"task {record.id!r} is already {record.state.value}", data={"taskId": record.id})
        return self._cancel(record, route)

    async def _cancel(self, record: TaskRecord, route: Route) -> None:
        await self.runner.cancel(record)  # waits for the handler to unwind
        self._send_task(route, record)

    def _tasks_resubscribe(self, request: ParsedRequest, props: MessageProperties, route: Route) -> None:
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
            self._send_task(route, record)
            return
        record.listeners.append(listener)
        record.on_settle.append(lambda: self._send_task(route, record))

    # ------------------------------------------------------------------ push notification config

    def _require_push(self) -> None:
        if not self.settings.push_notifications:
            raise PushNotificationNotSupported(f"agent {self.name!r} does not send push notifications")

    def _push_set(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> Awaitable[None]:
        params = request.params
        assert isinstance(params, TaskPushNotificationConfig)
        self._require_push()
        record = self._task(params.task_id)
        return self._push_set_checked(record, params, route)

    async def _push_set_checked(self, record: TaskRecord, params: TaskPushNotificationConfig, route: Route) -> None:
        config = params.push_notification_config
        await check_push_url(config.url, allow_private=self.settings.allow_private_push_urls)
        self._send_result(route, self.push_configs.set(record.id, config).to_json_bytes())

    def _push_get(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, GetTaskPushNotificationConfigParams)
        self._require_push()
        record = self._task(params.id)
        self._send_result(route, self.push_configs.get(record.id, params.push_notification_config_id).to_json_bytes())

    def _push_list(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, ListTaskPushNotificationConfigParams)
        self._require_push()
        record = self._task(params.id)
        listed = b"[" + b",".join(c.to_json_bytes() for c in self.push_configs.list(record.id)) + b"]"
        self._send_result(route, listed)

    def _push_delete(self, request: ParsedRequest, _props: MessageProperties, route: Route) -> None:
        params = request.params
        assert isinstance(params, DeleteTaskPushNotificationConfigParams)
        self._require_push()
        record = self._task(params.id)
        self.push_configs.delete(record.id, params.push_notification_config_id)
        self._send_result(route, b"null")


def _reply_properties(correlation: bytes | None) -> MessageProperties:
    return MessageProperties(correlation_data=correlation, content_type=JSON_CONTENT_TYPE, payload_format_utf8=True)

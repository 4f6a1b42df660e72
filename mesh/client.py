"""An A2A client over the mesh: send tasks to agents and follow them.

Used by ``mesh send`` / ``mesh task``, by the gateways and by the tests::

    async with MeshClient.connect("mqtt://localhost:1883", "acme") as client:
        task = await client.send("echo", "hello")
        async for event in client.stream("countdown", "5"):
            ...

Requests go to ``{ns}/a2a/v1/agent/request/{agent}`` with Correlation Data = the JSON-RPC id;
answers come back on this client's response topic and stream events on its status topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from mesh.a2a import (
    AgentCard,
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigParams,
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    PushNotificationConfig,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskStatusUpdateEvent,
    TextPart,
    create_user_message,
    new_id,
    parse_result,
    request_bytes,
    result_of,
)
from mesh.a2a.base import A2AModel
from mesh.broker import BrokerSettings
from mesh.errors import RequestTimeoutError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.registry import DiscoveryRegistry
from mesh.transport import InboundMessage, MqttTransport
from topics import (
    get_agent_request_topic,
    get_client_response_topic,
    get_client_status_subscription_topic,
    get_client_status_topic,
    validate_identifier,
    validate_namespace,
)

StreamItem = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


class MeshClient:
    """Calls agents on one namespace through one MQTT connection."""

    def __init__(
        self,
        transport: MqttTransport,
        namespace: str,
        *,
        user_id: str | None = None,
        user_config: dict[str, Any] | None = None,
        auth_token: str | None = None,
    ) -> None:
        self.namespace = validate_namespace(namespace)
        self.client_id = validate_identifier(transport.client_id, "client id")
        self.transport = transport
        expected_reply = get_client_response_topic(self.namespace, self.client_id)
        if transport.reply_topic != expected_reply:
            raise ValueError(f"the transport's reply_topic must be {expected_reply!r}; build it with MeshClient.create")
        self.user_id = user_id
        self.user_config = user_config
        self.auth_token = auth_token
        self._streams: dict[str, asyncio.Queue[tuple[str, Any]]] = {}
        self._status_subscription: asyncio.Task[Any] | None = None

    @classmethod
    def create(
        cls, broker: BrokerSettings | str, namespace: str, *, client_id: str | None = None, **options: Any
    ) -> MeshClient:
        """A client with its own (not yet connected) transport."""
        settings = BrokerSettings.from_url(broker) if isinstance(broker, str) else broker
        client_id = client_id or f"client-{uuid.uuid4().hex[:12]}"
        namespace = validate_namespace(namespace)
        transport = MqttTransport(
            settings, client_id=client_id, reply_topic=get_client_response_topic(namespace, client_id)
        )
        return cls(transport, namespace, **options)

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, broker: BrokerSettings | str, namespace: str, **options: Any) -> AsyncIterator[MeshClient]:
        """``async with MeshClient.connect(url, ns) as client``: connected, closed on exit."""
        client = cls.create(broker, namespace, **options)
        await client.transport.connect()
        try:
            yield client
        finally:
            await client.transport.close()

    # ------------------------------------------------------------------ discovery

    async def wait_for_agent(self, agent: str, timeout: float = 2.0) -> AgentCard:
        """The agent's card once it is on the mesh; :class:`AgentNotFoundError` after ``timeout``."""
        registry = DiscoveryRegistry(self.transport, self.namespace)
        await registry.start()
        try:
            return (await registry.wait_for(agent, timeout)).card
        finally:
            await registry.stop()

    # ------------------------------------------------------------------ message/send and message/stream

    async def send(
        self,
        agent: str,
        message: str | Message,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        blocking: bool = True,
        history_length: int | None = None,
        push_notification: PushNotificationConfig | None = None,
        metadata: dict[str, Any] | None = None,
        timeout: float = 60.0,
    ) -> Task | Message:
        """``message/send``: the Task when it is done (or at once with ``blocking=False``)."""
        params = MessageSendParams(
            message=self._message(message, context_id, task_id),
            configuration=MessageSendConfiguration(
                blocking=blocking, history_length=history_length, push_notification_config=push_notification
            ),
            metadata=metadata,
        )
        result = await self._call(agent, "message/send", params, timeout)
        return parse_result(result)  # type: ignore[return-value]

    async def stream(
        self,
        agent: str,
        message: str | Message,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        idle_timeout: float = 60.0,
    ) -> AsyncIterator[StreamItem]:
        """``message/stream``: status and artifact events in order, then the final Task.

        ``idle_timeout`` bounds the wait for each next event, not the whole task.
        """
        params = MessageSendParams(message=self._message(message, context_id, task_id), metadata=metadata)
        async for item in self._stream_call(agent, "message/stream", params, idle_timeout):
            yield item

    async def resubscribe(self, agent: str, task_id: str, *, idle_timeout: float = 60.0) -> AsyncIterator[StreamItem]:
        """``tasks/resubscribe``: the current Task first, then the remaining events, then the final Task."""
        async for item in self._stream_call(agent, "tasks/resubscribe", TaskIdParams(id=task_id), idle_timeout):
            yield item

    # ------------------------------------------------------------------ tasks/*

    async def get_task(
        self, agent: str, task_id: str, *, history_length: int | None = None, timeout: float = 10.0
    ) -> Task:
        result = await self._call(
            agent, "tasks/get", TaskQueryParams(id=task_id, history_length=history_length), timeout
        )
        return parse_result(result, Task)

    async def cancel_task(self, agent: str, task_id: str, *, timeout: float = 30.0) -> Task:
        result = await self._call(agent, "tasks/cancel", TaskIdParams(id=task_id), timeout)
        return parse_result(result, Task)

    async def set_push_config(
        self, agent: str, task_id: str, config: PushNotificationConfig, *, timeout: float = 10.0
    ) -> TaskPushNotificationConfig:
        params = TaskPushNotificationConfig(task_id=task_id, push_notification_config=config)
        result = await self._call(agent, "tasks/pushNotificationConfig/set", params, timeout)
        return TaskPushNotificationConfig.model_validate(result)

    async def get_push_config(
        self, agent: str, task_id: str, config_id: str | None = None, *, timeout: float = 10.0
    ) -> TaskPushNotificationConfig:
        params = GetTaskPushNotificationConfigParams(id=task_id, push_notification_config_id=config_id)
        result = await self._call(agent, "tasks/pushNotificationConfig/get", params, timeout)
        return TaskPushNotificationConfig.model_validate(result)

    async def list_push_configs(
        self, agent: str, task_id: str, *, timeout: float = 10.0
    ) -> list[TaskPushNotificationConfig]:
        params = ListTaskPushNotificationConfigParams(id=task_id)
        result = await self._call(agent, "tasks/pushNotificationConfig/list", params, timeout)
        return [TaskPushNotificationConfig.model_validate(item) for item in result]

    async def delete_push_config(self, agent: str, task_id: str, config_id: str, *, timeout: float = 10.0) -> None:
        params = DeleteTaskPushNotificationConfigParams(id=task_id, push_notification_config_id=config_id)
        await self._call(agent, "tasks/pushNotificationConfig/delete", params, timeout)

    # ------------------------------------------------------------------ plumbing

    def _message(self, message: str | Message, context_id: str | None, task_id: str | None) -> Message:
        if isinstance(message, str):
            return create_user_message([TextPart(text=message)], context_id=context_id, task_id=task_id)
        updates = {k: v for k, v in (("context_id", context_id), ("task_id", task_id)) if v is not None}
        return message.model_copy(update=updates) if updates else message

    def _properties(self, status_topic: str | None = None) -> MessageProperties:
        return MessageProperties(
            client_id=self.client_id,
            user_id=self.user_id,
            user_config=self.user_config,
            auth_token=self.auth_token,
            status_topic=status_topic,
            timestamp_ms=int(time.time() * 1000),
            content_type=JSON_CONTENT_TYPE,
            payload_format_utf8=True,
        )

    async def _call(self, agent: str, method: str, params: A2AModel, timeout: float) -> Any:
        """One request, one answer: the ``result``, or the error raised as its RpcError."""
        request_id = new_id()
        reply = await self.transport.request(
            get_agent_request_topic(self.namespace, agent),
            request_bytes(method, request_id, params),
            timeout=timeout,
            properties=self._properties(),
            correlation_id=request_id,
        )
        return result_of(reply.payload)

    async def _stream_call(
        self, agent: str, method: str, params: A2AModel, idle_timeout: float
    ) -> AsyncIterator[StreamItem]:
        await self._ensure_status_subscription()
        request_id = new_id()
        correlation = request_id.encode()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._streams[request_id] = queue
        try:
            reply = await self.transport.open_request(
                get_agent_request_topic(self.namespace, agent),
                request_bytes(method, request_id, params),
                correlation=correlation,
                properties=self._properties(get_client_status_topic(self.namespace, self.client_id, request_id)),
                expiry_s=idle_timeout,
            )
            # The reply lands in the same queue as the events, after every event before it.
            reply.add_done_callback(lambda done: queue.put_nowait(("reply", done)))
            while True:
                try:
                    kind, value = await asyncio.wait_for(queue.get(), idle_timeout)
                except TimeoutError:
                    raise RequestTimeoutError(
                        f"{method} to agent {agent!r}: nothing for {idle_timeout:g} s (request {request_id})"
                    ) from None
                if kind == "event":
                    yield parse_result(result_of(value))
                    continue
                yield parse_result(result_of(value.result().payload))
                return
        finally:
            self._streams.pop(request_id, None)
            self.transport.close_request(correlation)

    async def _ensure_status_subscription(self) -> None:
        if self._status_subscription is None:
            topic_filter = get_client_status_subscription_topic(self.namespace, self.client_id)
            self._status_subscription = asyncio.ensure_future(self.transport.subscribe(topic_filter, self._on_status))
        try:
            await asyncio.shield(self._status_subscription)
        except Exception:
            self._status_subscription = None
            raise

    def _on_status(self, message: InboundMessage) -> None:
        queue = self._streams.get(message.topic.rsplit("/", 1)[-1])
        if queue is not None:
            queue.put_nowait(("event", message.payload))

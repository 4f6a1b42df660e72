"""An A2A client over the mesh: send tasks to agents and follow them.

Used by ``mesh send`` / ``mesh task``, by the gateways and by the tests::

    async with MeshClient.connect("mqtt://localhost:1883", "acme") as client:
        task = await client.send("echo", "hello")
        async for event in client.stream("countdown", "5"):
            ...

Requests go to ``{ns}/a2a/v1/agent/request/{agent}`` through a :class:`mesh.calls.CallPath`
(``client.calls``): answers come back on this client's response topic, stream events on its
status topics, both routed by Correlation Data. A timeout of ``send`` bounds the whole call; the
``idle_timeout`` of a stream bounds the wait for each next event. Either running out (or the
caller being cancelled) cancels the agent's task and raises :class:`mesh.errors.CallTimeoutError`.

An agent that is not there fails the call at once with :class:`mesh.errors.AgentUnavailableError`:
a request nobody subscribes to ("no agent is listening on <topic>"), or the agent's card removed
while the call waits ("agent '<name>' went away"). For the latter the client watches the card
topic of each agent it calls (:class:`mesh.calls.CardWatch`; its first call to an agent waits
for that subscription's SUBACK).

Agents of the EMQX "A2A over MQTT" profile are called by their ``org/unit/agent`` name (as
``mesh agents`` lists them): ``send``, ``stream``, ``get_task`` and ``cancel_task`` reach them
through a :class:`mesh.profile.requester.ProfileRequester` on the same connection, which follows the
profile's requester rules (its Task.id, retry profile and error codes).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mesh.a2a import (
    AgentCard,
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    InvalidAgentResponse,
    ListTaskPushNotificationConfigParams,
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    PushNotificationConfig,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskListParams,
    TaskListResult,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
    create_user_message,
)
from mesh.a2a.base import A2AModel
from mesh.a2a.params import DEFAULT_TASK_PAGE_SIZE
from mesh.broker import BrokerSettings
from mesh.calls import Answer, CallOptions, CallPath, CardWatch, parse_model
from mesh.clientids import connection_for
from mesh.discovery.registry import DiscoveryRegistry
from mesh.profile.requester import ProfileRequester, is_profile_agent
from mesh.transport import MqttTransport, Transport
from topics import validate_identifier, validate_namespace

if TYPE_CHECKING:
    from mesh.trust.keys import PrivateKey

__all__ = ["MeshClient", "StreamItem", "own_caller_key"]

StreamItem = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


class MeshClient:
    """Calls agents on one namespace through one connection (a :class:`mesh.calls.CallPath`)."""

    def __init__(
        self,
        transport: Transport,
        namespace: str,
        *,
        name: str | None = None,
        user_id: str | None = None,
        user_config: dict[str, Any] | None = None,
        auth_token: str | None = None,
        caller_key: PrivateKey | None = None,
    ) -> None:
        """``caller_key``: the client's own signing key (kid = its name): its requests carry caller
        tokens (mesh.trust.callers), so agents with trusted keys know the tasks are its own."""
        self.namespace = validate_namespace(namespace)
        #: The broker is known to be a single node (the Mosquitto ``mesh up`` started): a name
        #: missing from the retained cards is unknown, with no roll call to wait for.
        self.one_node_broker = False
        # The name its answer topics carry: its broker username under per-component rules
        # (mesh.brokertools.brokerrules), which several connections of one user share; else its client id.
        self.client_id = validate_identifier(name or transport.client_id, "client id")
        self.transport = transport
        self.user_id = user_id
        self.user_config = user_config
        self.auth_token = auth_token
        signer = None
        if caller_key is not None:
            from mesh.trust.callers import CallerMinter

            signer = CallerMinter(caller_key, kind="client", namespace=self.namespace)
        self.calls = CallPath(transport, self.namespace, self.client_id, role="client", signer=signer)
        self.cards = CardWatch(self.calls)
        #: Calls to EMQX profile agents (``org/unit/agent``), made on first use.
        self.profile = ProfileRequester(transport, self.client_id)

    @classmethod
    def create(
        cls, broker: BrokerSettings | str, namespace: str, *, client_id: str | None = None, **options: Any
    ) -> MeshClient:
        """A client with its own (not yet connected) MQTT transport.

        With a broker username (in the URL, or its per-component user of a ``password_file``) and
        no ``client_id``, it is named after its user: its answers come on
        ``{ns}/a2a/v1/client/response/<user>``, the one client topic per-user broker rules
        (:mod:`mesh.brokertools.brokerrules`) let it read; its connection takes a free slot of its
        user (:mod:`mesh.clientids`; ``<user>-<random>`` where the user has none), so concurrent
        clients of one user do not take over each other. A ``client_id`` names both instead.
        """
        settings = BrokerSettings.from_url(broker) if isinstance(broker, str) else broker
        own_user = settings.username if client_id is None and _is_identifier(settings.username) else None
        name = options.pop("name", None) or own_user
        if "caller_key" not in options and name is not None:
            options["caller_key"] = own_caller_key(settings, name)
        if client_id is not None:
            return cls(MqttTransport(settings, client_id=client_id), namespace, name=name, **options)
        # Under the generated rules a slot of its user (bound client ids, mesh.clientids).
        otherwise = f"{name or 'client'}-{uuid.uuid4().hex[:12]}"
        claimed = connection_for(settings, "client", namespace, settings.username or "", otherwise)
        return cls(claimed.transport(), namespace, name=name, **options)

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, broker: BrokerSettings | str, namespace: str, **options: Any) -> AsyncIterator[MeshClient]:
        """``async with MeshClient.connect(url, ns) as client``: connected, closed on exit."""
        client = cls.create(broker, namespace, **options)
        await client.transport.connect()
        try:
            yield client
        finally:
            await client.calls.flush()
            await client.transport.close()

    # ------------------------------------------------------------------ discovery

    async def wait_for_agent(self, agent: str, timeout: float = 2.0) -> AgentCard:
        """The agent's card once it is on the mesh; :class:`AgentNotFoundError` after ``timeout``."""
        # No roll call unless the name is missing from the retained cards (a cluster's other node),
        # and none on a broker known to be one node.
        registry = DiscoveryRegistry(self.transport, self.namespace, rollcall=False, one_node=self.one_node_broker)
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
        on_sent: Callable[[str | None], None] | None = None,
        on_event: Callable[[StreamItem], None] | None = None,
        user_id: str | None = None,
    ) -> Task | Message:
        """``message/send``: the Task when it is done (or at once with ``blocking=False``).

        ``on_sent`` is called once the request is out, with the id of its task (mesh agents
        name a new task after the request, so it is known before the answer; ``None`` if not).
        With ``on_event`` the request asks for the agent's progress (status updates that carry
        a message) and hands each to it before the answer. ``user_id``: this request's userId
        instead of the client's.
        """
        params = MessageSendParams(
            message=self._message(message, context_id, task_id),
            configuration=MessageSendConfiguration(
                blocking=blocking, history_length=history_length, push_notification_config=push_notification
            ),
            metadata=metadata,
        )
        if is_profile_agent(agent):
            return await self._profile_send(agent, params, timeout, on_sent, on_event)
        options = dataclasses.replace(self._options(timeout, events=False), events=on_event is not None)
        if user_id is not None:
            options = dataclasses.replace(options, user_id=user_id)
        await self.cards.watch(agent)
        async with self.calls.call(agent, "message/send", params, options) as call:
            if on_sent is not None:
                on_sent(call.task_id)
            while not (answer := await call.next()).final:
                if on_event is not None:
                    on_event(answer.value)
        value = answer.value
        if not isinstance(value, Task | Message):
            raise InvalidAgentResponse(f"message/send to {agent!r} answered a {value.kind!r}, not a task or message")
        return value

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
        if is_profile_agent(agent):
            if not params.message.task_id:  # the profile's requester names the task
                params.message.task_id = str(uuid.uuid4())
            async for item in self.profile.items(agent, "message/stream", params, auth_token=self.auth_token):
                yield item
            return
        async for item in self._stream_call(agent, "message/stream", params, idle_timeout):
            yield item

    async def resubscribe(self, agent: str, task_id: str, *, idle_timeout: float = 60.0) -> AsyncIterator[StreamItem]:
        """``tasks/resubscribe``: the current Task first, then the remaining events, then the final Task."""
        if is_profile_agent(agent):  # the profile's SubscribeToTask
            async for item in self.profile.items(
                agent, "tasks/resubscribe", TaskIdParams(id=task_id), auth_token=self.auth_token
            ):
                yield item
            return
        async for item in self._stream_call(agent, "tasks/resubscribe", TaskIdParams(id=task_id), idle_timeout):
            yield item

    # ------------------------------------------------------------------ tasks/*

    async def get_task(
        self, agent: str, task_id: str, *, history_length: int | None = None, timeout: float = 10.0
    ) -> Task:
        params = TaskQueryParams(id=task_id, history_length=history_length)
        if is_profile_agent(agent):
            return await self._profile_call(agent, "tasks/get", params, timeout)
        return (await self._call(agent, "tasks/get", params, timeout)).parse(Task)

    async def cancel_task(self, agent: str, task_id: str, *, timeout: float = 30.0) -> Task:
        if is_profile_agent(agent):
            return await self._profile_call(agent, "tasks/cancel", TaskIdParams(id=task_id), timeout)
        return (await self._call(agent, "tasks/cancel", TaskIdParams(id=task_id), timeout)).parse(Task)

    async def list_tasks(
        self,
        agent: str,
        *,
        status: TaskState | None = None,
        context_id: str | None = None,
        page_size: int = DEFAULT_TASK_PAGE_SIZE,
        page_token: str | None = None,
        history_length: int | None = None,
        timeout: float = 10.0,
    ) -> TaskListResult:
        """``tasks/list`` (the mesh's extension): one page of the agent's tasks, newest first."""
        params = TaskListParams(
            status=status,
            context_id=context_id,
            page_size=page_size,
            page_token=page_token,
            history_length=history_length,
        )
        return (await self._call(agent, "tasks/list", params, timeout)).parse(TaskListResult)

    async def set_push_config(
        self, agent: str, task_id: str, config: PushNotificationConfig, *, timeout: float = 10.0
    ) -> TaskPushNotificationConfig:
        params = TaskPushNotificationConfig(task_id=task_id, push_notification_config=config)
        answer = await self._call(agent, "tasks/pushNotificationConfig/set", params, timeout)
        return answer.parse(TaskPushNotificationConfig)

    async def get_push_config(
        self, agent: str, task_id: str, config_id: str | None = None, *, timeout: float = 10.0
    ) -> TaskPushNotificationConfig:
        params = GetTaskPushNotificationConfigParams(id=task_id, push_notification_config_id=config_id)
        answer = await self._call(agent, "tasks/pushNotificationConfig/get", params, timeout)
        return answer.parse(TaskPushNotificationConfig)

    async def list_push_configs(
        self, agent: str, task_id: str, *, timeout: float = 10.0
    ) -> list[TaskPushNotificationConfig]:
        params = ListTaskPushNotificationConfigParams(id=task_id)
        answer = await self._call(agent, "tasks/pushNotificationConfig/list", params, timeout)
        if not isinstance(answer.json, list):
            raise InvalidAgentResponse(f"tasks/pushNotificationConfig/list answered {type(answer.json).__name__}")
        return [parse_model(TaskPushNotificationConfig, item) for item in answer.json]

    async def delete_push_config(self, agent: str, task_id: str, config_id: str, *, timeout: float = 10.0) -> None:
        params = DeleteTaskPushNotificationConfigParams(id=task_id, push_notification_config_id=config_id)
        await self._call(agent, "tasks/pushNotificationConfig/delete", params, timeout)

    # ------------------------------------------------------------------ plumbing

    def _message(self, message: str | Message, context_id: str | None, task_id: str | None) -> Message:
        if isinstance(message, str):
            return create_user_message([TextPart(text=message)], context_id=context_id, task_id=task_id)
        updates = {k: v for k, v in (("context_id", context_id), ("task_id", task_id)) if v is not None}
        return message.model_copy(update=updates) if updates else message

    def _options(self, timeout: float, *, events: bool) -> CallOptions:
        return CallOptions(
            user_id=self.user_id,
            user_config=self.user_config,
            auth_token=self.auth_token,
            idle_timeout_s=timeout,
            deadline_s=None if events else timeout,
            events=events,
        )

    async def _profile_send(
        self,
        agent: str,
        params: MessageSendParams,
        timeout: float,
        on_sent: Callable[[str | None], None] | None,
        on_event: Callable[[StreamItem], None] | None,
    ) -> Task | Message:
        if not params.message.task_id:  # the profile's requester names the task
            params.message.task_id = str(uuid.uuid4())
        if on_sent is not None:
            on_sent(params.message.task_id)
        async with asyncio.timeout(timeout):
            async for item in self.profile.items(agent, "message/send", params, auth_token=self.auth_token):
                if isinstance(item, Task | Message):
                    return item
                if on_event is not None:
                    on_event(item)
        raise InvalidAgentResponse(f"message/send to {agent!r} ended without a task or message")

    async def _profile_call(self, agent: str, method: str, params: A2AModel, timeout: float) -> Task:
        async with asyncio.timeout(timeout):
            async for item in self.profile.items(agent, method, params, auth_token=self.auth_token):
                if isinstance(item, Task):
                    return item
        raise InvalidAgentResponse(f"{method} to {agent!r} answered no task")

    async def _call(self, agent: str, method: str, params: A2AModel, timeout: float) -> Answer:
        """One request, its final answer; an error answer raises its RpcError."""
        await self.cards.watch(agent)
        return await self.calls.request(agent, method, params, self._options(timeout, events=False))

    async def _stream_call(
        self, agent: str, method: str, params: A2AModel, idle_timeout: float
    ) -> AsyncIterator[StreamItem]:
        await self.cards.watch(agent)
        async with (
            self.calls.call(agent, method, params, self._options(idle_timeout, events=True)) as call,
            contextlib.aclosing(call.events()) as answers,
        ):
            async for answer in answers:
                yield answer.value


def _is_identifier(name: str | None) -> bool:
    """Whether ``name`` can name a topic level (a username such as ``a@b.c`` cannot)."""
    if name is None:
        return False
    try:
        validate_identifier(name, "client id")
    except ValueError:
        return False
    return True


def own_caller_key(settings: BrokerSettings, name: str) -> PrivateKey | None:
    """The signing key of client ``name`` beside its password: ``<name>.jwk`` in the credentials
    directory of ``settings`` (mesh up makes one per component), else None."""
    if settings.password_file is None or not (folder := Path(settings.password_file)).is_dir():
        return None
    from mesh.trust.keys import load_private_key, private_key_path

    path = private_key_path(folder, name)
    return load_private_key(path, kid=name) if path.is_file() else None

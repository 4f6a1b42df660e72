"""The A2A methods an agent serves: one table, from which every other method table derives.

Each :class:`Method` member is declared once with its canonical A2A 0.3 name, the model of
its params, its A2A 1.0 name, whether it answers with a stream, and SAM's names for it::

    Method.message_send.params    # MessageSendParams
    Method.message_send.v1_name   # "SendMessage"
    Method.message_send.aliases   # ("agent/sendMessage",)

:data:`METHOD_PARAMS`, :data:`METHOD_ALIASES`, :func:`mesh.a2a.parse_request`'s dispatch, an
agent's handler table and the HTTP gateway's A2A 1.0 names are all read from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import TypeAlias

from .params import (
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigParams,
    MessageSendParams,
    TaskIdParams,
    TaskListParams,
    TaskQueryParams,
)
from .push import TaskPushNotificationConfig

__all__ = [
    "BY_V1_NAME",
    "METHOD_ALIASES",
    "METHOD_PARAMS",
    "SEND_METHODS",
    "SEND_NAMES",
    "STREAMING_METHODS",
    "TASK_ANSWER_METHODS",
    "Method",
    "RequestParams",
]

#: The params of any method.
RequestParams: TypeAlias = (
    MessageSendParams
    | TaskQueryParams
    | TaskIdParams
    | TaskPushNotificationConfig
    | GetTaskPushNotificationConfigParams
    | ListTaskPushNotificationConfigParams
    | DeleteTaskPushNotificationConfigParams
    | TaskListParams
)


class Method(StrEnum):
    """The methods an agent serves: the value is the canonical (0.3) name on the wire."""

    #: The model ``params`` are validated into.
    params: type[RequestParams]
    #: The A2A 1.0 (PascalCase) name, spoken at the HTTP gateway's edge.
    v1_name: str
    #: Whether the method answers with a stream of events (``a2aStatusTopic`` / SSE).
    streaming: bool
    #: SAM's names for the method, accepted on parse and canonicalised.
    aliases: tuple[str, ...]

    def __new__(
        cls,
        value: str,
        params: type[RequestParams],
        v1_name: str,
        streaming: bool = False,
        aliases: tuple[str, ...] = (),
    ) -> Method:
        member = str.__new__(cls, value)
        member._value_ = value
        member.params, member.v1_name, member.streaming, member.aliases = params, v1_name, streaming, aliases
        return member

    # name on the wire, params model, A2A 1.0 name, streams, SAM aliases
    message_send = "message/send", MessageSendParams, "SendMessage", False, ("agent/sendMessage",)
    message_stream = "message/stream", MessageSendParams, "SendStreamingMessage", True, ("agent/sendStreamingMessage",)
    tasks_get = "tasks/get", TaskQueryParams, "GetTask"
    tasks_cancel = "tasks/cancel", TaskIdParams, "CancelTask", False, ("agent/cancelTask",)
    tasks_resubscribe = "tasks/resubscribe", TaskIdParams, "SubscribeToTask", True
    push_config_set = (
        "tasks/pushNotificationConfig/set",
        TaskPushNotificationConfig,
        "CreateTaskPushNotificationConfig",
    )
    push_config_get = (
        "tasks/pushNotificationConfig/get",
        GetTaskPushNotificationConfigParams,
        "GetTaskPushNotificationConfig",
    )
    push_config_list = (
        "tasks/pushNotificationConfig/list",
        ListTaskPushNotificationConfigParams,
        "ListTaskPushNotificationConfigs",
    )
    push_config_delete = (
        "tasks/pushNotificationConfig/delete",
        DeleteTaskPushNotificationConfigParams,
        "DeleteTaskPushNotificationConfig",
    )
    # The mesh's extension (DESIGN): an agent lists its own tasks. The HTTP gateway answers
    # 1.0 ListTasks from its own records instead (the caller's tasks, across agents).
    tasks_list = "tasks/list", TaskListParams, "ListTasks"


#: The params model of every method.
METHOD_PARAMS: Mapping[Method, type[RequestParams]] = MappingProxyType({m: m.params for m in Method})

#: SAM's method names and the canonical method each stands for.
METHOD_ALIASES: Mapping[str, Method] = MappingProxyType({alias: m for m in Method for alias in m.aliases})

#: The methods that send a message (and so start or continue a task).
SEND_METHODS: frozenset[Method] = frozenset(m for m in Method if m.params is MessageSendParams)

#: The send methods under every name they arrive by (SAM's aliases included).
SEND_NAMES: frozenset[str] = frozenset({*SEND_METHODS, *(alias for m in SEND_METHODS for alias in m.aliases)})

#: The methods answered with a stream of events.
STREAMING_METHODS: frozenset[Method] = frozenset(m for m in Method if m.streaming)

#: The methods on an existing task whose answer is that task, whole.
TASK_ANSWER_METHODS: frozenset[Method] = frozenset({Method.tasks_get, Method.tasks_cancel})

#: Each method by its A2A 1.0 name.
BY_V1_NAME: Mapping[str, Method] = MappingProxyType({m.v1_name: m for m in Method})

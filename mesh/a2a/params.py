"""The ``params`` of the A2A JSON-RPC methods."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import A2AModel
from .messages import Message
from .push import PushNotificationConfig
from .tasks import Task, TaskState

#: ``tasks/list``: tasks per page unless ``pageSize`` says otherwise, and the most a page holds.
DEFAULT_TASK_PAGE_SIZE = 50
MAX_TASK_PAGE_SIZE = 100


class MessageSendConfiguration(A2AModel):
    """How a client wants ``message/send`` / ``message/stream`` handled."""

    accepted_output_modes: list[str] | None = None
    blocking: bool | None = None
    history_length: int | None = Field(default=None, ge=0)
    push_notification_config: PushNotificationConfig | None = None


class MessageSendParams(A2AModel):
    """Params of ``message/send`` and ``message/stream``."""

    message: Message
    configuration: MessageSendConfiguration | None = None
    metadata: dict[str, Any] | None = None


class TaskIdParams(A2AModel):
    """Params naming a task: ``tasks/cancel``, ``tasks/resubscribe``."""

    id: str
    metadata: dict[str, Any] | None = None


class TaskQueryParams(A2AModel):
    """Params of ``tasks/get``; ``history_length`` caps the returned history."""

    id: str
    history_length: int | None = Field(default=None, ge=0)
    metadata: dict[str, Any] | None = None


class GetTaskPushNotificationConfigParams(A2AModel):
    """Params of ``tasks/pushNotificationConfig/get`` (without a config id: the task's only one)."""

    id: str
    push_notification_config_id: str | None = None
    metadata: dict[str, Any] | None = None


class ListTaskPushNotificationConfigParams(A2AModel):
    """Params of ``tasks/pushNotificationConfig/list``."""

    id: str
    metadata: dict[str, Any] | None = None


class DeleteTaskPushNotificationConfigParams(A2AModel):
    """Params of ``tasks/pushNotificationConfig/delete``."""

    id: str
    push_notification_config_id: str
    metadata: dict[str, Any] | None = None


class TaskListParams(A2AModel):
    """Params of ``tasks/list``, the mesh's extension (A2A 1.0 ``ListTasks`` in 0.3 shapes).

    The agent's tasks, newest status first; ``status`` and ``context_id`` filter them,
    ``page_token`` continues after the previous page's ``nextPageToken``.
    """

    context_id: str | None = None
    status: TaskState | None = None
    page_size: int = Field(default=DEFAULT_TASK_PAGE_SIZE, ge=1, le=MAX_TASK_PAGE_SIZE)
    page_token: str | None = None
    #: Keep the last N history messages of each task (0: none; ``None``: all).
    history_length: int | None = Field(default=None, ge=0)
    include_artifacts: bool = False
    metadata: dict[str, Any] | None = None


class TaskListResult(A2AModel):
    """The answer to ``tasks/list``: one page; ``next_page_token`` is ``""`` on the last one."""

    tasks: list[Task]
    next_page_token: str = ""
    page_size: int
    total_size: int

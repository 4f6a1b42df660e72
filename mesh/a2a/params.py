"""The ``params`` of the A2A JSON-RPC methods."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import A2AModel
from .messages import Message
from .push import PushNotificationConfig


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

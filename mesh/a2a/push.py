"""Push notification configuration (webhooks a client registers for task updates)."""

from __future__ import annotations

from pydantic import Field

from .base import A2AModel


class PushNotificationAuthenticationInfo(A2AModel):
    """How the agent authenticates to the webhook: scheme names and optional credentials."""

    schemes: list[str]
    credentials: str | None = None


class PushNotificationConfig(A2AModel):
    """A webhook URL to send task updates to; ``token`` lets the receiver check the sender."""

    url: str
    id: str | None = None
    token: str | None = None
    authentication: PushNotificationAuthenticationInfo | None = None
    #: Mesh extension: the A2A version of the notifications' body ("1.0": a StreamResponse;
    #: else the 0.3 Task). The HTTP gateway sets it for the configs its 1.0 clients create.
    a2a_version: str | None = Field(None, alias="a2aVersion")


class TaskPushNotificationConfig(A2AModel):
    """A push configuration bound to a task; the params of ``tasks/pushNotificationConfig/set``."""

    task_id: str
    push_notification_config: PushNotificationConfig

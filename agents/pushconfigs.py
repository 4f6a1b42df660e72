"""The push notification configs of each task (``tasks/pushNotificationConfig/*``), checked
for form and written through to the task journal; delivery is :mod:`agents.push`.
"""

from __future__ import annotations

import builtins
import logging
import uuid

from agents.journal import NullJournal, TaskJournal
from agents.pushurls import parse_push_url
from mesh.a2a import InvalidParams, PushNotificationConfig, TaskPushNotificationConfig

__all__ = ["MAX_CONFIGS_PER_TASK", "PushConfigStore", "check_header_values"]

log = logging.getLogger("agents.push")  # one logger for push notifications, as before the split

MAX_CONFIGS_PER_TASK = 10


class PushConfigStore:
    """The push configs of each task, written through to the task journal.

    Task existence is the runtime's business (a forgotten task's configs leave the journal
    with it).
    """

    def __init__(self, *, max_per_task: int = MAX_CONFIGS_PER_TASK, journal: TaskJournal | None = None) -> None:
        self._max = max_per_task
        self._tasks: dict[str, dict[str, PushNotificationConfig]] = {}
        self._journal: TaskJournal = journal if journal is not None else NullJournal()

    def restore(self, stored: dict[str, builtins.list[bytes]]) -> None:
        """Take back the configs the journal held (task id -> JSON objects)."""
        for task_id, configs in stored.items():
            parsed = {}
            for raw in configs:
                try:
                    config = PushNotificationConfig.model_validate_json(raw)
                except ValueError:
                    log.warning("dropped a stored push config of task %s that no longer parses", task_id)
                    continue
                parsed[config.id or uuid.uuid4().hex] = config
            if parsed:
                self._tasks[task_id] = parsed

    def _write_through(self, task_id: str) -> None:
        configs = self._tasks.get(task_id, {})
        self._journal.push_configs(task_id, [c.to_json_bytes() for c in configs.values()])

    def set(self, task_id: str, config: PushNotificationConfig) -> TaskPushNotificationConfig:
        """Store a copy of ``config`` (``id`` assigned when missing); the same id replaces.

        Checks the URL's form and the header values, not where the host resolves: await
        :func:`check_push_url` (or :meth:`PushNotifier.check_url`) first.
        """
        parse_push_url(config.url)
        check_header_values(config)
        config_id = config.id or uuid.uuid4().hex
        configs = self._tasks.setdefault(task_id, {})
        if config_id not in configs and len(configs) >= self._max:
            raise InvalidParams(
                f"task {task_id!r} already has {self._max} push notification configs (the limit);"
                " delete one, or set an existing id to replace it",
                data={"taskId": task_id, "limit": self._max},
            )
        configs[config_id] = config.model_copy(deep=True, update={"id": config_id})
        self._write_through(task_id)
        return _bound(task_id, configs[config_id])

    def get(self, task_id: str, config_id: str | None = None) -> TaskPushNotificationConfig:
        """The config ``config_id`` of the task; ``None``: its first one. Unknown: InvalidParams."""
        configs = self._tasks.get(task_id, {})
        if config_id is None and configs:
            return _bound(task_id, next(iter(configs.values())))
        if config_id is not None and config_id in configs:
            return _bound(task_id, configs[config_id])
        known = list(configs)
        wanted = "" if config_id is None else f" with id {config_id!r}"
        hint = f"its config ids are {known}" if known else "set one with tasks/pushNotificationConfig/set"
        raise InvalidParams(
            f"task {task_id!r} has no push notification config{wanted}; {hint}",
            data={"taskId": task_id, "pushNotificationConfigId": config_id, "knownIds": known},
        )

    def list(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """The task's configs in the order they were first set (empty when none)."""
        return [_bound(task_id, c) for c in self._tasks.get(task_id, {}).values()]

    def delete(self, task_id: str, config_id: str) -> None:
        """Remove a config; idempotent (a redelivered MQTT request must not fail)."""
        configs = self._tasks.get(task_id)
        if configs is not None:
            configs.pop(config_id, None)
            if not configs:
                del self._tasks[task_id]
            self._write_through(task_id)

    def drop_task(self, task_id: str) -> None:
        """Forget every config of the task."""
        self._tasks.pop(task_id, None)

    def configs_for(self, task_id: str) -> builtins.list[PushNotificationConfig]:  # list: the method above
        """Copies of the task's configs, for :meth:`PushNotifier.notify`."""
        return [c.model_copy(deep=True) for c in self._tasks.get(task_id, {}).values()]


def _bound(task_id: str, config: PushNotificationConfig) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(task_id=task_id, push_notification_config=config.model_copy(deep=True))


def check_header_values(config: PushNotificationConfig) -> None:
    auth = config.authentication
    if auth is not None and auth.credentials and not auth.schemes:
        raise InvalidParams(
            "push notification authentication has credentials but no scheme; name it in"
            " authentication.schemes, e.g. ['Bearer']",
            data={"field": "authentication.schemes"},
        )
    values = {"token": config.token}
    if auth is not None:
        values["authentication.schemes[0]"] = auth.schemes[0] if auth.schemes else None
        values["authentication.credentials"] = auth.credentials
    for field, value in values.items():
        # They become HTTP header values: CR/LF would inject headers, non-ASCII does not encode.
        if value is not None and not (value.isascii() and value.isprintable()):
            raise InvalidParams(
                f"push notification {field} must be printable ASCII (it is sent in an HTTP header)",
                data={"field": field},
            )

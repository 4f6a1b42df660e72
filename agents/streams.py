"""The event fan-out of an agent's tasks: streams, settle callbacks, push, retention.

Every status or artifact event a :class:`~agents.runner.TaskRunner` emits passes through
:meth:`TaskStreams.on_event`, which sends it to each stream listening to the task (in order,
serialized once), and when the task settles runs the callbacks that answer the requests
waiting for it, adds the agent's reply to the conversation, notifies push subscribers and lets
the task store forget tasks past retention (with their push configs, and their conversation
once no kept task belongs to it).
"""

from __future__ import annotations

import logging

from agents.answers import Answers, Route
from agents.push import PushConfigStore, PushNotifier
from agents.tasks import ContextHistory, Listener, TaskRecord, TaskStore
from mesh.a2a import InvalidRequest, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from mesh.properties import MessageProperties
from topics import get_client_status_topic

__all__ = ["TaskStreams"]

log = logging.getLogger(__name__)


class TaskStreams:
    """Who listens to which task, and what each event of a task sets off."""

    def __init__(
        self,
        answers: Answers,
        *,
        tasks: TaskStore,
        contexts: ContextHistory,
        push_configs: PushConfigStore,
        notifier: PushNotifier,
    ) -> None:
        self.answers = answers
        self.tasks = tasks
        self.contexts = contexts
        self.push_configs = push_configs
        self.notifier = notifier

    def listener(
        self,
        record: TaskRecord,
        props: MessageProperties,
        route: Route,
        *,
        progress_only: bool = False,
        until_terminal: bool = False,
    ) -> Listener:
        """A stream for a request: its ``a2aStatusTopic``, else its client's status topic."""
        topic = props.status_topic
        if topic is None:
            if not props.client_id:
                raise InvalidRequest("streaming needs an a2aStatusTopic user property (or a clientId)")
            topic = get_client_status_topic(self.answers.namespace, props.client_id, record.id)
        return Listener(topic, route.request_id, route.correlation, progress_only, until_terminal, route.dialect)

    def answer_when_settled(self, record: TaskRecord, route: Route, history_length: int | None = None) -> None:
        """Answer the request with the Task the next time it settles (terminal or interrupted)."""
        record.on_settle.append(lambda: self.answers.outcome(route, record, history_length))

    def answer_when_terminal(self, record: TaskRecord, route: Route) -> None:
        """Answer the request with the Task once it is terminal (interrupted states pass by)."""

        def settled() -> None:
            if record.is_terminal:
                self.answers.outcome(route, record)
            else:
                record.on_settle.append(settled)  # input-required or auth-required: wait on

        record.on_settle.append(settled)

    def on_event(self, record: TaskRecord, event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> None:
        """Fan an event out to the task's streams (in order) and push subscribers."""
        self.tasks.changed(record)
        interrupted = isinstance(event, TaskStatusUpdateEvent) and event.final and not record.is_terminal
        # A bare Message answer ends no stream with a status: the Message is their final answer.
        # Serialized only if some listener wants it: a message/send's progress-only listener
        # wants neither the bare state changes nor the closing event, i.e. most events.
        if (
            record.listeners
            and not (record.message_answer is not None and record.is_terminal)
            and (wanting := [listener for listener in record.listeners if listener.wants(event)])
        ):
            try:
                result_json = event.to_json_bytes()
                # For streams that outlive the interruption, the event does not end the stream.
                going_on = event.model_copy(update={"final": False}).to_json_bytes() if interrupted else result_json
            except ValueError as exc:  # a handler's text no JSON can carry (a lone surrogate)
                log.warning("%s: task %s: an event could not be sent: %s", self.answers.agent_name, record.id, exc)
            else:
                for listener in wanting:
                    self.answers.stream(listener, going_on if listener.until_terminal else result_json)
        if isinstance(event, TaskStatusUpdateEvent) and event.final:
            record.listeners[:] = [listener for listener in record.listeners if interrupted and listener.until_terminal]
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
                self.push_configs.drop_task(dropped.id)
                if not self.tasks.has_context(dropped.context_id):
                    self.contexts.drop(dropped.context_id)

"""The A2A methods of an agent, one handler each, typed against the method's params model.

``message/send`` and ``message/stream`` create a task (or resume an interrupted one) and
launch the handler; a blocking send is answered by a callback run when the task settles,
rather than a coroutine waiting for it. ``tasks/*`` read, cancel or follow a task;
``tasks/pushNotificationConfig/*`` keep the task's webhooks. Only cancel and the push URL
checks (a DNS lookup) return an awaitable; the rest answer at once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from agents.admission import AtCapacity
from agents.agent import Agent
from agents.answers import Answers, Route
from agents.context import TaskContext
from agents.delegation import Delegator
from agents.dispatch import serves
from agents.guard import CallGuard
from agents.listing import list_tasks
from agents.owners import TaskOwners, owner_of
from agents.push import PushConfigStore, check_push_url
from agents.runner import TaskRunner
from agents.settings import AgentSettings
from agents.streams import TaskStreams
from agents.tasks import ContextHistory, TaskRecord, TaskStore
from mesh.a2a import (
    INTERRUPTED_STATES,
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    InvalidParams,
    InvalidRequest,
    ListTaskPushNotificationConfigParams,
    MessageSendParams,
    Method,
    PushNotificationNotSupported,
    Role,
    TaskIdParams,
    TaskListParams,
    TaskNotCancelable,
    TaskNotFound,
    TaskPushNotificationConfig,
    TaskQueryParams,
    UnsupportedOperation,
)
from mesh.artifacts import ArtifactStore
from mesh.limits import check_message_limits, check_user_config
from mesh.properties import MessageProperties
from topics import validate_identifier

if TYPE_CHECKING:
    from agents.sharedmethods import SharedMethods

__all__ = ["AgentMethods"]

log = logging.getLogger(__name__)
# A replica without a shared store never sees its siblings' tasks (a dead one's are lost).
_UNSHARED = " on this replica (replicas share tasks only on a shared store: store: postgresql://...)"


class AgentMethods:
    """The handlers of the A2A methods and tasks/list for one agent (see :func:`agents.dispatch.handler_table`)."""

    def __init__(
        self,
        agent: Agent,
        settings: AgentSettings,
        *,
        tasks: TaskStore,
        contexts: ContextHistory,
        push_configs: PushConfigStore,
        runner: TaskRunner,
        streams: TaskStreams,
        answers: Answers,
        delegator: Delegator,
        guard: CallGuard | None = None,
        artifacts: ArtifactStore | None = None,
    ) -> None:
        self.agent = agent
        self.name = agent.name
        self.settings = settings
        self.tasks = tasks
        self.contexts = contexts
        self.push_configs = push_configs
        self.runner = runner
        self.streams = streams
        self.answers = answers
        self.delegator = delegator
        self.guard = guard or CallGuard(agent.name, settings)
        checks = settings.task_owner_checks
        self.owners = TaskOwners(self.guard.tokens is not None if checks is None else checks, settings.operators)
        self.artifacts = artifacts
        #: With a shared store: the tasks this replica does not hold (agents.sharedmethods).
        self.shared: SharedMethods | None = None

    # ------------------------------------------------------------------ message/send, message/stream

    @serves(Method.message_send)
    def message_send(self, params: MessageSendParams, props: MessageProperties, route: Route) -> Awaitable[None] | None:
        if self._elsewhere(params, route):  # a follow-up of a task another replica had
            return self.shared.follow_up(Method.message_send, params, props, route, self._send_now)  # type: ignore[union-attr]
        return self.after_push_check(params, props, route, self._send_now)

    @serves(Method.message_stream)
    def message_stream(
        self, params: MessageSendParams, props: MessageProperties, route: Route
    ) -> Awaitable[None] | None:
        if not self.agent.streaming:
            raise UnsupportedOperation(f"agent {self.name!r} does not stream; use message/send")
        if props.status_topic is None and not props.client_id:  # refused before a task exists
            raise InvalidRequest("streaming needs an a2aStatusTopic user property (or a clientId)")
        if self._elsewhere(params, route):
            return self.shared.follow_up(Method.message_stream, params, props, route, self._stream_now)  # type: ignore[union-attr]
        return self.after_push_check(params, props, route, self._stream_now)

    def _elsewhere(self, params: MessageSendParams, route: Route) -> bool:
        """Whether a message continues a task this replica does not hold, on a shared store."""
        task_id = params.message.task_id
        return self.shared is not None and route.dialect is None and task_id is not None and task_id not in self.tasks

    def after_push_check(
        self,
        params: MessageSendParams,
        props: MessageProperties,
        route: Route,
        then: Callable[[MessageSendParams, MessageProperties, Route], None],
    ) -> Awaitable[None] | None:
        """``then`` at once, or once the push URL the message carries has been checked."""
        config = params.configuration
        if config is None or config.push_notification_config is None:
            then(params, props, route)
            return None
        self._require_push()
        return self._checked_then(config.push_notification_config.url, params, props, route, then)

    async def _checked_then(
        self,
        url: str,
        params: MessageSendParams,
        props: MessageProperties,
        route: Route,
        then: Callable[[MessageSendParams, MessageProperties, Route], None],
    ) -> None:
        await check_push_url(url, allow_private=self.settings.allow_private_push_urls)  # a DNS lookup, off the loop
        then(params, props, route)

    def _send_now(self, params: MessageSendParams, props: MessageProperties, route: Route) -> None:
        config = params.configuration
        history_length = config.history_length if config is not None else None
        if (known := self._repeated(route) or self._duplicate(params, route)) is not None:
            if (
                known.is_terminal
                or known.state in INTERRUPTED_STATES
                or (config is not None and config.blocking is False)
            ):
                self.answers.outcome(route, known, history_length)
            else:
                self.streams.answer_when_settled(known, route, history_length)
            return
        record, ctx = self._accept(params, props, route)
        if props.status_topic is not None:
            # As in SAM, a status topic on message/send gets the events too: a delegating
            # agent resets its idle timeout on them. The Task answer closes it.
            record.listeners.append(self.streams.listener(record, props, route, progress_only=True))
        if config is not None and config.blocking is False:
            self.answers.task(route, record, history_length)  # submitted, before the handler runs
        else:
            self.streams.answer_when_settled(record, route, history_length)
        self.runner.launch(record, params.message, ctx)

    def _stream_now(self, params: MessageSendParams, props: MessageProperties, route: Route) -> None:
        if (known := self._repeated(route) or self._duplicate(params, route)) is not None:
            self._follow(known, props, route)
            return
        record, ctx = self._accept(params, props, route)
        record.listeners.append(self.streams.listener(record, props, route))
        self.streams.answer_when_settled(record, route)
        self.runner.launch(record, params.message, ctx)

    def _repeated(self, route: Route) -> TaskRecord | None:
        """The task this very request created before (a redelivery), or None to run it.

        An orphan (left unfinished by the previous process) is forgotten instead: its
        request came back, so it runs again, under the same task id.
        """
        if route.request_key is None or (known := self.tasks.by_request(route.request_key)) is None:
            return None
        if known.orphaned and not known.is_terminal:
            log.info(
                "%s: request %r came back after a restart; task %s runs again", self.name, route.request_id, known.id
            )
            self.tasks.discard(known)
            return None
        log.info("%s: request %r is a repeat; answering with task %s", self.name, route.request_id, known.id)
        return known

    def _duplicate(self, params: MessageSendParams, route: Route) -> TaskRecord | None:
        """The EMQX profile's de-duplication on Task.id: a message already in the task it names
        (a requester's retry under new Correlation Data) is answered with the task, not run again.

        A new message to an input-required task (another messageId) is the next turn instead.
        """
        message = params.message
        if route.dialect is None or not message.task_id or (known := self.tasks.get(message.task_id)) is None:
            return None
        if not any(m.message_id == message.message_id for m in known.task.history or ()):
            return None
        log.info(
            "%s: message %r of task %s is a repeat; answering with the task", self.name, message.message_id, known.id
        )
        return known

    def _accept(
        self, params: MessageSendParams, props: MessageProperties, route: Route
    ) -> tuple[TaskRecord, TaskContext]:
        """Create the task of a new message, or pick up the interrupted task it answers."""
        message = params.message
        check_message_limits(message, self.settings.limits)
        check_user_config(props, self.settings.limits)
        identity = self.guard(props)  # verified tokens are cached: a dict lookup after the dispatcher's check
        if self.runner.at_capacity:
            raise AtCapacity  # the request waits, unacknowledged, for a place (agents.admission)
        caller = self.guard.caller(props, route.topic, self.answers.namespace)
        owner = owner_of(identity, caller)
        if message.task_id and route.dialect is not None and message.task_id not in self.tasks:
            # The EMQX profile: the requester generates the Task.id of a new task.
            record = TaskRecord.new(message.task_id, message.context_id or uuid.uuid4().hex)
            record.request_key = route.request_key
            record.owner = owner
            self.tasks.add(record)
        elif message.task_id:
            record = self._task(message.task_id, props, route, caller=owner)
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
            record = TaskRecord.new(self._new_task_id(route.request_id), message.context_id or uuid.uuid4().hex)
            record.request_key = route.request_key
            record.owner = owner
            self.tasks.add(record)
        message.task_id, message.context_id = record.id, record.context_id
        ctx = TaskContext(
            task_id=record.id,
            context_id=record.context_id,
            agent_name=self.name,
            history=self.contexts.messages(record.context_id),
            user_id=identity.user_id,
            identity=identity,
            caller=caller,
            user_config=props.user_config or {},
            auth_token=props.auth_token,
            metadata=params.metadata or {},
            call_depth=props.call_depth or 0,
            call_chain=list(props.call_chain or ()),
            traceparent=props.traceparent,
            cancelled=record.cancelled,
            delegator=self.delegator,
            artifacts=self.artifacts,
        )
        ctx.watched = self._watching(record)
        record.add_message(message)
        self.contexts.append(record.context_id, message)
        config = params.configuration
        if config is not None and config.push_notification_config is not None:
            self.push_configs.set(record.id, config.push_notification_config)
        return record, ctx

    def _watching(self, record: TaskRecord) -> Callable[[], bool]:
        """Whether anyone follows ``record`` live: a listener (stream, status topic) or a push subscriber."""
        return lambda: bool(record.listeners) or bool(self.push_configs.configs_for(record.id))

    def resume(self, record: TaskRecord) -> bool:
        """Run an unfinished task of the previous process again, from its first message
        (agents with ``resumes_tasks``); whether it could."""
        first = next((m for m in record.task.history or () if m.role is Role.user), None)
        if first is None or record.is_terminal:
            return False
        record.orphaned = False  # a redelivery of its request now finds it running
        ctx = TaskContext(
            task_id=record.id,
            context_id=record.context_id,
            agent_name=self.name,
            history=self.contexts.messages(record.context_id),
            cancelled=record.cancelled,
            delegator=self.delegator,
        )
        ctx.watched = self._watching(record)
        log.info("%s: task %s left %s by the previous process resumes", self.name, record.id, record.state.value)
        self.runner.launch(record, first, ctx)
        return True

    def _new_task_id(self, request_id: str | int | None) -> str:
        # SAM's convention: the request id names the task, so the sender knows it up front.
        if isinstance(request_id, str) and request_id not in self.tasks:
            try:
                return validate_identifier(request_id, "task id")
            except ValueError:
                pass
        return uuid.uuid4().hex

    # ------------------------------------------------------------------ tasks/*

    def _task(self, task_id: str, props: MessageProperties, route: Route, *, caller: str | None = None) -> TaskRecord:
        """The task, if it exists and the caller owns it (or operates the agent); else TaskNotFound,
        the same answer whether it does not exist or is another's (agents.owners)."""
        record = self.tasks.get(task_id)
        if record is not None and self.owners.enabled:
            if caller is None:
                caller = self.caller_of(props, route)
            if not self.owners.allows(record.owner, caller):
                record = None
        if record is None:
            alone = _UNSHARED * bool(self.settings.shared_subscription)
            raise TaskNotFound(f"agent {self.name!r} has no task {task_id!r}{alone}", data={"taskId": task_id})
        return record

    def caller_of(self, props: MessageProperties, route: Route) -> str | None:
        """Who asks: the verified user of the request's token, else the component its caller token proves."""
        return owner_of(self.guard.identify(props), self.guard.caller(props, route.topic, self.answers.namespace))

    @serves(Method.tasks_get)
    def tasks_get(self, params: TaskQueryParams, props: MessageProperties, route: Route) -> Awaitable[None] | None:
        if self.shared is not None and not self.shared.holds(params.id):
            return self.shared.get(params, props, route)
        self.answers.task(route, self._task(params.id, props, route), params.history_length)
        return None

    @serves(Method.tasks_cancel)
    def tasks_cancel(self, params: TaskIdParams, props: MessageProperties, route: Route) -> Awaitable[None]:
        if self.shared is not None and not self.shared.holds(params.id):
            return self.shared.cancel(params, props, route)
        record = self._task(params.id, props, route)
        if record.is_terminal:
            raise TaskNotCancelable(f"task {record.id!r} is already {record.state.value}", data={"taskId": record.id})
        return self._cancel(record, route)

    async def _cancel(self, record: TaskRecord, route: Route) -> None:
        await self.runner.cancel(record)  # waits for the handler to unwind
        self.answers.task(route, record)

    @serves(Method.tasks_resubscribe)
    def tasks_resubscribe(self, params: TaskIdParams, props: MessageProperties, route: Route) -> Awaitable[None] | None:
        if self.shared is not None and not self.shared.holds(params.id):
            return self.shared.resubscribe(params, props, route)
        record = self._task(params.id, props, route)
        if record.is_terminal:
            raise UnsupportedOperation(
                f"task {record.id!r} is {record.state.value} and has no more events; read it with tasks/get",
                data={"taskId": record.id, "state": record.state.value},
            )
        # One snapshot, then every event until the task ends, interruptions included (A2A 1.0
        # SubscribeToTask; 0.3 clients get the same, the interruption with final: false).
        listener = self.streams.listener(record, props, route, until_terminal=True)
        self.answers.stream(listener, record.snapshot().to_json_bytes())
        record.listeners.append(listener)
        self.streams.answer_when_terminal(record, route)
        return None

    @serves(Method.tasks_list)
    def tasks_list(self, params: TaskListParams, props: MessageProperties, route: Route) -> Awaitable[None] | None:
        if self.shared is not None:
            return self.shared.listing(params, props, route)
        self.answer_list(self.tasks.records(), params, props, route)
        return None

    def answer_list(
        self, records: Iterable[TaskRecord], params: TaskListParams, props: MessageProperties, route: Route
    ) -> None:
        """Answer with the page of ``records`` the caller may see."""
        if self.owners.enabled:
            caller = self.caller_of(props, route)
            if not self.owners.is_operator(caller):
                records = [record for record in records if record.owner is not None and record.owner == caller]
        self.answers.result(route, list_tasks(records, params).to_json_bytes())

    def _follow(self, record: TaskRecord, props: MessageProperties, route: Route) -> None:
        """Stream the task to the request: the current Task first, then every later event, in order."""
        listener = self.streams.listener(record, props, route)
        self.answers.stream(listener, record.snapshot().to_json_bytes())
        if record.is_terminal or record.state in INTERRUPTED_STATES:
            self.answers.outcome(route, record)
            return
        record.listeners.append(listener)
        self.streams.answer_when_settled(record, route)

    # ------------------------------------------------------------------ push notification config

    def _require_push(self) -> None:
        if not self.settings.push_notifications:
            raise PushNotificationNotSupported(f"agent {self.name!r} does not send push notifications")

    @serves(Method.push_config_set)
    def push_config_set(
        self, params: TaskPushNotificationConfig, props: MessageProperties, route: Route
    ) -> Awaitable[None]:
        self._require_push()
        return self._push_set_checked(self._task(params.task_id, props, route), params, route)

    async def _push_set_checked(self, record: TaskRecord, params: TaskPushNotificationConfig, route: Route) -> None:
        config = params.push_notification_config
        await check_push_url(config.url, allow_private=self.settings.allow_private_push_urls)
        self.answers.result(route, self.push_configs.set(record.id, config).to_json_bytes())

    @serves(Method.push_config_get)
    def push_config_get(
        self, params: GetTaskPushNotificationConfigParams, props: MessageProperties, route: Route
    ) -> None:
        self._require_push()
        record = self._task(params.id, props, route)
        self.answers.result(route, self.push_configs.get(record.id, params.push_notification_config_id).to_json_bytes())

    @serves(Method.push_config_list)
    def push_config_list(
        self, params: ListTaskPushNotificationConfigParams, props: MessageProperties, route: Route
    ) -> None:
        self._require_push()
        record = self._task(params.id, props, route)
        listed = b"[" + b",".join(c.to_json_bytes() for c in self.push_configs.list(record.id)) + b"]"
        self.answers.result(route, listed)

    @serves(Method.push_config_delete)
    def push_config_delete(
        self, params: DeleteTaskPushNotificationConfigParams, props: MessageProperties, route: Route
    ) -> None:
        self._require_push()
        record = self._task(params.id, props, route)
        self.push_configs.delete(record.id, params.push_notification_config_id)
        self.answers.result(route, b"null")

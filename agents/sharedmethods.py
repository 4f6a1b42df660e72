"""``tasks/*`` and follow-up messages for a task this replica does not hold, from the shared store.

With a shared store (:mod:`agents.sharedtasks`) any replica answers for any task of its agent:
``tasks/get`` and ``tasks/list`` from the store; ``tasks/cancel`` and ``tasks/resubscribe`` of a
task running on another live replica are forwarded to that replica's instance topic with the
caller's own properties (its answer goes straight to the caller, and it checks the caller as
for any request), as is a ``message/send`` or ``message/stream`` continuing such a task (its
caller remembered a dead owner, or reached the shared topic); those of a task whose replica is
gone take the task over first (:class:`~agents.takeover.Takeover`; an input-required task stays
so) and then answer as for a task of this replica. A forwarded request is marked
(``a2aForwarded``) and never forwarded again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from agents.answers import Route
from agents.sharedtasks import SharedTask, SharedTasks
from agents.takeover import Takeover
from mesh.a2a import (
    InvalidParams,
    MessageSendParams,
    Method,
    TaskIdParams,
    TaskListParams,
    TaskNotCancelable,
    TaskNotFound,
    TaskQueryParams,
    UnsupportedOperation,
)
from mesh.errors import PublishError
from mesh.properties import MessageProperties
from topics import get_agent_instance_request_topic

if TYPE_CHECKING:
    from agents.methods import AgentMethods
    from agents.replicas import Siblings

__all__ = ["FORWARDED", "SharedMethods"]

#: The user property of a request one replica forwarded to another (its value: the forwarder).
FORWARDED = "a2aForwarded"


class SharedMethods:
    """The shared-store side of one replica's ``tasks/*`` methods."""

    def __init__(self, methods: AgentMethods, shared: SharedTasks, takeover: Takeover, siblings: Siblings) -> None:
        self.methods = methods
        self.shared = shared
        self.takeover = takeover
        self.siblings = siblings

    def holds(self, task_id: str) -> bool:
        """Whether this replica answers for ``task_id`` from its memory."""
        return task_id in self.methods.tasks

    async def _found(self, task_id: str, props: MessageProperties, route: Route) -> SharedTask:
        found = await self.shared.get(task_id)
        methods = self.methods
        if (
            found is not None
            and methods.owners.enabled
            and not methods.owners.allows(found.owner, methods.caller_of(props, route))
        ):
            found = None
        if found is None:
            raise TaskNotFound(f"agent {methods.name!r} has no task {task_id!r}", data={"taskId": task_id})
        return found

    async def get(self, params: TaskQueryParams, props: MessageProperties, route: Route) -> None:
        found = await self._found(params.id, props, route)
        if self.holds(params.id):  # taken over meanwhile
            self.methods.tasks_get(params, props, route)
            return
        self.methods.answers.task(route, found.record(), params.history_length)

    async def listing(self, params: TaskListParams, props: MessageProperties, route: Route) -> None:
        records = {found.task.id: found.record() for found in await self.shared.all()}
        records.update((record.id, record) for record in self.methods.tasks.records())  # ours are fresher
        self.methods.answer_list(records.values(), params, props, route)

    async def cancel(self, params: TaskIdParams, props: MessageProperties, route: Route) -> None:
        found = await self._found(params.id, props, route)
        if found.terminal:
            raise TaskNotCancelable(
                f"task {params.id!r} is already {found.task.status.state.value}", data={"taskId": params.id}
            )
        if await self._elsewhere(Method.tasks_cancel, found, params.to_json_bytes(), props, route):
            return
        if self.holds(params.id):
            await _settled(self.methods.tasks_cancel(params, props, route))

    async def resubscribe(self, params: TaskIdParams, props: MessageProperties, route: Route) -> None:
        found = await self._found(params.id, props, route)
        if found.terminal:
            raise UnsupportedOperation(
                f"task {params.id!r} is {found.task.status.state.value} and has no more events; read it with tasks/get",
                data={"taskId": params.id, "state": found.task.status.state.value},
            )
        if await self._elsewhere(Method.tasks_resubscribe, found, params.to_json_bytes(), props, route):
            return
        if self.holds(params.id):
            self.methods.tasks_resubscribe(params, props, route)

    async def follow_up(
        self,
        method: Method,
        params: MessageSendParams,
        props: MessageProperties,
        route: Route,
        then: Callable[[MessageSendParams, MessageProperties, Route], None],
    ) -> None:
        """A message continuing a task this replica does not hold (its caller remembered a dead
        owner, or reached the shared topic): forward it to the live replica that runs the task,
        else take the task over (an input-required task stays so) and continue it here."""
        task_id = params.message.task_id or ""
        found = await self._found(task_id, props, route)
        if found.terminal:
            state = found.task.status.state.value
            raise InvalidParams(
                f"task {task_id!r} is {state}; a message may continue a task only while it is input-required "
                "(start a new task by leaving taskId out)",
                data={"taskId": task_id, "state": state},
            )
        if await self._elsewhere(method, found, params.to_json_bytes(), props, route):
            return
        await _settled(self.methods.after_push_check(params, props, route, then))

    async def _elsewhere(
        self, method: Method, found: SharedTask, params_json: bytes, props: MessageProperties, route: Route
    ) -> bool:
        """Forward the request to the replica that runs the task (True); if it is gone, take the
        task over here (False: the caller then checks :meth:`holds`)."""
        if self.holds(found.task.id):
            return False
        live = found.instance in self.siblings.others()
        if (live or found.leased) and props.get_extra(FORWARDED) is None and route.dialect is None:
            try:
                await self._forward(method, found.instance, params_json, props, route)
                return True
            except PublishError:  # no subscriber: its instance topic went with it
                pass
        how = "its instance no longer answers" if live or found.leased else "its lease ran out"
        await self.takeover.claim(dead=found.instance, how=how, task_id=found.task.id)
        if not self.holds(found.task.id):  # the owner's will may be claiming it here right now
            await self.takeover.settled()
        if not self.holds(found.task.id):  # another replica claimed it first: it answers from there
            again = await self.shared.get(found.task.id)
            if again is None or again.terminal or again.instance == found.instance:
                raise TaskNotFound(f"task {found.task.id!r} changed hands; ask again", data={"taskId": found.task.id})
            await self._forward(method, again.instance, params_json, props, route)
            return True
        return False

    async def _forward(
        self, method: Method, instance: str, params_json: bytes, props: MessageProperties, route: Route
    ) -> None:
        methods = self.methods
        topic = get_agent_instance_request_topic(methods.answers.namespace, methods.name, instance)
        request = {"jsonrpc": "2.0", "id": route.request_id, "method": method.value, "params": json.loads(params_json)}
        marked = dataclasses.replace(props, extra=[*props.extra, (FORWARDED, self.shared.instance)])
        await methods.answers.transport.publish_nowait(
            topic, json.dumps(request).encode(), properties=marked, require_subscriber=True
        )


async def _settled(pending: Awaitable[None] | None) -> None:
    if pending is not None:
        await pending

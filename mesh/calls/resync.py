"""After a reconnect, each call in flight asks the agent that owns it for its task.

The broker's session is an optimisation, not the guarantee (DESIGN, "Transport rules"): a
broker restarted without our session (killed between two saves, or without persistence) has
lost the answers published while we were away, and may have lost requests it had taken. So
once a :class:`~mesh.calls.CallPath` is connected again, every call sent before the drop that
waits on work (``message/send``, ``message/stream``, ``tasks/resubscribe``) asks for its task
with ``tasks/get``, on the instance topic of the replica that owns it (``a2aInstance``) when
known, else on the agent's topic:

- a task that ended (or waits for input) while we were away is the call's final answer, read
  from the agent's journal;
- a task still running needs nothing: its answer comes to our (again subscribed) topics;
- "task not found" for a new task means the request never reached the agent: it is sent
  again (same id and bytes, so an agent that did record it answers the recorded task);
- no answer (the agent is not back yet, or nobody subscribes): asked again every
  :data:`RESYNC_RETRY_S` while the call is open; its own timeouts still bound it.

Each ``tasks/get`` is answered under ``{key}-sync``, routed here by :meth:`Resync.route`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import TYPE_CHECKING

from mesh.a2a import INTERRUPTED_STATES, RpcError, Task, TaskIdParams, TaskNotFound, is_terminal, request_bytes
from mesh.a2a.methods import SEND_METHODS, STREAMING_METHODS
from mesh.calls.answers import read_answer
from mesh.errors import MeshError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import InboundMessage
from topics import get_agent_instance_request_topic, get_agent_request_topic

if TYPE_CHECKING:
    from mesh.calls.call import Call
    from mesh.calls.path import CallPath

__all__ = ["RESYNC_RETRY_S", "Resync"]

log = logging.getLogger(__name__)

#: After a reconnect, how often calls not yet resynchronised ask their agent again (it may
#: come back after us).
RESYNC_RETRY_S = 1.0
# The calls resynchronised after a reconnect: those that wait for work an agent does.
_RESYNC_METHODS = SEND_METHODS | STREAMING_METHODS


class Resync:
    """The resynchronisation of one call path's calls (see the module doc)."""

    def __init__(self, path: CallPath) -> None:
        self.path = path
        self._unsynced: set[Call] = set()  # still to be answered
        self._syncs: dict[bytes, Call] = {}  # tasks/get correlation -> its call
        self._task: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        """How many calls wait for their agent's answer about their task."""
        return len(self._unsynced)

    def after_reconnect(self, offline_since: float) -> None:
        """Connected again after a drop at ``offline_since`` (``time.perf_counter``): ask for the
        task of every open call sent before it."""
        self._unsynced.update(
            call
            for call in self.path.open_call_list()
            if call.state == "open" and call.method in _RESYNC_METHODS and call.sent_at < offline_since
        )
        if self._unsynced and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
            self._task.add_done_callback(self._ended)

    def forget(self, call: Call) -> None:
        """``call`` closed."""
        if self._unsynced:
            self._unsynced.discard(call)
        if self._syncs:
            self._syncs.pop(f"{call.key}-sync".encode(), None)

    def route(self, correlation: bytes, final: bool, message: InboundMessage) -> bool:
        """Take ``message`` if it answers one of our ``tasks/get``; True if it did."""
        if not self._syncs or (call := self._syncs.pop(correlation, None)) is None:
            return False
        if final:
            self._answered(call, message)
        return True

    async def _run(self) -> None:
        """Ask the owner of each unsynchronised call for its task until every one has an answer.

        A ``tasks/get`` goes to the replica that owns the task (``a2aInstance``), else to the
        agent; one that finds nobody (the agent not back yet) is asked again every
        :data:`RESYNC_RETRY_S` while the call is open.
        """
        while self._unsynced:
            for call in list(self._unsynced):
                if call.state != "open":
                    self._unsynced.discard(call)
                elif call.task_id is not None:
                    self._ask(call, call.task_id)
            await asyncio.sleep(RESYNC_RETRY_S)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._task = None
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("%s: resynchronising calls failed: %s", self.path.owner, error)

    def _ask(self, call: Call, task_id: str) -> None:
        key = f"{call.key}-sync"
        correlation = key.encode()
        props = MessageProperties(
            client_id=self.path.owner,
            user_id=call.options.user_id,
            auth_token=call.options.auth_token,
            caller_token=self.path.caller_token(call.agent),
            reply_to=self.path.reply_topic(key),
            timestamp_ms=int(time.time() * 1000),
            correlation_data=correlation,
            content_type=JSON_CONTENT_TYPE,
            payload_format_utf8=True,
            message_expiry_s=max(1, math.ceil(RESYNC_RETRY_S)),
        )
        topic = get_agent_request_topic(self.path.namespace, call.agent)
        if call.instance is not None:
            topic = get_agent_instance_request_topic(self.path.namespace, call.agent, call.instance)
        try:
            ack = self.path.transport.publish_nowait(
                topic, request_bytes("tasks/get", key, TaskIdParams(id=task_id)), properties=props
            )
        except (MeshError, ValueError) as exc:
            log.debug("%s: cannot ask %s for task %s now: %s", self.path.owner, call.agent, task_id, exc)
            return
        self._syncs[correlation] = call
        ack.add_done_callback(_ignore_failure)

    def _answered(self, call: Call, message: InboundMessage) -> None:
        """The owner's answer about ``call``'s task: its outcome, or a request to send again."""
        if call.state != "open" or call not in self._unsynced:
            return
        self._unsynced.discard(call)
        try:
            answer = read_answer(message.payload, message.properties, final=True)
        except TaskNotFound:
            if call.starts_task:  # the request never reached the agent (lost with the broker): again
                log.info(
                    "%s: request %s to %s was lost in the broker; sending it again",
                    self.path.owner,
                    call.key,
                    call.agent,
                )
                loop = asyncio.get_running_loop()
                until = call.deadline if call.deadline is not None else loop.time() + call.options.idle_timeout_s
                self.path.resend(call, until)
            return
        except (RpcError, MeshError) as exc:
            log.debug("%s: resynchronising %s: %s", self.path.owner, call.key, exc)
            return
        task = answer.value
        if isinstance(task, Task) and (is_terminal(task.status.state) or task.status.state in INTERRUPTED_STATES):
            log.info(
                "%s: task %s on %s ended while we were away; answered from its journal",
                self.path.owner,
                task.id,
                call.agent,
            )
            call.deliver(True, message)


def _ignore_failure(ack: asyncio.Future[None]) -> None:
    # A tasks/get that found nobody: asked again while the call is open.
    if not ack.cancelled():
        ack.exception()

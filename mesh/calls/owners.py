"""Which replica owns each task, and what happens to its calls when a replica goes.

An agent run as replicas (:mod:`agents.replicas`) stamps ``a2aInstance`` on its answers; a
:class:`~mesh.calls.CallPath` keeps an :class:`Owners` that remembers, per task, the instance
that answered, so that the task's follow-ups go to that instance's topic. Instance cards tell
which replicas live (:meth:`Owners.back`) and which went away (:meth:`Owners.gone`). When one
goes:

- calls it owned fail with :meth:`~mesh.errors.AgentUnavailableError.instance_gone` (saying
  whether other replicas live: instance gone, or agent gone);
- later follow-ups of its tasks go to the agent's shared topic while other replicas live (on a
  shared store one of them has taken the task over, or forwards to the one that has), as does a
  follow-up that the dead owner's instance topic refused (no subscriber: the owner died before
  its card's removal reached us); with no replica left they fail at once, "agent gone";
- calls whose owner is not known yet (a blocking ``message/send`` that received nothing so
  far) are resolved by asking each live replica for the task (``tasks/get`` on its instance
  topic): the one that knows it becomes the owner; if none does, the call fails the same way.

As for the callee's card (:meth:`~mesh.calls.CallPath.agent_gone`), a removal is acted upon
only :data:`~mesh.calls.path.GONE_SETTLE_S` later and not across this component's own outage:
a broker that shuts down publishes every client's will first.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING

from mesh.a2a import RpcError, Task
from mesh.background import BackgroundTasks
from mesh.calls.call import CallOptions
from mesh.errors import AgentUnavailableError, MeshError
from topics import get_agent_instance_request_topic, get_agent_request_topic

if TYPE_CHECKING:
    from mesh.calls.call import Call
    from mesh.calls.path import CallPath

__all__ = ["MAX_OWNERS", "Owners"]

log = logging.getLogger(__name__)

#: Task owners (and gone instances) remembered per call path.
MAX_OWNERS = 10_000
#: How long a replica asked whether it owns a task may take to answer.
PROBE_TIMEOUT_S = 1.0


class Owners:
    """The task owners and live replicas one call path knows of (see the module doc)."""

    def __init__(self, path: CallPath) -> None:
        self.path = path
        self._owners: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._gone: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._live: dict[str, set[str]] = {}
        self._probes = BackgroundTasks(log, f"{path.owner}'s task owners")

    def owner_of(self, agent: str, task_id: str) -> str | None:
        return self._owners.get((agent, task_id))

    def learned(self, agent: str, task_id: str, instance: str) -> None:
        key = (agent, task_id)
        self._owners[key] = instance
        self._owners.move_to_end(key)
        while len(self._owners) > MAX_OWNERS:
            self._owners.popitem(last=False)

    def route(self, call: Call, follow_up: bool) -> str:
        """The topic of ``call``: its replica's if addressed to one or if it follows up a task with a
        known owner (then ``call.instance`` is set), else the agent's; refuses a gone owner."""
        namespace, agent = self.path.namespace, call.agent
        if call.instance is None and follow_up and call.task_id is not None:
            call.instance = self._owners.get((agent, call.task_id))
        if call.instance is None:
            return get_agent_request_topic(namespace, agent)  # validates the agent's name
        if (agent, call.instance) in self._gone:
            if not self._others_live(agent, call.instance):
                raise AgentUnavailableError.instance_gone(agent, call.instance, call.task_id)
            self._away_from(call)
            return get_agent_request_topic(namespace, agent)
        return get_agent_instance_request_topic(namespace, agent, call.instance)

    def _others_live(self, agent: str, instance: str) -> bool:
        return bool(self._live.get(agent, set()) - {instance})

    def _away_from(self, call: Call) -> None:
        """Re-address a follow-up of a dead owner to the agent's shared topic (logged)."""
        if call.task_id is not None:
            self._owners.pop((call.agent, call.task_id), None)
        log.info(
            "%s: replica %s of %s, owner of task %s, is gone; its follow-up %s goes to the agent's shared topic",
            self.path.owner,
            call.instance,
            call.agent,
            call.task_id,
            call.method,
        )
        call.instance = None

    def gone_error(self, call: Call) -> AgentUnavailableError:
        """The error of a call whose owner ``call.instance`` is gone."""
        instance = call.instance or ""
        others = self._others_live(call.agent, instance)
        return AgentUnavailableError.instance_gone(call.agent, instance, call.task_id, others_live=others)

    def readdress(self, call: Call) -> bool:
        """The owner's instance topic refused ``call`` (no subscriber: the owner died): send it to
        the agent's shared topic instead if other replicas live (True), else let it fail (False).
        Nobody received it, so sending it again runs nothing twice."""
        instance = call.instance
        if instance is None or not self._others_live(call.agent, instance):
            return False
        self._away_from(call)
        call.topic = get_agent_request_topic(self.path.namespace, call.agent)
        loop = asyncio.get_running_loop()
        until = call.deadline or loop.time() + (call.props.message_expiry_s or 3600)
        self.path.resend(call, until)
        return True

    def back(self, agent: str, instance: str) -> None:
        """``instance``'s card is there: it serves (again)."""
        self._gone.pop((agent, instance), None)
        self._live.setdefault(agent, set()).add(instance)

    def gone(self, agent: str, instance: str) -> None:
        """``instance``'s card was removed: act on it once the removal is settled."""
        loop = asyncio.get_running_loop()
        loop.call_later(self.path.gone_settle_s, self._settled, agent, instance)

    def _settled(self, agent: str, instance: str) -> None:
        if self.path.maybe_restarted():  # the broker's shutdown, not the replica's death
            return
        self._gone[(agent, instance)] = None
        while len(self._gone) > MAX_OWNERS:
            self._gone.popitem(last=False)
        live = self._live.get(agent, set())
        live.discard(instance)
        owned, unknown = [], []
        for call in self.path.calls_to(agent):
            if call.instance == instance:
                owned.append(call)
            elif call.instance is None and call.task_id is not None:
                unknown.append(call)
        others = bool(live)
        for call in owned:
            call.fail(AgentUnavailableError.instance_gone(agent, instance, call.task_id, others_live=others))
        if owned:
            log.warning(
                "%s: replica %s of %s went away; failed its %d call(s)", self.path.owner, instance, agent, len(owned)
            )
        if unknown:
            self._probes.spawn(self._resolve(agent, instance, unknown, sorted(live)), name="owner probe")

    async def _resolve(self, agent: str, dead: str, calls: list[Call], live: list[str]) -> None:
        # Every call asks every live replica at once; the outcome is applied in one step, so a
        # caller that sees one call fail knows the others found their owner.
        asked = [(call, call.task_id) for call in calls if call.task_id is not None]
        answers = await asyncio.gather(*(self._owns(agent, i, task_id) for _, task_id in asked for i in live))
        for index, (call, task_id) in enumerate(asked):
            if not _unresolved(call):
                continue  # an answer told its owner meanwhile, or it ended
            owns = answers[index * len(live) : (index + 1) * len(live)]
            found = [instance for instance, yes in zip(live, owns, strict=True) if yes]
            if found:
                call.instance = found[0]
                self.learned(agent, task_id, found[0])
            else:
                call.fail(AgentUnavailableError.instance_gone(agent, dead, task_id, others_live=bool(live)))

    async def _owns(self, agent: str, instance: str, task_id: str) -> bool:
        options = CallOptions(idle_timeout_s=PROBE_TIMEOUT_S, deadline_s=PROBE_TIMEOUT_S, events=False)
        call = self.path.call(agent, "tasks/get", {"id": task_id}, options)
        call.instance = instance
        try:
            async with call:
                answer = await call.result()
        except (MeshError, RpcError):  # not there, or "task not found"
            return False
        return isinstance(answer.value, Task)


def _unresolved(call: Call) -> bool:
    """A call still open whose owner no answer has told (re-read after every await)."""
    return call.instance is None and call.state == "open"

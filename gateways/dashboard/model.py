"""What the dashboard shows, kept bounded: cards, recent tasks with their events, rates per agent.

:class:`MeshView` is pure bookkeeping (no I/O): the watcher (:mod:`gateways.dashboard.watcher`)
feeds it registry events, requests and answers as they cross the broker, and it tells its
listeners every change as a ``(kind, data)`` pair ready to send to a browser as JSON.

Bounds (all configurable, :class:`Bounds`):

- ``max_tasks`` recent tasks (default 200); beyond it the oldest finished task leaves first, then
  the oldest in flight;
- ``max_events`` events per task (default 100): the latest ones; a task
  counts what it dropped (``droppedEvents``);
- ``max_text`` characters of any text shown (default 400);
- ``max_calls`` other requests (``tasks/get``, ``tasks/cancel``...) remembered to attribute
  their answers (default 1,000);
- rates count over the last ``rate_window_s`` seconds (default 60), in one-second buckets per agent.

A task is keyed by its request's Correlation Data (the JSON-RPC id, which the mesh also uses
as the last level of the answer topics); its ``taskId`` is the one the answers name. Rates per
agent: ``requests`` received; ``answers`` (final answers that are not errors); ``errors``
(error answers of a task that ran, and tasks that ended failed); ``refusals`` (error answers
that refuse a request before it runs: busy, unauthenticated, invalid, unknown method, and
tasks ``rejected``).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any

from gateways.dashboard.llm import UsageTotals, approvals_of, usage_of
from gateways.dashboard.payloads import download_links, json_object, parts_text, str_or_none, timestamp_of
from gateways.dashboard.records import TERMINAL_STATES, Bounds, Rates, TaskRecord
from gateways.dashboard.workflows import MAX_NODES, card_workflow, node_marks
from mesh.a2a import AgentCard
from mesh.a2a.methods import SEND_NAMES
from mesh.discovery.registry import Entry

__all__ = ["REFUSAL_CODES", "Bounds", "Change", "MeshView", "TaskRecord", "card_summary"]

Change = tuple[str, dict[str, Any]]
ChangeListener = Callable[[Change], None]

#: JSON-RPC codes with which an agent refuses a request before running it.
REFUSAL_CODES = frozenset({-32700, -32600, -32601, -32602, -32003, -32004, -32005, -32020, -32050, -32051})
TASK_METHODS = SEND_NAMES


def card_summary(entry: Entry, replicas: int = 0) -> dict[str, Any]:
    """What a card tile shows of an agent's or gateway's card."""
    card: AgentCard = entry.card
    return {
        "kind": entry.kind,
        "name": entry.name,
        "description": card.description,
        "version": card.version,
        "url": card.url,
        "skills": [{"id": s.id, "name": s.name, "tags": list(s.tags)} for s in card.skills],
        "streaming": bool(card.capabilities.streaming),
        "signed": bool(card.signatures),
        "replicas": replicas,
        "workflow": card_workflow(card),
        "firstSeen": entry.first_seen,
        "lastSeen": entry.last_seen,
    }


class MeshView:
    """The dashboard's bounded picture of one namespace (see the module docstring)."""

    def __init__(
        self, bounds: Bounds | None = None, *, clock: Callable[[], float] = time.time, quiet_caller: str | None = None
    ) -> None:
        self.bounds = bounds or Bounds()
        self.clock = clock
        #: The dashboard's own client: its ``tasks/list`` calls (:meth:`task_listed`) are not traffic to show.
        self.quiet_caller = quiet_caller
        self.cards: dict[tuple[str, str], dict[str, Any]] = {}
        #: Cards the trust store refused (unsigned, wrongly signed, malformed), by name: shown as
        #: refused, never as agents (what ``mesh agents`` lists apart too).
        self.refused: dict[str, dict[str, Any]] = {}
        self.tasks: OrderedDict[str, TaskRecord] = OrderedDict()
        self._by_task_id: dict[str, str] = {}  # task id -> key
        self._calls: OrderedDict[str, str] = OrderedDict()  # key of a non-task request -> agent
        self.rates = Rates(self.bounds.rate_window_s, clock)
        self.usage = UsageTotals()
        #: Each agent's schedules as the schedules' record has them (:mod:`gateways.dashboard.schedules`).
        self.schedules: dict[str, list[dict[str, Any]]] = {}
        self._listeners: list[ChangeListener] = []

    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: ChangeListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _emit(self, kind: str, data: dict[str, Any]) -> None:
        for listener in tuple(self._listeners):
            listener((kind, data))

    def card_seen(self, entry: Entry, replicas: int = 0) -> None:
        summary = card_summary(entry, replicas)
        self.cards[(entry.kind, entry.name)] = summary
        self._emit("card", summary)

    def card_refused(self, name: str, kind: str, why: str | None) -> None:
        """A card of ``name`` was refused (``why``), or no longer is (``why`` None)."""
        if why is None:
            if self.refused.pop(name, None) is not None:
                self._emit("refused", {"name": name, "kind": kind, "why": None})
            return
        self.refused[name] = {"name": name, "kind": kind, "why": self._text(why)}
        self._emit("refused", self.refused[name])

    def card_gone(self, kind: str, name: str) -> None:
        if self.cards.pop((kind, name), None) is not None:
            self.rates.forget(name)
            self._emit("gone", {"kind": kind, "name": name})

    def request_seen(
        self,
        agent: str,
        key: str,
        payload: bytes,
        *,
        caller: str,
        caller_kind: str,
        chain: Iterable[str] = (),
        depth: int = 0,
    ) -> None:
        """A request on ``agent``'s request topic (``key``: its Correlation Data)."""
        request = json_object(payload)
        method = str(request.get("method", "?"))
        if method == "tasks/list" and caller == self.quiet_caller:
            return
        self.rates.count(agent, "requests")
        params = request.get("params")
        params = params if isinstance(params, dict) else {}
        if method not in TASK_METHODS:
            self._remember_call(key, agent)
            task_id = params.get("id")
            if isinstance(task_id, str) and (known := self._task_by_id(task_id)) is not None:
                self._add_event(known, {"kind": "request", "text": method})
            return
        message = params.get("message")
        message = message if isinstance(message, dict) else {}
        metadata = params.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        task_id = message.get("taskId")
        if isinstance(task_id, str) and (earlier := self._task_by_id(task_id)) is not None and earlier.approvals:
            earlier.approvals = []  # this request answers them
            self._add_event(earlier, {"kind": "answered", "text": "the approvals were answered"})
        now = self.clock()
        record = TaskRecord(
            key=key,
            task_id=task_id if isinstance(task_id, str) else key,  # a new task takes the request id
            agent=agent,
            method=method,
            caller=caller,
            caller_kind=caller_kind,
            started=now,
            updated=now,
            chain=[str(c) for c in chain],
            depth=depth,
            parent_task_id=str_or_none(metadata.get("parentTaskId")),
            delegated_by=str_or_none(metadata.get("delegatingAgent")),
            events=deque(maxlen=self.bounds.max_events),
            workflow_node=str_or_none(metadata.get("workflowNode")),
        )
        self.tasks[key] = record
        self._by_task_id[record.task_id] = key
        self._evict()
        self._add_event(record, {"kind": "request", "state": "submitted", "text": self._text(parts_text(message))})

    def answer_seen(self, key: str, payload: bytes, *, final: bool) -> None:
        """An answer (``final``: on a response topic, else a stream event on a status topic)."""
        record = self.tasks.get(key)
        if record is None:
            agent = self._calls.pop(key, None) if final else None
            if agent is not None:
                self._count_final(agent, json_object(payload))
            return
        answer = json_object(payload)
        if final:
            self._count_final(record.agent, answer)
        error = answer.get("error")
        if isinstance(error, dict):
            message = f"{error.get('code', '?')}: {error.get('message', '')}"
            record.state = "error"
            self._add_event(record, {"kind": "error", "state": "error", "text": self._text(message)})
            return
        result = answer.get("result")
        if not isinstance(result, dict):
            return
        task_id = result.get("taskId") if result.get("kind") in ("status-update", "artifact-update") else None
        if result.get("kind") == "task":
            task_id = result.get("id")
        if isinstance(task_id, str) and task_id != record.task_id:
            self._by_task_id.pop(record.task_id, None)
            record.task_id = task_id
            self._by_task_id[task_id] = record.key
        for node, state in node_marks(result):
            if node in record.node_states or len(record.node_states) < MAX_NODES:
                record.node_states[node] = state
        if (approvals := approvals_of(result)) is not None:
            record.approvals = approvals
        if final and (usage := usage_of(result)) is not None:
            self._emit("usage", {"agent": record.agent, "usage": self.usage.add(record.agent, usage)})
        self._add_event(record, self._event_of(result, final))

    def task_listed(self, agent: str, task: dict[str, Any]) -> None:
        """A task an agent listed (``tasks/list``) when watching started: recent work from before
        the first page opened. Known tasks are left alone; listed ones go before those seen live."""
        task_id = task.get("id")
        if not isinstance(task_id, str) or task_id in self._by_task_id:
            return
        status = task.get("status")
        status = status if isinstance(status, dict) else {}
        at = timestamp_of(status.get("timestamp"), self.clock())
        state = str(status.get("state", "?"))
        history = task.get("history")
        history = history if isinstance(history, list) else []
        asked = next((m for m in history if isinstance(m, dict) and m.get("role") == "user"), {})
        metadata = task.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        key = f"listed:{task_id}"  # no request was seen: a key no Correlation Data can be
        record = TaskRecord(
            key=key,
            task_id=task_id,
            agent=agent,
            method="tasks/list",
            caller="",
            caller_kind="",
            started=at,
            updated=at,
            chain=[],
            depth=0,
            parent_task_id=str_or_none(metadata.get("parentTaskId")),
            delegated_by=str_or_none(metadata.get("delegatingAgent")),
            state=state,
            events=deque(maxlen=self.bounds.max_events),
        )
        if asked:
            record.events.append({"at": at, "kind": "request", "text": self._text(parts_text(asked))})
        message = status.get("message")
        text = parts_text(message) if isinstance(message, dict) else ""
        record.events.append({"at": at, "kind": "task", "state": state, "text": self._text(text)})
        self.tasks[key] = record
        self.tasks.move_to_end(key, last=False)  # older than anything seen live
        self._by_task_id[task_id] = key
        self._evict()
        if key in self.tasks:
            self._emit("task", {"task": record.header(), "event": record.events[-1]})

    def schedules_read(self, by_agent: dict[str, list[dict[str, Any]]]) -> None:
        """The schedules' record read again: sent on when it changed (a pause, a next tick)."""
        if by_agent != self.schedules:
            self.schedules = by_agent
            self._emit("schedules", {"schedules": by_agent})

    def snapshot(self) -> dict[str, Any]:
        return {
            "cards": list(self.cards.values()),
            "refused": list(self.refused.values()),
            "tasks": [t.to_json_dict() for t in self.tasks.values()],
            "rates": self.rates.snapshot(),
            "usage": self.usage.by_agent,
            "schedules": self.schedules,
            "bounds": self.bounds.to_json_dict(),
        }

    def _event_of(self, result: dict[str, Any], final: bool) -> dict[str, Any]:
        kind = result.get("kind")
        if kind == "status-update":
            status = result.get("status")
            status = status if isinstance(status, dict) else {}
            state = str(status.get("state", "working"))
            message = status.get("message")
            text = parts_text(message) if isinstance(message, dict) else ""
            return {"kind": "status", "state": state, "text": self._text(text)}
        if kind == "artifact-update":
            artifact = result.get("artifact")
            artifact = artifact if isinstance(artifact, dict) else {}
            event = {"kind": "artifact", "name": artifact.get("name"), "text": self._text(parts_text(artifact))}
            if files := download_links(artifact):
                event["files"] = files
            return event
        if kind == "task":
            status = result.get("status")
            status = status if isinstance(status, dict) else {}
            message = status.get("message")
            text = parts_text(message) if isinstance(message, dict) else ""
            state = str(status.get("state", "?"))
            return {"kind": "task" if final else "status", "state": state, "text": self._text(text)}
        if kind == "message":
            return {"kind": "message", "state": "completed" if final else None, "text": self._text(parts_text(result))}
        return {"kind": str(kind), "text": ""}

    def _add_event(self, record: TaskRecord, event: dict[str, Any]) -> None:
        now = self.clock()
        event = {"at": now} | {k: v for k, v in event.items() if v is not None}
        state = event.get("state")
        if isinstance(state, str) and record.state not in TERMINAL_STATES | {"error"}:
            record.state = state
        if record.events.maxlen is not None and len(record.events) == record.events.maxlen:
            record.dropped_events += 1
        record.events.append(event)
        record.updated = now
        self.tasks.move_to_end(record.key)
        self._emit("task", {"task": record.header(), "event": event})

    def _count_final(self, agent: str, answer: dict[str, Any]) -> None:
        error = answer.get("error")
        if isinstance(error, dict):
            self.rates.count(agent, "refusals" if error.get("code") in REFUSAL_CODES else "errors")
            return
        result = answer.get("result")
        status = result.get("status") if isinstance(result, dict) else None
        state = status.get("state") if isinstance(status, dict) else None
        if state == "rejected":
            self.rates.count(agent, "refusals")
        elif state == "failed":
            self.rates.count(agent, "errors")
        else:
            self.rates.count(agent, "answers")

    def _remember_call(self, key: str, agent: str) -> None:
        self._calls[key] = agent
        while len(self._calls) > self.bounds.max_calls:
            self._calls.popitem(last=False)

    def _task_by_id(self, task_id: str) -> TaskRecord | None:
        key = self._by_task_id.get(task_id)
        return None if key is None else self.tasks.get(key)

    def _evict(self) -> None:
        while len(self.tasks) > self.bounds.max_tasks:
            victim = next((k for k, t in self.tasks.items() if t.state in TERMINAL_STATES), None)
            if victim is None:
                victim = next(iter(self.tasks))
            record = self.tasks.pop(victim)
            self._by_task_id.pop(record.task_id, None)
            self._emit("taskGone", {"key": victim})

    def _text(self, text: str) -> str:
        limit = self.bounds.max_text
        return text if len(text) <= limit else text[: limit - 1] + "…"

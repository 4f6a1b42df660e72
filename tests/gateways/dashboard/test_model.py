"""The dashboard's bounded picture of the mesh (:class:`gateways.dashboard.model.MeshView`), fed by hand."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents.builtin import CountdownAgent
from agents.workflow import WorkflowAgent, load_workflow
from agents.workflow.agent import WORKFLOW_EXTENSION as AGENT_SIDE_URI
from gateways.dashboard.model import Bounds, Change, MeshView
from gateways.dashboard.workflows import WORKFLOW_EXTENSION, card_workflow
from mesh.a2a import AgentCardSignature
from mesh.discovery.registry import Entry


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def text_message(text: str, role: str = "agent") -> dict[str, Any]:
    return {"kind": "message", "role": role, "messageId": "m1", "parts": [{"kind": "text", "text": text}]}


def request(method: str = "message/stream", text: str = "hi", **params: Any) -> bytes:
    body = {"message": text_message(text, "user"), **params}
    return json.dumps({"jsonrpc": "2.0", "id": "k", "method": method, "params": body}).encode()


def result(value: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": "k", "result": value}).encode()


def error(code: int, message: str = "no") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": "k", "error": {"code": code, "message": message}}).encode()


def task(task_id: str, state: str, text: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"state": state}
    if text:
        status["message"] = text_message(text)
    return {"kind": "task", "id": task_id, "contextId": "c", "status": status}


def status(task_id: str, state: str, text: str) -> dict[str, Any]:
    update = {"state": state, "message": text_message(text)}
    return {"kind": "status-update", "taskId": task_id, "contextId": "c", "status": update}


def seen(view: MeshView, agent: str, key: str, payload: bytes | None = None, **kwargs: Any) -> None:
    kwargs.setdefault("caller", "cli")
    kwargs.setdefault("caller_kind", "client")
    view.request_seen(agent, key, payload if payload is not None else request(), **kwargs)


def test_a_task_follows_its_request_events_and_final_answer() -> None:
    clock = Clock()
    view = MeshView(clock=clock)
    changes: list[Change] = []
    view.add_listener(changes.append)

    seen(view, "countdown", "k1", request(text="3"))
    clock.now += 0.5
    view.answer_seen("k1", result(status("k1", "working", "3...")), final=False)
    view.answer_seen("k1", result(task("k1", "completed", "Liftoff!")), final=True)

    (record,) = view.snapshot()["tasks"]
    assert record["state"] == "completed" and record["final"] and record["agent"] == "countdown"
    assert [(e["kind"], e.get("state"), e["text"]) for e in record["events"]] == [
        ("request", "submitted", "3"),
        ("status", "working", "3..."),
        ("task", "completed", "Liftoff!"),
    ]
    assert record["events"][1]["at"] - record["started"] == 0.5
    assert [kind for kind, _ in changes] == ["task", "task", "task"]
    assert view.rates.snapshot()["countdown"] == {"requests": 1, "answers": 1, "errors": 0, "refusals": 0}


def test_a_delegated_request_names_its_parent_and_chain() -> None:
    view = MeshView()
    seen(view, "orchestrator", "root")
    delegated = request(metadata={"parentTaskId": "root", "delegatingAgent": "orchestrator"})
    seen(view, "echo", "sub-1", delegated, caller="orchestrator", caller_kind="agent", chain=["orchestrator"], depth=1)
    child = view.snapshot()["tasks"][1]
    assert child["parentTaskId"] == "root" and child["delegatedBy"] == "orchestrator"
    assert child["chain"] == ["orchestrator"] and child["depth"] == 1 and child["callerKind"] == "agent"


def test_a_request_that_names_its_task_is_shown_under_that_id() -> None:
    view = MeshView()
    payload = json.loads(request())
    payload["params"]["message"]["taskId"] = "t-7"
    seen(view, "echo", "k2", json.dumps(payload).encode())
    assert view.snapshot()["tasks"][0]["taskId"] == "t-7"


def test_recent_tasks_are_bounded_and_finished_ones_leave_first() -> None:
    view = MeshView(Bounds(max_tasks=3))
    gone: list[str] = []
    view.add_listener(lambda change: gone.append(change[1]["key"]) if change[0] == "taskGone" else None)
    for key in ("a", "b", "c"):
        seen(view, "echo", key)
    view.answer_seen("b", result(task("b", "completed")), final=True)
    seen(view, "echo", "d")  # b is finished: it goes, though a is older
    seen(view, "echo", "e")  # none finished: the oldest goes
    assert [t["key"] for t in view.snapshot()["tasks"]] == ["c", "d", "e"]
    assert gone == ["b", "a"]


def test_events_per_task_and_texts_are_bounded() -> None:
    view = MeshView(Bounds(max_events=4, max_text=10))
    seen(view, "countdown", "k", request(text="x" * 50))
    assert view.snapshot()["tasks"][0]["events"][0]["text"] == "x" * 9 + "…"
    for step in range(6):
        view.answer_seen("k", result(status("k", "working", f"{step}...")), final=False)
    record = view.snapshot()["tasks"][0]
    assert [e["text"] for e in record["events"]] == ["2...", "3...", "4...", "5..."]
    assert record["droppedEvents"] == 3


@pytest.mark.parametrize(
    ("answer", "counted"),
    [
        (error(-32050, "busy"), "refusals"),
        (error(-32020, "unauthenticated"), "refusals"),
        (error(-32602, "invalid params"), "refusals"),
        (error(-32603, "internal"), "errors"),
        (result(task("k", "failed")), "errors"),
        (result(task("k", "rejected")), "refusals"),
        (result(task("k", "completed")), "answers"),
        (result({"kind": "message", "role": "agent", "messageId": "m", "parts": []}), "answers"),
    ],
)
def test_final_answers_are_counted_as_answers_errors_or_refusals(answer: bytes, counted: str) -> None:
    view = MeshView()
    seen(view, "echo", "k")
    view.answer_seen("k", answer, final=True)
    rates = view.rates.snapshot()["echo"]
    assert rates == {"requests": 1, "answers": 0, "errors": 0, "refusals": 0} | {counted: 1}


def test_an_error_answer_ends_the_task_in_the_timeline() -> None:
    view = MeshView()
    seen(view, "echo", "k")
    view.answer_seen("k", error(-32050, "Agent busy"), final=True)
    record = view.snapshot()["tasks"][0]
    assert record["state"] == "error" and record["events"][-1]["text"] == "-32050: Agent busy"


def test_rates_count_over_their_window_only() -> None:
    clock = Clock()
    view = MeshView(Bounds(rate_window_s=60), clock=clock)
    seen(view, "echo", "a")
    clock.now += 30
    seen(view, "echo", "b")
    assert view.rates.snapshot()["echo"]["requests"] == 2
    clock.now += 31
    assert view.rates.snapshot()["echo"]["requests"] == 1


def test_answers_to_other_methods_count_for_their_agent_without_a_task_row() -> None:
    view = MeshView(Bounds(max_calls=1))
    get = json.dumps({"jsonrpc": "2.0", "id": "g", "method": "tasks/get", "params": {"id": "x"}}).encode()
    seen(view, "echo", "g1", get)
    seen(view, "echo", "g2", get)  # g1 is forgotten: only one is remembered
    view.answer_seen("g1", error(-32001, "Task not found"), final=True)
    view.answer_seen("g2", error(-32001, "Task not found"), final=True)
    assert view.snapshot()["tasks"] == []
    assert view.rates.snapshot()["echo"] == {"requests": 2, "answers": 0, "errors": 1, "refusals": 0}


@pytest.mark.parametrize("payload", [b"", b"not json", b"[1, 2]", b'{"result": 5}', b'{"result": {"kind": "?"}}'])
def test_malformed_traffic_is_shown_as_far_as_it_reads_and_never_raises(payload: bytes) -> None:
    view = MeshView()
    seen(view, "echo", "k", payload)  # an unreadable request counts, and shows no task
    seen(view, "echo", "k2")
    view.answer_seen("k2", payload, final=False)
    view.answer_seen("unknown", payload, final=True)
    assert [t["key"] for t in view.snapshot()["tasks"]] == ["k2"]
    assert view.rates.snapshot()["echo"]["requests"] == 2


def test_a_card_tile_says_skills_streaming_replicas_and_whether_it_is_signed() -> None:
    card = CountdownAgent().card(url="mqtt://localhost/x", push_notifications=False)
    signed = card.model_copy(update={"signatures": [AgentCardSignature(protected="p", signature="s")]})
    view = MeshView()
    changes: list[Change] = []
    view.add_listener(changes.append)
    view.card_seen(Entry("agent", "countdown", signed, 1.0, 2.0), replicas=3)
    view.card_seen(Entry("agent", "plain", card.model_copy(update={"name": "plain"}), 1.0, 2.0))
    tiles = {c["name"]: c for c in view.snapshot()["cards"]}
    assert tiles["countdown"]["signed"] and not tiles["plain"]["signed"]
    assert tiles["countdown"]["replicas"] == 3 and tiles["countdown"]["streaming"]
    assert tiles["countdown"]["skills"][0]["id"] == "countdown"
    view.card_gone("agent", "countdown")
    view.card_gone("agent", "countdown")  # a second removal changes nothing
    assert [kind for kind, _ in changes] == ["card", "card", "gone"]
    assert [c["name"] for c in view.snapshot()["cards"]] == ["plain"]


def test_a_workflow_card_gives_its_graph_and_node_marks_give_each_nodes_state() -> None:
    graph = load_workflow(
        "nodes: [{id: a, agent: x}, {id: b, tool: 'tests.agents.workflow_agents:grow', input: '{{ a.output.text }}'}]",
        name="flow",
    )
    card = WorkflowAgent(name="flow", graph=graph).card(url="mqtt://x", push_notifications=False)
    view = MeshView()
    view.card_seen(Entry("agent", "flow", card, 1.0, 2.0))
    (summary,) = view.snapshot()["cards"]
    assert summary["workflow"] == [
        {"id": "a", "kind": "agent", "target": "x", "dependsOn": []},
        {"id": "b", "kind": "tool", "target": "tests.agents.workflow_agents:grow", "dependsOn": ["a"]},
    ]
    assert WORKFLOW_EXTENSION == AGENT_SIDE_URI

    def mark(node: str, state: str) -> dict[str, Any]:
        update = status("k1", "working", f"node {node} {state}")
        update["status"]["message"]["metadata"] = {"workflowNode": node, "workflowNodeState": state}
        return update

    seen(view, "flow", "k1")
    view.answer_seen("k1", result(mark("a", "running")), final=False)
    view.answer_seen("k1", result(mark("a", "completed")), final=False)
    seen(view, "x", "k2", request(metadata={"parentTaskId": "k1", "workflowNode": "a"}))
    records = {r["key"]: r for r in view.snapshot()["tasks"]}
    assert records["k1"]["nodeStates"] == {"a": "completed"}
    assert records["k2"]["workflowNode"] == "a" and records["k2"]["parentTaskId"] == "k1"

    # A message/send caller sees only the final Task: its history has the marks.
    seen(view, "flow", "k3")
    final = task("k3", "completed", "done")
    final["history"] = [mark("a", "completed")["status"]["message"], mark("b", "failed")["status"]["message"]]
    view.answer_seen("k3", result(final), final=True)
    assert {r["key"]: r for r in view.snapshot()["tasks"]}["k3"]["nodeStates"] == {"a": "completed", "b": "failed"}


def test_an_artifact_by_uri_gets_a_download_link_and_other_files_none() -> None:
    view = MeshView(clock=Clock())
    seen(view, "reporter", "k1")
    parts = [
        {"kind": "file", "file": {"uri": "artifact://c/charts/q3.png?version=2", "name": "q3.png"}},
        {"kind": "file", "file": {"uri": "https://elsewhere/x.png"}},
        {"kind": "file", "file": {"uri": "artifact://c/../x"}},
    ]
    update = {"kind": "artifact-update", "taskId": "k1", "contextId": "c", "artifact": {"name": "q3", "parts": parts}}
    view.answer_seen("k1", result(update), final=False)
    (record,) = view.snapshot()["tasks"]
    (event,) = [e for e in record["events"] if e["kind"] == "artifact"]
    assert event["files"] == [{"name": "charts/q3.png", "href": "/a2a/artifacts/c/charts/q3.png?version=2"}]


def listed_task(task_id: str, at: str, state: str = "completed", text: str = "asked") -> dict[str, Any]:
    return {
        "kind": "task",
        "id": task_id,
        "contextId": "c1",
        "status": {"state": state, "timestamp": at, "message": text_message(f"answer to {text}")},
        "history": [text_message(text, "user"), text_message(f"answer to {text}")],
    }


def test_listed_tasks_come_before_live_ones_oldest_first_and_known_ones_stay() -> None:
    view = MeshView(clock=Clock(), quiet_caller="dashboard-ui")
    view.request_seen("echo", "live", request(text="live"), caller="cli", caller_kind="client")
    view.task_listed("echo", listed_task("t2", "2026-01-01T00:00:02+00:00", text="second"))
    view.task_listed("echo", listed_task("t1", "2026-01-01T00:00:01+00:00", "failed", text="first"))
    view.task_listed("echo", listed_task("t2", "2026-01-01T00:00:09+00:00", text="again"))  # known: left alone
    view.task_listed("echo", {"id": 7})  # no task id: nothing
    tasks = view.snapshot()["tasks"]
    assert [t["taskId"] for t in tasks] == ["t1", "t2", "live"]
    first = tasks[0]
    assert (first["agent"], first["state"], first["final"]) == ("echo", "failed", True)
    assert first["started"] == 1_767_225_601.0
    assert [(e["kind"], e["text"]) for e in first["events"]] == [("request", "first"), ("task", "answer to first")]


def test_the_dashboards_own_listing_is_not_traffic() -> None:
    view = MeshView(clock=Clock(), quiet_caller="dashboard-ui")
    listing = json.dumps({"jsonrpc": "2.0", "id": "k", "method": "tasks/list", "params": {}}).encode()
    view.request_seen("echo", "k1", listing, caller="dashboard-ui", caller_kind="client")
    view.answer_seen("k1", result({"tasks": []}), final=True)
    assert view.rates.snapshot().get("echo", {}).get("requests", 0) == 0
    view.request_seen("echo", "k2", listing, caller="someone", caller_kind="client")  # another's listing shows
    assert view.rates.snapshot()["echo"]["requests"] == 1


def test_a_switchs_cases_reach_the_page_bounded_and_checked() -> None:
    graph = load_workflow(
        """
        nodes:
          - {id: a, agent: x}
          - {id: pick, switch: [{when: "{{ a.output.text == 'y' }}", then: b}, {else: c}]}
          - {id: b, agent: x}
          - {id: c, agent: x}
        """,
        name="flow",
    )
    card = WorkflowAgent(name="flow", graph=graph).card(url="mqtt://x", push_notifications=False)
    nodes = {n["id"]: n for n in card_workflow(card) or []}
    assert nodes["pick"]["cases"] == [{"when": "{{ a.output.text == 'y' }}", "then": "b"}, {"else": "c"}]
    assert nodes["pick"]["target"] == "" and nodes["b"]["dependsOn"] == ["pick"]
    # A card off the wire with junk among its cases: only well-formed cases pass.
    (extension,) = card.capabilities.extensions or []
    params = {"nodes": [{"id": "s", "kind": "switch", "cases": [{"then": 3}, "x", {"else": "t"}], "dependsOn": []}]}
    extensions = [extension.model_copy(update={"params": params})]
    odd = card.model_copy(update={"capabilities": card.capabilities.model_copy(update={"extensions": extensions})})
    (drawn,) = card_workflow(odd) or []
    assert drawn == {"id": "s", "kind": "switch", "target": "", "dependsOn": [], "cases": [{"else": "t"}]}


def test_pending_approvals_are_listed_and_usage_adds_up_per_agent() -> None:
    view = MeshView()
    changes: list[Change] = []
    view.add_listener(changes.append)
    seen(view, "careful", "k1")
    asked = {
        "kind": "message",
        "role": "agent",
        "messageId": "m2",
        "parts": [
            {
                "kind": "data",
                "data": {
                    "type": "tool_approval",
                    "tool_call_id": "c1",
                    "function_name": "book",
                    "arguments": {"city": "Oslo"},
                },
            },
        ],
        "metadata": {"llmEvent": "approval"},
    }
    waiting = {"kind": "task", "id": "t1", "contextId": "c", "status": {"state": "input-required", "message": asked}}
    view.answer_seen("k1", result(waiting), final=True)
    (record,) = view.snapshot()["tasks"]
    assert record["state"] == "input-required"
    assert record["approvals"] == [{"tool": "book", "arguments": '{"city": "Oslo"}'}]

    done = task("t1", "completed", "booked")
    done["status"]["message"]["metadata"] = {"llm": {"inputTokens": 120, "outputTokens": 30, "costUsd": 0.0015}}
    answering = json.loads(request())
    answering["params"]["message"]["taskId"] = "t1"
    seen(view, "careful", "k2", json.dumps(answering).encode())
    view.answer_seen("k2", result(done), final=True)
    again = task("t2", "completed", "ok")
    again["status"]["message"]["metadata"] = {"llm": {"inputTokens": 10, "outputTokens": 5}}
    seen(view, "careful", "k3")
    view.answer_seen("k3", result(again), final=True)
    snap = view.snapshot()
    assert [t["approvals"] for t in snap["tasks"]] == [[], [], []]  # answered: none pending
    assert snap["usage"] == {"careful": {"tokens": 165, "costUsd": 0.0015, "answers": 2}}
    assert [data for kind, data in changes if kind == "usage"][-1] == {
        "agent": "careful",
        "usage": snap["usage"]["careful"],
    }

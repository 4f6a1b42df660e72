"""Workflow agents on the real broker: each node type, failures, retries, cancel."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agents import AgentSettings
from agents.workflow import WorkflowAgent, load_workflow
from mesh.a2a import (
    DataPart,
    Task,
    TaskState,
    TaskStatusUpdateEvent,
    create_user_message,
    get_text_from_message,
)
from mesh.client import MeshClient
from mesh.telemetry import tracing
from tests.agents.workflow_agents import Facts, Flaky, Gauge, Holder, Meeting, Upper
from tests.conftest import ServeAgent
from tests.support import wait_until

MEMORY = AgentSettings(task_store=":memory:")


async def serve_workflow(serve_agent: ServeAgent, name: str, text: str, description: str = "") -> WorkflowAgent:
    agent = WorkflowAgent(name=name, description=description or None, graph=load_workflow(text, name=name))
    await serve_agent(agent, MEMORY)
    return agent


def answer(task: object) -> tuple[str, dict[str, Any]]:
    assert isinstance(task, Task), task
    assert task.status.state is TaskState.completed, task.status
    assert task.status.message is not None
    data = next(p.data for p in task.status.message.parts if isinstance(p, DataPart))
    return get_text_from_message(task.status.message), data


def failure(task: object) -> str:
    assert isinstance(task, Task) and task.status.state is TaskState.failed, task
    assert task.status.message is not None
    return get_text_from_message(task.status.message)


async def test_a_linear_workflow_streams_node_events_and_answers_its_output(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    upper = Upper()
    await serve_agent(Facts(), MEMORY)
    await serve_agent(upper, MEMORY)
    await serve_workflow(
        serve_agent,
        "report",
        """
        input_schema: {type: object, properties: {topic: {type: string}}, required: [topic]}
        nodes:
          - {id: research, agent: facts, input: "Find facts about {{ input.topic }}"}
          - {id: write, agent: upper, input: "{{ research.output.text }} ({{ research.output.data.sources | length }})"}
        output: {report: "{{ write.output.text }}", sources: "{{ research.output.data.sources }}"}
        """,
        description="Research a topic, then write a report.",
    )
    card = await client.wait_for_agent("report")
    assert card.skills[0].description.startswith("Research a topic, then write a report. Input (JSON Schema)")

    events: list[Any] = []
    async for item in client.stream("report", "solar panels"):
        events.append(item)
    text, data = answer(events[-1])
    assert data["report"] == "FACTS ABOUT FIND FACTS ABOUT SOLAR PANELS (3)"
    assert len(data["sources"]) == 3  # a one-expression template keeps the list a list
    assert upper.calls == ["facts about Find facts about solar panels (3)"]
    assert "FACTS ABOUT" in text
    marks = [
        (e.status.message.metadata or {}).get("workflowNode")
        + ":"
        + (e.status.message.metadata or {}).get("workflowNodeState", "progress")
        for e in events
        if isinstance(e, TaskStatusUpdateEvent)
        and e.status.message
        and (e.status.message.metadata or {}).get("workflowNode")
    ]
    assert marks == ["research:running", "research:progress", "research:completed", "write:running", "write:completed"]

    # A DataPart matching the schema is the input as it is; one that does not is refused.
    message = create_user_message([DataPart(data={"topic": "wind"})])
    _, data = answer(await client.send("report", message))
    assert data["report"] == "FACTS ABOUT FIND FACTS ABOUT WIND (3)"
    refused = await client.send("report", create_user_message([DataPart(data={"subject": "wind"})]))
    assert isinstance(refused, Task) and refused.status.state is TaskState.rejected
    assert refused.status.message is not None
    assert "lacks the required property 'topic'" in get_text_from_message(refused.status.message)


async def test_nodes_without_dependencies_run_at_once(serve_agent: ServeAgent, client: MeshClient) -> None:
    meeting = Meeting(expected=3)
    await serve_agent(meeting, MEMORY)
    await serve_workflow(
        serve_agent,
        "fan",
        """
        nodes:
          - {id: a, agent: meeting, input: "a"}
          - {id: b, agent: meeting, input: "b"}
          - {id: c, agent: meeting, input: "c"}
        output: {all: "{{ a.output.text }}{{ b.output.text }}{{ c.output.text }}"}
        """,
    )
    _, data = answer(await client.send("fan", "go", timeout=20))
    assert data == {"all": "abc"}
    # Each call waited for the three to be in at once: every one started before any ended.
    assert max(start for start, _ in meeting.spans) <= min(end for _, end in meeting.spans)


async def test_a_switch_runs_one_branch_and_skips_the_other(serve_agent: ServeAgent, client: MeshClient) -> None:
    upper = Upper()
    await serve_agent(Facts(), MEMORY)
    await serve_agent(upper, MEMORY)
    await serve_workflow(
        serve_agent,
        "choose",
        """
        nodes:
          - {id: research, agent: facts, input: "{{ input.text }}"}
          - id: check
            switch:
              - {when: "{{ research.output.data.confidence < 0.5 }}", then: doubt}
              - {else: write}
          - {id: doubt, agent: upper, input: "doubt"}
          - {id: write, agent: upper, input: "write"}
          - {id: after_write, agent: upper, input: "after {{ write.output.text }}"}
          - {id: joined, agent: upper, input: "joined {{ doubt.output.text or write.output.text }}"}
        output: {said: "{{ joined.output.text }}", chosen: "{{ check.output.selected }}",
                 after: "{{ after_write.state }}"}
        """,
    )
    _, data = answer(await client.send("choose", "not sure?"))
    assert data == {"said": "JOINED WRITE", "chosen": "write", "after": "completed"}
    assert sorted(upper.calls) == ["after WRITE", "joined WRITE", "write"]
    upper.calls.clear()
    _, data = answer(await client.send("choose", "maybe"))
    assert data == {"said": "JOINED DOUBT", "chosen": "doubt", "after": "skipped"}
    assert upper.calls == ["doubt", "joined DOUBT"]  # write and what depends on it alone were skipped


async def test_a_map_over_20_items_keeps_to_max_parallel(serve_agent: ServeAgent, client: MeshClient) -> None:
    gauge = Gauge()
    await serve_agent(gauge, AgentSettings(task_store=":memory:", max_concurrent_tasks=50))
    await serve_workflow(
        serve_agent,
        "mapper",
        """
        nodes:
          - id: each
            map: "{{ range(20) | list }}"
            agent: gauge
            input: "{{ item }}"
            max_parallel: 4
        output: {count: "{{ each.output.data['items'] | length }}", first: "{{ each.output.data['items'][0].text }}"}
        """,
    )
    _, data = answer(await client.send("mapper", "go", timeout=30))
    assert data == {"count": 20, "first": "item 0"}
    assert sorted(gauge.seen, key=int) == [str(i) for i in range(20)]
    assert 1 < gauge.most <= 4


async def test_a_map_with_more_items_than_max_items_fails_its_node(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_workflow(
        serve_agent,
        "toomany",
        """
        max_items: 5
        nodes:
          - {id: each, map: "{{ range(6) | list }}", tool: "tests.agents.workflow_agents:grow", input: "{{ item }}"}
        """,
    )
    assert "node 'each' failed: map gave 6 items, more than max_items (5)" in failure(await client.send("toomany", "x"))


async def test_a_loop_runs_while_its_condition_holds_and_tools_run(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_workflow(
        serve_agent,
        "looper",
        """
        nodes:
          - id: grown
            loop: {while: "{{ loop.output.text | length < 4 }}", max_iterations: 10}
            tool: "tests.agents.workflow_agents:grow"
            input: "{{ loop.output.text if loop.output else input.text }}"
          - id: counted
            tool: "tests.agents.workflow_agents:count_words"
            input: {text: "{{ grown.output.text }} b c"}
          - id: bounded
            loop: {while: "{{ true }}", max_iterations: 3}
            tool: "tests.agents.workflow_agents:grow"
            input: "{{ loop.index }}"
        output: {grown: "{{ grown.output.text }}", runs: "{{ grown.output.iterations }}",
                 words: "{{ counted.output.data.words }}", bounded: "{{ bounded.output.iterations }}"}
        """,
    )
    _, data = answer(await client.send("looper", "a"))
    assert data == {"grown": "axxx", "runs": 3, "words": 3, "bounded": 3}


async def test_a_tool_takes_a_mapping_as_keyword_arguments_and_anything_else_as_its_argument(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_workflow(
        serve_agent,
        "tooled",
        """
        nodes:
          - {id: keywords, tool: "tests.agents.workflow_agents:count_words", input: {text: "a b", at_least: "3"}}
          - {id: positional, tool: "tests.agents.workflow_agents:count_words", input: "{{ input.text }}"}
        output: {keywords: "{{ keywords.output.data.words }}", positional: "{{ positional.output.data.words }}"}
        """,
    )
    _, data = answer(await client.send("tooled", "one two three four"))
    assert data == {"keywords": 3, "positional": 4}  # "3" validated to the int parameter, as an LLM tool call's

    await serve_workflow(
        serve_agent, "mistooled", 'nodes: [{id: c, tool: "tests.agents.workflow_agents:count_words", input: {txt: a}}]'
    )
    said = failure(await client.send("mistooled", "x"))
    assert "node 'c' failed: tool 'tests.agents.workflow_agents:count_words' takes (text, *, at_least=0) but " in said
    assert "the node's input gives the keys txt" in said


async def test_an_output_that_is_no_mapping_is_answered_as_it_is(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_workflow(serve_agent, "says", "nodes: [{id: up, agent: upper}]\noutput: 'said {{ up.output.text }}'")
    await serve_workflow(serve_agent, "lists", "nodes: [{id: up, agent: upper}]\noutput: ['{{ up.output.text }}', b]")
    await serve_agent(Upper(), MEMORY)
    said = await client.send("says", "hi")
    assert isinstance(said, Task) and said.status.message is not None
    assert [p.kind for p in said.status.message.parts] == ["text"]  # text alone: no {"output": ...} data
    assert get_text_from_message(said.status.message) == "said HI"
    assert answer(await client.send("lists", "hi"))[1] == {"items": ["HI", "b"]}


async def test_a_nested_workflow_is_a_delegation_to_another_workflow(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_agent(Upper(), MEMORY)
    await serve_workflow(
        serve_agent, "inner", "nodes: [{id: up, agent: upper}]\noutput: {text: '{{ up.output.text }}'}"
    )
    await serve_workflow(
        serve_agent,
        "outer",
        """
        nodes:
          - {id: nested, workflow: inner, input: "{{ input.text }}!"}
        output: {inner_said: "{{ nested.output.data.text }}"}
        """,
    )
    _, data = answer(await client.send("outer", "deep"))
    assert data == {"inner_said": "DEEP!"}


async def test_retries_then_a_failing_node_fails_the_workflow_naming_it(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    flaky = Flaky(failures=2)
    await serve_agent(flaky, MEMORY)
    await serve_workflow(
        serve_agent,
        "retrying",
        """
        nodes: [{id: shaky, agent: flaky, retry: {attempts: 3, backoff_s: 0.01}}]
        output: {r: "{{ shaky.output.text }}"}
        """,
    )
    _, data = answer(await client.send("retrying", "go"))
    assert data == {"r": "ok after 3"} and flaky.calls == 3

    flaky.calls, flaky.failures = 0, 10
    text = failure(await client.send("retrying", "go"))
    assert text.startswith("node 'shaky' failed: ") and "call 3 fails" in text and flaky.calls == 3

    # on_error: continue: the dependents run and see the failure.
    await serve_workflow(
        serve_agent,
        "tolerant",
        """
        nodes:
          - {id: shaky, agent: flaky, on_error: continue}
          - {id: after, tool: "tests.agents.workflow_agents:grow", input: "{{ shaky.state }}"}
          - {id: missing, agent: nobody_here, depends_on: [after]}
        """,
    )
    text = failure(await client.send("tolerant", "go", timeout=20))
    assert text.startswith("node 'missing' failed: ") and "nobody_here" in text


async def test_cancel_cancels_every_running_node(serve_agent: ServeAgent, client: MeshClient) -> None:
    holder = Holder()
    holder_service = await serve_agent(holder, MEMORY)
    await serve_workflow(
        serve_agent,
        "holding",
        """
        nodes:
          - {id: one, agent: holder, input: "one"}
          - {id: two, agent: holder, input: "two"}
          - {id: each, map: "{{ ['m1', 'm2'] }}", agent: holder, input: "{{ item }}"}
          - {id: later, agent: holder, depends_on: [one]}
        """,
    )
    sent: list[str | None] = []
    sending = asyncio.create_task(client.send("holding", "go", on_sent=sent.append, timeout=30))
    await wait_until(lambda: len(holder.started) == 4, holder.changed, 10, lambda: f"started {holder.started}")
    assert sent and sent[0] is not None
    canceled = await client.cancel_task("holding", sent[0])
    assert canceled.status.state is TaskState.canceled
    result = await sending
    assert isinstance(result, Task) and result.status.state is TaskState.canceled
    await wait_until(lambda: len(holder.canceled) == 4, holder.changed, 10, lambda: f"canceled {holder.canceled}")
    remote = [r.task for r in holder_service.tasks.records()]
    assert len(remote) == 4 and all(t.status.state is TaskState.canceled for t in remote)


async def test_traces_have_one_span_per_node_parenting_its_delegation(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        await serve_agent(Upper(), MEMORY)
        await serve_workflow(
            serve_agent,
            "traced",
            """
            nodes:
              - {id: a, agent: upper, input: "x"}
              - {id: b, tool: "tests.agents.workflow_agents:grow", input: "{{ a.output.text }}"}
            """,
        )
        answer(await client.send("traced", "go"))
    finally:
        tracing.disable()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    workflow_task, node_a, node_b = spans["task traced"], spans["workflow node a"], spans["workflow node b"]
    assert [n for n in spans if n.startswith("workflow node")] == ["workflow node a", "workflow node b"]
    assert workflow_task.context is not None and node_a.context is not None
    for node in (node_a, node_b):
        assert node.parent is not None and node.parent.span_id == workflow_task.context.span_id
    peer = spans["task upper"]  # the delegation of node a continues its span
    assert peer.parent is not None and peer.context is not None
    assert peer.context.trace_id == node_a.context.trace_id
    assert node_a.attributes is not None and node_a.attributes["workflow.node.kind"] == "agent"

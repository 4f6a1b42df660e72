"""``mesh mcp``'s tool set from agent cards (names, collisions, descriptions, schemas) and its result mapping."""

from __future__ import annotations

import itertools

import mcp_types as types

from gateways.mcp.bridge import call_envelope
from gateways.mcp.results import TaskAnswer
from gateways.mcp.tools import MAX_DESCRIPTION, build_tools, matches, safe_name
from mesh.a2a import AgentCapabilities, AgentCard, AgentSkill
from mesh.e2a import E2AEnvelope, ResponseSequencer


def card(name: str, description: str = "does things", skills: list[AgentSkill] | None = None) -> AgentCard:
    return AgentCard(
        name=name,
        description=description,
        version="1",
        url=f"mqtt://{name}",
        capabilities=AgentCapabilities(),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills or [],
    )


def test_names_are_made_mcp_safe_and_cut() -> None:
    assert safe_name("echo") == "echo"
    assert safe_name("team.echo") == "team_echo"
    assert len(safe_name("a" * 128)) == 64


def test_collisions_are_resolved_whatever_the_order() -> None:
    cards = [card("a.b"), card("a_b"), card("a-b"), card("x" * 70), card("x" * 71)]
    results = {tuple(build_tools(order)) for order in itertools.permutations(cards)}
    assert len(results) == 1  # the same names for every arrival order
    tools = build_tools(cards)
    assert tools["a_b"].agent == "a_b"  # an already safe name keeps it
    dotted = next(t for t in tools.values() if t.agent == "a.b")
    assert dotted.name.startswith("a_b_") and len(dotted.name) == 10
    long_names = sorted(t.name for t in tools.values() if t.agent.startswith("x"))
    assert len(long_names) == 2 and all(len(n) == 64 for n in long_names) and long_names[0] != long_names[1]
    assert all(len(name) <= 64 for name in tools)


def test_description_has_skills_and_examples_and_is_bounded() -> None:
    skill = AgentSkill(id="sum", name="Sum", description="adds", tags=["math"], examples=["1 + 2", "3 + 4"])
    [tool] = build_tools([card("calc", "A calculator.", [skill])]).values()
    assert tool.description.startswith("A calculator.")
    assert "- Sum (sum): adds Examples: '1 + 2'; '3 + 4'" in tool.description
    assert tool.input_schema["properties"]["skill"]["enum"] == ["sum"]
    [big] = build_tools([card("big", "x" * 10_000)]).values()
    assert len(big.description) == MAX_DESCRIPTION


def test_agent_patterns() -> None:
    assert matches("anything", [])
    assert matches("calc", ["ca*", "zz"])
    assert not matches("echo", ["ca*"])


def test_the_envelope_of_a_call_carries_the_message_ids_and_skill() -> None:
    [tool] = build_tools([card("calc")]).values()
    envelope = call_envelope(tool, {"message": "2+2", "context_id": "c1", "task_id": "t1", "skill": "sum"})
    message = envelope.params["message"]
    assert message["parts"] == [{"kind": "text", "text": "2+2"}]
    assert (message["contextId"], message["taskId"], message["metadata"]) == ("c1", "t1", {"skill": "sum"})
    assert envelope.provenance.source_protocol == "mcp" and envelope.method == "message/stream"


def _frames() -> ResponseSequencer:
    return ResponseSequencer(E2AEnvelope(request_id="r1"))


def test_files_become_resource_links_or_embedded_blobs_and_errors_is_error() -> None:
    sequencer = _frames()
    task = {
        "kind": "task",
        "id": "t1",
        "contextId": "c1",
        "status": {"state": "completed"},
        "artifacts": [
            {
                "artifactId": "a1",
                "name": "report",
                "parts": [
                    {"kind": "file", "file": {"uri": "https://example.invalid/r.pdf", "mimeType": "application/pdf"}},
                    {"kind": "file", "file": {"bytes": "aGk=", "name": "hi.txt", "mimeType": "text/plain"}},
                ],
            }
        ],
    }
    result = TaskAnswer("files").result(sequencer.finish("a2a.task", task))
    kinds = [type(block) for block in result.content]
    assert kinds == [types.ResourceLink, types.EmbeddedResource]
    error = TaskAnswer("x").result(_frames().error(-32010, "agent 'x' went away", {"errorType": "AgentGone"}))
    assert error.is_error and error.content[0].text == "agent 'x' went away (AgentGone)"  # type: ignore[union-attr]

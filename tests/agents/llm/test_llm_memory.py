"""Conversation memory across a restart: the context's turns come back from the task journal
(SQLite in the state directory) and become the model's message history."""

from __future__ import annotations

from pydantic_ai.messages import ModelResponse, TextPart

from agents.service import AgentService
from agents.testing import llm_agent
from mesh.a2a import Task, TaskState, get_text_from_message
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.config.statedir import namespace_state_dir
from tests.agents.llm.scripts import scripted, user_texts


def answer(task: object) -> str:
    assert isinstance(task, Task) and task.status.state is TaskState.completed
    assert task.status.message is not None
    return get_text_from_message(task.status.message)


async def test_a_follow_up_after_a_restart_shows_the_model_the_earlier_turns(
    broker_settings: BrokerSettings, namespace: str, client: MeshClient
) -> None:
    before = scripted(["Nice to meet you, Ada."])
    service = AgentService(llm_agent({"model": "test"}, before), broker=broker_settings, namespace=namespace)
    await service.start()
    try:
        first = await client.send("assistant", "I am Ada")
        assert answer(first) == "Nice to meet you, Ada."
        other = await client.send("assistant", "Another conversation")  # not part of the follow-up's
    finally:
        await service.stop()
    assert list(namespace_state_dir(namespace).glob("*.sqlite3")), "the journal is a file of the state dir"

    # A new process would build everything again: a new agent, a new service, the same state dir.
    after = scripted(lambda messages: [" | ".join(user_texts(messages))])
    service = AgentService(llm_agent({"model": "test"}, after), broker=broker_settings, namespace=namespace)
    await service.start()
    try:
        assert isinstance(first, Task) and isinstance(other, Task)
        second = await client.send("assistant", "Who am I?", context_id=first.context_id)
    finally:
        await service.stop()
    assert answer(second) == "I am Ada | Who am I?"
    [history] = after.seen  # type: ignore[attr-defined]
    responses = [p.content for m in history if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, TextPart)]
    assert responses == ["Nice to meet you, Ada."]
    assert "Another conversation" not in user_texts(history)

"""Agents of the EMQX "A2A over MQTT" profile as an LLM agent's peer tools, on the real broker:
the official SDK's responder and a mesh agent serving the profile, reached through the profile's
requester."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agents import AgentSettings
from agents.llm.tools import peer_tool_name
from agents.service import AgentService
from agents.testing import llm_agent
from mesh.a2a import DataPart, Task, TaskState, TaskStatusUpdateEvent, get_text_from_message
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.profile.emqx import EmqxProfile
from tests.agents.llm.scripts import Chunk, call, tool_returns
from tests.agents.service_agents import Echo
from tests.mesh.profile_tests.test_requester import running_sdk_agent


class Asking:
    """A model that calls each echo agent's tool it is offered once, then answers with their
    results (by tool name, as JSON); it records the tools it saw."""

    def __init__(self) -> None:
        self.offered: list[list[str]] = []

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Chunk]:
        self.offered.append(sorted(t.name for t in info.function_tools))
        returned = tool_returns(messages)
        if returned:
            yield json.dumps({p.tool_name: p.content for p in returned}, sort_keys=True)
            return
        peers = [t.name for t in info.function_tools if "echo" in t.name]
        for index, name in enumerate(sorted(peers)):
            yield call(name, {"message": "via the profile"}, f"c{index}", index)


async def serve(
    agent: Any, broker: BrokerSettings, namespace: str, settings: AgentSettings | None = None
) -> AgentService:
    service = AgentService(agent, broker=broker, namespace=namespace, settings=settings)
    await service.start()
    return service


async def test_profile_agents_are_peer_tools_reached_through_the_profile(
    broker_settings: BrokerSettings, namespace: str, client: MeshClient
) -> None:
    org = f"t{uuid.uuid4().hex[:10]}"
    sdk_name, mesh_name = f"{org}/ai/sdk-echo", f"{org}/ai/echo"
    profile_only, everything = Asking(), Asking()
    services: list[AgentService] = []
    async with running_sdk_agent(broker_settings, org) as sdk:
        try:
            # A mesh agent serving the profile too: "echo" on the mesh, org/ai/echo on the profile.
            profile = AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=org, unit="ai"))
            services.append(await serve(Echo(), broker_settings, namespace, profile))
            for name, model, peers in (("profiled", profile_only, [f"{org}/ai/*"]), ("all", everything, ["*"])):
                agent = llm_agent({"model": "test", "peers": peers}, FunctionModel(stream_function=model), name=name)
                services.append(service := await serve(agent, broker_settings, namespace))
                registry = await service.delegator.registry.get()
                for peer in (sdk_name, mesh_name, "echo"):
                    await registry.wait_for(peer, 5)

            items = [item async for item in client.stream("profiled", "ask them")]
            everyone = await client.send("all", "ask everyone")
        finally:
            for service in reversed(services):
                await service.stop()

    # Only the profile's agents are allowed: both are tools, named as model APIs accept.
    sdk_tool, mesh_tool = peer_tool_name(sdk_name), peer_tool_name(mesh_name)
    assert (sdk_tool, mesh_tool) == (f"{org}_ai_sdk-echo", f"{org}_ai_echo")
    assert profile_only.offered[0] == sorted(
        ["ask_user", "list_artifacts", "load_artifact", "save_artifact", sdk_tool, mesh_tool]
    )
    final = items[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.completed
    assert final.status.message is not None
    answers = json.loads(get_text_from_message(final.status.message))
    assert answers[sdk_tool]["agent"] == sdk_name and answers[sdk_tool]["text"] == "sdk: via the profile"
    assert answers[mesh_tool]["agent"] == mesh_name and answers[mesh_tool]["text"] == "via the profile"
    assert [r.text for r in sdk.ran] == ["via the profile", "via the profile"]  # (the second: "all"'s call)
    # On the wire: each call and result, named by its tool, the result by its agent.
    calls = [
        p.data
        for i in items
        if isinstance(i, TaskStatusUpdateEvent) and i.status.message is not None
        for p in i.status.message.parts
        if isinstance(p, DataPart) and p.data["type"] == "tool_call"
    ]
    assert sorted(c["function_name"] for c in calls) == sorted([sdk_tool, mesh_tool])

    # With every agent allowed, the mesh agent serving the profile is one tool (over the mesh).
    assert [t for t in everything.offered[0] if "echo" in t] == ["echo", sdk_tool]
    assert isinstance(everyone, Task) and everyone.status.state is TaskState.completed
    assert everyone.status.message is not None
    both = json.loads(get_text_from_message(everyone.status.message))
    assert both["echo"]["text"] == "via the profile" and both[sdk_tool]["text"] == "sdk: via the profile"

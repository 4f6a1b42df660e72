"""The issue's "Done when": ``mesh run`` of the YAML, ``mesh send assistant ... --stream``."""

from __future__ import annotations

import json
import signal
import sys
import textwrap
from pathlib import Path

from mesh.brokertools.localbroker import free_port
from tests.agents.llm.fake_openai import FakeOpenAI, Turn
from tests.mesh.cli_process import mesh, start_mesh

HERE = Path(__file__).parent
# Each command imports pydantic-ai and its providers: seconds of CPU, many more on a loaded machine.
SLOW_START_S = 120.0


def turn(body: dict[str, object]) -> Turn:
    """Ask the weather agent, then answer with what it said; a follow-up recalls the first turn."""
    messages = body["messages"]
    assert isinstance(messages, list)
    users = [m["content"] for m in messages if m["role"] == "user"]
    if messages[-1]["role"] == "tool":
        said = json.loads(messages[-1]["content"])["text"]
        return Turn(text=f"The weather agent says: {said}")
    if len(users) > 1:
        return Turn(text=f"Earlier you asked: {users[0]}")
    return Turn(tool_calls=[("weather", {"message": "Paris"})])


async def test_mesh_run_and_send_stream(broker_url: str, namespace: str, tmp_path: Path) -> None:
    (tmp_path / "mytools.py").write_text(
        'def word_count(text: str) -> int:\n    """Count the words of a text."""\n    return len(text.split())\n'
    )
    async with FakeOpenAI(turn) as server:
        config = tmp_path / "mesh.yaml"
        config.write_text(
            textwrap.dedent(
                f"""
                namespace: {namespace}
                broker: {broker_url}
                agents:
                  - class: tests.agents.service_agents:Echo
                    name: weather
                  - class: agents.builtin.calculator:CalculatorAgent
                  - name: assistant
                    description: Answers questions with the help of the mesh.
                    llm:
                      model: openai:gpt-4.1-mini
                      base_url: {server.base_url}
                      api_key_env: FAKE_OPENAI_KEY
                      instructions: |
                        You answer briefly. Ask the weather agent about weather.
                      peers: [weather, "calc*"]
                      tools:
                        - python: mytools:word_count
                        - mcp: {{command: [{sys.executable}, {HERE / "mcp_server.py"}]}}
                      settings: {{temperature: 0.2, max_tokens: 2000}}
                      max_model_calls: 10
                      max_tool_calls: 20
                """
            )
        )
        run = await start_mesh("run", str(config), FAKE_OPENAI_KEY="sk-fake")
        try:
            await run.wait_for_line("agent assistant", timeout=SLOW_START_S)
            env = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
            sent = await mesh("send", "assistant", "Weather in Paris?", "--stream", timeout=SLOW_START_S, **env)
            assert sent.code == 0, sent.stderr
            lines = sent.stdout.splitlines()
            assert lines[0].startswith("[task ")
            call = lines.index(
                '[working] {"type":"tool_call","function_name":"weather","arguments":{"message":"Paris"}}'
            )
            result = next(i for i, line in enumerate(lines) if '"type":"tool_result"' in line)
            assert call < result < len(lines) - 2
            assert lines[-2:] == ["[completed] The weather agent says: Paris", f"{lines[0]} completed"]
            streamed = "".join(line.removeprefix("[working] ") for line in lines[result + 1 : -2])
            assert streamed.replace(" ", "") == "Theweatheragentsays:Paris"  # each line is right-stripped
            tools = {t["function"]["name"] for t in server.requests[0]["tools"]}
            assert {"weather", "calculator", "word_count", "shout", "ask_user"} <= tools

            first = await mesh("send", "assistant", "Weather in Paris?", "--json", timeout=SLOW_START_S, **env)
            context = json.loads(first.stdout)["contextId"]
            again = await mesh(
                "send", "assistant", "What did I ask?", "--context", context, timeout=SLOW_START_S, **env
            )
            assert again.code == 0 and again.stdout.strip() == "Earlier you asked: Weather in Paris?"
        finally:
            code = await run.stop(signal.SIGTERM)
        assert code == 0, run.output
    assert "sk-fake" not in run.output


async def test_mesh_up_with_a_model_adds_an_assistant_with_every_agent_as_a_tool(
    broker_url: str, namespace: str, tmp_path: Path
) -> None:
    script = [Turn(tool_calls=[("calculator", {"message": "6 * 7"})]), Turn(text="It is 42.")]
    async with FakeOpenAI(script) as server:
        # The secured default: mesh up starts its own broker, the assistant gets an identity of its
        # own like every agent, and mesh send finds the broker and the CLI's credentials in the state dir.
        env = {
            "MESH_STATE_DIR": str(tmp_path / "state"),
            "MESH_HTTP_PORT": str(free_port()),
            "MESH_MODEL": "openai-chat:fake-model",
            # The provider's own variables: the fake server on loopback, a dummy key.
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-fake",
        }
        up = await start_mesh("up", "-n", namespace, **env)
        try:
            await up.wait_for_line("mesh up: ready", stream="stdout", timeout=SLOW_START_S)
            sent = await mesh("send", "assistant", "What is 6 * 7?", "-n", namespace, timeout=SLOW_START_S, **env)
            assert (sent.code, sent.stdout) == (0, "It is 42.\n"), sent
        finally:
            assert await up.stop() == 0, up.output
    tools = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert {"echo", "calculator", "countdown", "orchestrator"} <= tools and "assistant" not in tools
    tool_message = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
    assert "42" in tool_message["content"]


async def test_mesh_up_help_names_the_model_option() -> None:
    helped = await mesh("up", "--help", timeout=SLOW_START_S)
    assert "--model MODEL" in helped.stdout and "MESH_MODEL" in helped.stdout

"""The ``llm:`` key of the mesh YAML: the issue's shape, mistakes named with a fix, no extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agents.llm import LlmAgent
from agents.llm.tools import PeerToolset
from agents.service import AgentService
from mesh.broker import BrokerSettings
from mesh.config import load_config
from mesh.config.sections import build_components
from mesh.errors import ConfigError

ISSUE_YAML = """\
namespace: mesh
agents:
  - name: assistant
    description: Answers questions with the help of the mesh.
    llm:
      model: openai:gpt-4.1-mini
      base_url: http://127.0.0.1:11434/v1
      api_key_env: TEST_LLM_KEY
      instructions: |
        You answer briefly. Ask the weather agent about weather.
      peers: [weather, "calc*"]
      tools:
        - python: mytools:word_count
        - mcp: {command: [uvx, mcp-server-fetch], env: {}}
        - mcp: {url: "http://127.0.0.1:8000/mcp", headers: {}}
      output: {type: object, properties: {answer: {type: string}}}
      settings: {temperature: 0.2, max_tokens: 2000}
      max_model_calls: 10
      max_tool_calls: 20
"""


def build(tmp_path: Path, text: str) -> LlmAgent:
    path = tmp_path / "mesh.yaml"
    path.write_text(text)
    [service] = build_components(load_config(path), BrokerSettings())
    assert isinstance(service, AgentService) and isinstance(service.agent, LlmAgent)
    return service.agent


def test_the_issue_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test")
    (tmp_path / "mytools.py").write_text('def word_count(text: str) -> int:\n    """Count."""\n    return 1\n')
    agent = build(tmp_path, ISSUE_YAML)
    config = agent.llm
    assert agent.name == "assistant" and agent.uses_discovery
    assert config.peers == ("weather", "calc*") and config.python_tools == ("mytools:word_count",)
    assert [s.command for s in config.mcp_servers] == [("uvx", "mcp-server-fetch"), ()]
    assert config.mcp_servers[1].url == "http://127.0.0.1:8000/mcp"
    assert config.settings == {"temperature": 0.2, "max_tokens": 2000} and config.max_tool_calls == 20
    assert any(isinstance(getattr(t, "wrapped", t), PeerToolset) for t in agent.engine.toolsets)
    assert "sk-test" not in repr(agent.engine.model)


def entry(llm: str) -> str:
    return f"namespace: mesh\nagents:\n  - name: a\n    llm: {llm}\n"


@pytest.mark.parametrize(
    ("llm", "message"),
    [
        ("{model: test, instrutions: hi}", "agents[0].llm.instrutions: unknown key 'instrutions'; did you mean"),
        ("{instructions: hi}", "agents[0].llm.model: required key is missing"),
        ("{model: test, tools: [{pyhton: a:b}]}", "agents[0].llm.tools[0].pyhton: unknown key 'pyhton'; did you mean"),
        ("{model: test, tools: [{python: nocolon}]}", "is not of the form 'module:function'"),
        ("{model: test, tools: [{mcp: {command: [x], url: 'http://h'}}]}", "exactly one of 'command' or 'url'"),
        ("{model: test, tools: [{mcp: {comand: [x]}}]}", "unknown key 'comand'; did you mean 'command'?"),
        ("{model: test, max_model_calls: 0}", "agents[0].llm.max_model_calls"),
        ("{model: test, tools: [{python: no_such_module_here:f}]}", "cannot import 'no_such_module_here'"),
        ("{model: 'nosuchprovider:m'}", "model 'nosuchprovider:m'"),
        ("{model: 'openai:gpt-x', api_key_env: NOT_SET_ANYWHERE_42}", "NOT_SET_ANYWHERE_42 (api_key_env) is not set"),
        ("[model]", "agents[0].llm: expected a mapping"),
        ('{model: test, tools: [{mcp: {command: "x \'y"}}]}', "mcp.command: cannot split"),
    ],
)
def test_mistakes_name_the_key_and_the_fix(tmp_path: Path, llm: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        build(tmp_path, entry(llm))
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("model", "variable"), [("openai:gpt-4o", "OPENAI_API_KEY"), ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY")]
)
def test_a_missing_key_names_the_variable_and_model_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, variable: str
) -> None:
    """Not pydantic-ai's advice for its Python API, nor an extra to install: it is installed."""
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(ConfigError) as error:
        build(tmp_path, entry(f"{{model: '{model}'}}"))
    message = str(error.value)
    assert f"model '{model}': no API key; set {variable} (export {variable}=<your key>" in message
    assert "--model demo (mesh up) or model: demo (a scripted demo model, no provider)" in message
    for advice in ("Agent('test')", "Provider(api_key=", "pip install", "https://"):
        assert advice not in message, message


def test_an_unknown_model_id_suggests_model_demo(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        build(tmp_path, entry("{model: 'nosuchprovider:m'}"))
    message = str(error.value)
    assert "model 'nosuchprovider:m': unknown model id; write provider:model" in message
    assert "model: demo" in message and "pip install" not in message


def test_model_demo_needs_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    agent = build(tmp_path, entry("{model: demo, peers: ['*']}"))
    assert agent.llm.model == "demo" and agent.engine.model is not None


def test_class_and_llm_together_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="either 'class:' or 'llm:'"):
        build(tmp_path, entry("{model: test}") + "    class: agents.builtin.echo:EchoAgent\n")


def test_without_the_extra_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents.llm.agent", None)  # as if pydantic-ai were not installed
    with pytest.raises(ConfigError) as error:
        build(tmp_path, entry("{model: test}"))
    assert "pip install 'mqtt-agent-mesh[llm]'" in str(error.value)


def test_the_core_imports_no_engine() -> None:
    code = (
        "import sys, agents, agents.config, agents.llm, agents.testing, mesh.cli.run_commands\n"
        "assert 'pydantic_ai' not in sys.modules, 'the core imported the LLM engine'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr

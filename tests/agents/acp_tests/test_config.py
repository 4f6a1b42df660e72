"""The ``acp:`` key of the mesh YAML: the command, its directory and the client policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.acp import AcpAgent, ClientPolicy
from agents.service import AgentService
from mesh.broker import BrokerSettings
from mesh.config import load_config
from mesh.config.sections import build_components
from mesh.errors import ConfigError


def build(tmp_path: Path, agents_yaml: str) -> AcpAgent:
    path = tmp_path / "mesh.yaml"
    path.write_text(f"namespace: mesh\nagents:\n{agents_yaml}")
    [service] = build_components(load_config(path), BrokerSettings())
    assert isinstance(service, AgentService) and isinstance(service.agent, AcpAgent)
    return service.agent


def test_the_issue_shape_and_the_default_policy(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    agent = build(
        tmp_path,
        "  - name: coder\n    acp:\n      command: [my-acp-agent, --stdio]\n      cwd: project/\n      env: {A: 1}\n",
    )
    assert agent.name == "coder" and agent.command.argv == ("my-acp-agent", "--stdio")
    assert agent.command.cwd == tmp_path.resolve() / "project" and agent.command.env == {"A": "1"}
    assert agent.policy == ClientPolicy(directory=tmp_path.resolve() / "project", read=True, write=False)
    assert agent.supervision.ping_interval_s == 0  # ACP has no ping


def test_a_policy_with_writes_in_a_directory_of_its_own(tmp_path: Path) -> None:
    agent = build(tmp_path, "  - name: c\n    acp:\n      command: x\n      policy: {directory: src, write: true}\n")
    assert agent.policy == ClientPolicy(directory=tmp_path.resolve() / "src", read=True, write=True)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("    acp: [x]\n", "agents[0].acp: expected a mapping"),
        ("    acp: {command: x, polcy: {}}\n", "agents[0].acp.polcy: unknown key 'polcy'; did you mean 'policy'?"),
        ("    acp: {command: x, policy: {write: yes please}}\n", "agents[0].acp.policy.write: expected true or false"),
        ("    acp: {command: x, policy: {terminal: 1}}\n", "agents[0].acp.policy.terminal: expected true or false"),
        ("    acp: {command: x}\n    class: a:B\n", "agents[0].acp: an entry has either 'class:' or 'acp:'"),
        ("    acp: {command: []}\n", "agents[0].acp.command: expected a non-empty list"),
    ],
)
def test_mistakes_name_the_key(tmp_path: Path, entry: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        build(tmp_path, "  - name: c\n" + entry)
    assert message in str(error.value)

"""The ``worker:`` key of the mesh YAML, down to a worker agent answering on the real broker."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agents.a2e import WorkerAgent
from agents.service import AgentService
from mesh.a2a import Task, TaskState, get_text_from_message
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.config import load_config
from mesh.config.sections import build_components
from mesh.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parent.parents[2] / "agents" / "a2e" / "examples"


def build(tmp_path: Path, agents_yaml: str, namespace: str = "mesh") -> list[AgentService]:
    (tmp_path / "workers").mkdir(exist_ok=True)
    path = tmp_path / "mesh.yaml"
    path.write_text(f"namespace: {namespace}\nagents:\n{agents_yaml}")
    components = build_components(load_config(path), BrokerSettings())
    assert all(isinstance(c, AgentService) for c in components)
    return components  # type: ignore[return-value]


def test_the_issue_shape(tmp_path: Path) -> None:
    [service] = build(
        tmp_path,
        """
  - name: shout
    worker:
      command: [node, shout.js]
      cwd: workers/
      env: {SHOUT_LEVEL: "2"}
    config: {call_retries: 5, ping_interval_s: 2}
""",
    )
    agent = service.agent
    assert isinstance(agent, WorkerAgent) and agent.name == "shout"
    assert agent.command.argv == ("node", "shout.js")
    assert agent.command.cwd == tmp_path.resolve() / "workers"
    assert agent.command.env == {"SHOUT_LEVEL": "2"}
    assert agent.call_retries == 5 and agent.supervision.ping_interval_s == 2


def test_a_command_string_is_split_as_a_shell_would(tmp_path: Path) -> None:
    [service] = build(tmp_path, "  - name: w\n    worker: {command: \"python3 -u 'my worker.py' --level 2\"}\n")
    assert isinstance(service.agent, WorkerAgent)
    assert service.agent.command.argv == ("python3", "-u", "my worker.py", "--level", "2")
    assert service.agent.command.cwd == tmp_path.resolve()  # no cwd: the YAML file's directory


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("class: agents.builtin.echo:EchoAgent\n    worker: {command: [x]}", "either 'class:' or 'worker:', not both"),
        ("worker: {command: []}", "agents[0].worker.command: expected a non-empty list of strings"),
        ("worker: [node, x.js]", "agents[0].worker: expected a mapping"),
        ("worker: {command: [x], comand: [y]}", "agents[0].worker.comand: unknown key"),
        ("worker: {command: [x], env: {A: [1]}}", "agents[0].worker.env.A: expected a string"),
        ('worker: {command: "x \'y"}', "cannot split"),
    ],
)
def test_mistakes_name_the_key(tmp_path: Path, entry: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build(tmp_path, f"  - name: w\n    {entry}\n")
    assert message in str(caught.value)


def test_a_worker_entry_needs_a_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"add 'name: my-agent' to the entry"):
        build(tmp_path, "  - worker: {command: [x]}\n")


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
async def test_a_yaml_worker_serves_on_the_mesh(
    tmp_path: Path, broker_settings: BrokerSettings, namespace: str, client: MeshClient
) -> None:
    path = tmp_path / "mesh.yaml"
    path.write_text(
        f"namespace: {namespace}\nagents:\n  - name: shout\n    worker:\n"
        f"      command: [node, shout.js]\n      cwd: {EXAMPLES}\n"  # an absolute cwd is kept as it is
        '      env: {SHOUT_LEVEL: "3"}\n'
    )
    [service] = build_components(load_config(path), broker_settings)
    await service.start()
    try:
        task = await client.send("shout", "hey", metadata={"skill": "shout"})
        assert isinstance(task, Task) and task.status.state is TaskState.completed
        assert task.status.message is not None and get_text_from_message(task.status.message) == "HEY!!!"
    finally:
        await service.stop()


def test_an_unknown_option_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        build(tmp_path, "  - name: w\n    worker: {command: [x]}\n    config: {max_restart: 3}\n")
    assert "unknown option(s) max_restart" in str(caught.value) and "max_restarts" in str(caught.value)

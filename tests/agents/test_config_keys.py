"""An agent's ``config:`` keys are checked against its constructor: an unknown one is a ConfigError
naming the file, the agent, the key and a did-you-mean; a constructor keeping ``**kwargs`` for
itself still takes anything."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from agents.agent import Agent, UnknownOptionsError, agent_options
from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from agents.config import parse_agent_entry
from agents.context import TaskContext
from mesh.a2a import Message
from mesh.broker import BrokerSettings
from mesh.component import BuildContext
from mesh.errors import ConfigError
from tests.mesh.cli_process import mesh

HERE = "tests.agents.test_config_keys"


class Loud(EchoAgent):
    """Two levels of options passed on: its own, then EchoAgent's."""

    name = "loud"

    def __init__(self, *, volume: int = 11, **options: Any) -> None:
        super().__init__(**options)
        self.volume = volume


class Bag(Agent):
    """Keeps every option for itself: it truly accepts anything."""

    name = "bag"

    def __init__(self, *, name: str | None = None, **settings: Any) -> None:
        super().__init__(name=name)
        self.settings = settings

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        return "ok"


@pytest.fixture
def ctx() -> BuildContext:
    return BuildContext(broker=BrokerSettings(), namespace="ns", source=Path("agents.yaml"), section="agents")


def error_of(entry: dict[str, Any], ctx: BuildContext) -> str:
    with pytest.raises(ConfigError) as info:
        parse_agent_entry(entry, ctx, 0)
    return str(info.value)


def test_options_are_read_from_the_constructors() -> None:
    assert agent_options(EchoAgent) == ["prefix"]
    assert agent_options(CountdownAgent) == ["interval_s", "max_start"]
    assert agent_options(Loud) == ["volume", "prefix"]  # its own, then those it passes on to
    assert agent_options(Bag) == []


def test_an_unknown_key_names_file_agent_key_and_the_close_one(ctx: BuildContext) -> None:
    assert error_of({"class": "agents.builtin.echo:EchoAgent", "config": {"prefx": "> "}}, ctx) == (
        "agents.yaml: agents[0].config.prefx: unknown option 'prefx' of agent 'echo' "
        "(agents.builtin.echo:EchoAgent); did you mean 'prefix'? EchoAgent's options are: prefix"
    )
    renamed = {"class": "agents.builtin.countdown:CountdownAgent", "name": "tminus", "config": {"interval": 1}}
    assert error_of(renamed, ctx) == (
        "agents.yaml: agents[0].config.interval: unknown option 'interval' of agent 'tminus' "
        "(agents.builtin.countdown:CountdownAgent); did you mean 'interval_s'? "
        "CountdownAgent's options are: interval_s, max_start"
    )
    far = error_of({"class": f"{HERE}:Loud", "config": {"volume": 3, "colour": "red"}}, ctx)
    assert far.startswith("agents.yaml: agents[0].config.colour: unknown option 'colour' of agent 'loud'")
    assert "did you mean" not in far and far.endswith("Loud's options are: volume, prefix")


def test_declared_options_along_the_chain_are_taken(ctx: BuildContext) -> None:
    agent = parse_agent_entry({"class": f"{HERE}:Loud", "config": {"volume": 3, "prefix": "! "}}, ctx, 0).agent
    assert isinstance(agent, Loud) and (agent.volume, agent.prefix) == (3, "! ")


def test_a_constructor_keeping_its_kwargs_takes_anything(ctx: BuildContext) -> None:
    agent = parse_agent_entry({"class": f"{HERE}:Bag", "config": {"anything": 1, "goes": [2]}}, ctx, 0).agent
    assert isinstance(agent, Bag) and agent.settings == {"anything": 1, "goes": [2]}


def test_from_python_too() -> None:
    with pytest.raises(UnknownOptionsError, match="EchoAgent takes no option 'prefx'; its options are: prefix"):
        EchoAgent(prefx="> ")
    assert isinstance(UnknownOptionsError(EchoAgent, ["x"]), TypeError)


async def test_mesh_run_refuses_an_unknown_key(tmp_path: Path) -> None:
    config = tmp_path / "agents.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            agents:
              - class: agents.builtin.echo:EchoAgent
                config: {prefx: "> "}
            """
        )
    )
    run = await mesh("run", str(config), "--broker", "mqtt://127.0.0.1:9")  # refused before connecting
    assert run.code == 2 and "Traceback" not in run.stderr
    assert (
        f"{config}: agents[0].config.prefx: unknown option 'prefx' of agent 'echo' "
        "(agents.builtin.echo:EchoAgent); did you mean 'prefix'?" in run.stderr
    )

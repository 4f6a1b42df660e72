"""The ``agents:`` section: entries -> agent instances and their settings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from agents.config import AGENT_KEYS, AgentSpec, build_agents, parse_agent_entry
from agents.service import AgentService
from agents.settings import AgentSettings, DelegationSettings
from mesh.broker import BrokerSettings
from mesh.component import BuildContext, Component
from mesh.config import load_config
from mesh.config.sections import build_components
from mesh.errors import ConfigError
from mesh.limits import MessageLimits
from tests.agents.sample_agents import Flexible, Greeter, Repeater

SAMPLES = "tests.agents.sample_agents"
SOURCE = Path("agents.yaml")


@pytest.fixture
def ctx() -> BuildContext:
    return BuildContext(broker=BrokerSettings(), namespace="mesh", source=SOURCE, section="agents")


def parse(entry: Any, ctx: BuildContext, index: int = 0) -> AgentSpec:
    return parse_agent_entry(entry, ctx, index)


def error_of(entry: Any, ctx: BuildContext, index: int = 0) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_agent_entry(entry, ctx, index)
    return str(caught.value)


def test_minimal_entry(ctx: BuildContext) -> None:
    spec = parse({"class": f"{SAMPLES}:Greeter"}, ctx)
    assert type(spec.agent) is Greeter
    assert (spec.agent.name, spec.agent.description, spec.agent.version) == ("greeter", "Says hello", "1.0.0")
    assert spec.agent.greeting == "hello"
    assert spec.settings == AgentSettings()


def test_full_entry(ctx: BuildContext) -> None:
    spec = parse(
        {
            "class": f"{SAMPLES}:Greeter",
            "name": "hi",
            "description": "Greets",
            "version": "2.0",
            "config": {"greeting": "hey"},
            "card_interval_s": 5,
            "shared_subscription": True,
            "limits": {"max_parts": 50},
            "delegation": {"max_call_depth": 5, "allow": ["math-*"]},
        },
        ctx,
    )
    agent = spec.agent
    assert isinstance(agent, Greeter)
    assert (agent.name, agent.description, agent.version, agent.greeting) == ("hi", "Greets", "2.0", "hey")
    assert spec.settings.card_interval_s == 5.0 and spec.settings.shared_subscription is True
    assert spec.settings.limits == MessageLimits(max_parts=50)
    assert spec.settings.delegation == DelegationSettings(max_call_depth=5, allow=("math-*",))


def test_the_base_constructor_takes_no_options(ctx: BuildContext) -> None:
    assert error_of({"class": f" {SAMPLES} : Flexible ", "config": {"model": "m"}}, ctx) == (
        "agents.yaml: agents[0].config.model: unknown option 'model' of agent 'flexible' "
        "(tests.agents.sample_agents:Flexible); Flexible's options are: none"
    )
    assert isinstance(parse({"class": f"{SAMPLES}:Flexible"}, ctx).agent, Flexible)


def test_multi_agent_file_with_env_coercion(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(
        "namespace: team\n"
        "agents:\n"
        f"  - class: {SAMPLES}:Greeter\n"
        "    card_interval_s: ${INTERVAL:-5}\n"
        "    limits: {max_parts: '${MAX_PARTS}'}\n"
        "    delegation: {allow_cycles: '${CYCLES:-false}'}\n"
        f"  - class: {SAMPLES}:Greeter\n"
        "    name: ${SECOND_NAME}\n"
        "    config: {greeting: 'hi ${USER_NAME:-you}'}\n"
        f"  - class: {SAMPLES}:Flexible\n"
    )
    config = load_config(path, environ={"MAX_PARTS": "50", "SECOND_NAME": "greeter-2"})
    context = BuildContext(broker=BrokerSettings(), namespace=config.namespace, source=path, section="agents")
    specs = [parse(entry, context, index) for index, entry in enumerate(config.sections["agents"])]
    assert [spec.agent.name for spec in specs] == ["greeter", "greeter-2", "flexible"]
    first = specs[0].settings
    assert first.card_interval_s == 5.0 and first.limits.max_parts == 50 and first.delegation.allow_cycles is False
    assert isinstance(specs[1].agent, Greeter) and specs[1].agent.greeting == "hi you"
    assert specs[2].settings == AgentSettings()


def test_entry_keys_are_the_card_keys_and_settings_fields() -> None:
    assert AGENT_KEYS == (
        "class",
        "worker",
        "acp",
        "llm",
        "workflow",
        "remote",
        "name",
        "description",
        "version",
        "config",
        "trust",
    )
    assert not set(AGENT_KEYS) & set(AgentSettings.model_fields)


# ---------------------------------------------------------------- the entry and its class


def test_entry_not_a_mapping(ctx: BuildContext) -> None:
    assert error_of("echo", ctx, 3) == (
        "agents.yaml: agents[3]: expected a mapping, got 'echo'; "
        "write the entry as a mapping with at least 'class: agents.builtin.echo:EchoAgent'"
    )


def test_class_missing(ctx: BuildContext) -> None:
    assert error_of({"name": "x"}, ctx) == (
        "agents.yaml: agents[0].class: required key is missing; "
        "add it: name the agent class as 'module:Class', e.g. 'class: agents.builtin.echo:EchoAgent'"
    )


@pytest.mark.parametrize("value", ["tests.agents.sample_agents.Greeter", ":Greeter", f"{SAMPLES}:", 42])
def test_class_of_the_wrong_form(ctx: BuildContext, value: Any) -> None:
    assert error_of({"class": value}, ctx) == (
        f"agents.yaml: agents[0].class: {value!r} is not of the form 'module:Class'; "
        "name the agent class as 'module:Class', e.g. 'class: agents.builtin.echo:EchoAgent'"
    )


def test_module_not_importable(ctx: BuildContext) -> None:
    assert error_of({"class": "tests.agents.no_such_module:Echo"}, ctx) == (
        "agents.yaml: agents[0].class: cannot import module 'tests.agents.no_such_module' "
        "(No module named 'tests.agents.no_such_module'); check the spelling, put its file beside the "
        f"config file ({Path('agents.yaml').resolve().parent}), install the package that provides it, "
        "or add its directory to PYTHONPATH"
    )


def test_a_module_beside_the_config_file_is_found_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "beside_config_agent.py").write_text(
        "from agents import Agent\n\nclass Beside(Agent):\n    name = 'beside'\n\n"
        "    async def handle(self, message, ctx):\n        return 'here'\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the test leaves sys.path as it found it
    context = BuildContext(broker=BrokerSettings(), namespace="ns", source=project / "agents.yaml", section="agents")
    spec = parse({"class": "beside_config_agent:Beside"}, context)
    assert spec.agent.name == "beside"


def test_module_whose_dependency_is_missing(ctx: BuildContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "needs_dep_agent.py").write_text("import some_missing_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert error_of({"class": "needs_dep_agent:Agent"}, ctx) == (
        "agents.yaml: agents[0].class: module 'needs_dep_agent' failed to import: "
        "No module named 'some_missing_dependency_xyz'; install the package that provides "
        "'some_missing_dependency_xyz' (pip install some_missing_dependency_xyz)"
    )


def test_module_with_a_broken_import(ctx: BuildContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "old_api_agent.py").write_text("from json import no_such_function\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    message = error_of({"class": "old_api_agent:Agent"}, ctx)
    assert message.startswith(
        "agents.yaml: agents[0].class: module 'old_api_agent' failed to import: "
        "cannot import name 'no_such_function' from 'json'"
    )
    assert message.endswith("; fix that import, or install versions of its dependencies that provide what it imports")


def test_class_missing_from_module_suggests_a_name(ctx: BuildContext) -> None:
    assert error_of({"class": f"{SAMPLES}:Greeterr"}, ctx) == (
        f"agents.yaml: agents[0].class: module '{SAMPLES}' has no attribute 'Greeterr'; "
        f"did you mean {SAMPLES}:Greeter? check the class name after the ':'"
    )


@pytest.mark.parametrize(
    ("target", "what"),
    [("NotAnAgent", "class NotAnAgent"), ("make_agent", "a function"), ("Agent", "the base class itself")],
)
def test_not_an_agent_subclass(ctx: BuildContext, target: str, what: str) -> None:
    assert error_of({"class": f"{SAMPLES}:{target}"}, ctx) == (
        f"agents.yaml: agents[0].class: '{SAMPLES}:{target}' is {what}, not a subclass of agents.Agent; "
        "point it at your own subclass of agents.Agent (class MyAgent(Agent): ...)"
    )


def test_unknown_entry_key_suggests(ctx: BuildContext) -> None:
    message = error_of({"class": f"{SAMPLES}:Greeter", "card_interval": 5}, ctx)
    assert message.startswith(
        "agents.yaml: agents[0].card_interval: unknown key 'card_interval'; did you mean 'card_interval_s'? "
        "allowed keys: class, worker, acp, llm, workflow, remote, name, description, version, config, trust, "
        "card_interval_s, "
    )
    assert message.endswith(", limits, delegation")


# ---------------------------------------------------------------- name, config, constructor


def test_invalid_name_is_reported_under_name(ctx: BuildContext) -> None:
    assert error_of({"class": f"{SAMPLES}:Greeter", "name": "my agent"}, ctx) == (
        "agents.yaml: agents[0].name: invalid agent name 'my agent'; "
        "use 1-128 characters from A-Z a-z 0-9 _ . - (no spaces or '/')"
    )


def test_class_without_a_name_needs_one_in_the_entry(ctx: BuildContext) -> None:
    assert error_of({"class": f"{SAMPLES}:Nameless"}, ctx) == (
        "agents.yaml: agents[0].class: no valid agent name: the class attribute Nameless.name is ''; "
        "add 'name: my-agent' to the entry (use 1-128 characters from A-Z a-z 0-9 _ . - (no spaces or '/'))"
    )
    assert parse({"class": f"{SAMPLES}:Nameless", "name": "named"}, ctx).agent.name == "named"


def test_card_fields_must_be_strings(ctx: BuildContext) -> None:
    assert error_of({"class": f"{SAMPLES}:Greeter", "version": 1.0}, ctx) == (
        "agents.yaml: agents[0].version: expected a string, got 1.0; quote it: version: '1.0'"
    )


def test_config_not_a_mapping(ctx: BuildContext) -> None:
    assert error_of({"class": f"{SAMPLES}:Greeter", "config": ["hi"]}, ctx) == (
        "agents.yaml: agents[0].config: expected a mapping of constructor options, got ['hi']; "
        "write it as config: {option: value, ...}"
    )


@pytest.mark.parametrize(
    ("key", "problem", "fix"),
    [
        ("name", "'name' is not a constructor option here", "move it out of config: write 'name:' at the entry level"),
        (
            "max-len",
            "option name 'max-len' is not a Python identifier",
            "option names become keyword arguments: use letters, digits and '_'",
        ),
    ],
)
def test_bad_config_keys(ctx: BuildContext, key: str, problem: str, fix: str) -> None:
    message = error_of({"class": f"{SAMPLES}:Flexible", "config": {key: "x"}}, ctx)
    assert message == f"agents.yaml: agents[0].config.{key}: {problem}; {fix}"


def test_unknown_constructor_option(ctx: BuildContext) -> None:
    assert error_of({"class": f"{SAMPLES}:Greeter", "config": {"greting": "hi"}}, ctx) == (
        "agents.yaml: agents[0].config.greting: unknown option 'greting' of agent 'greeter' "
        "(tests.agents.sample_agents:Greeter); did you mean 'greeting'? Greeter's options are: greeting"
    )


def test_constructor_type_error(ctx: BuildContext) -> None:
    assert error_of({"class": f"{SAMPLES}:Repeater", "config": {"count": "3"}}, ctx) == (
        "agents.yaml: agents[0].config: Repeater(count=...) raised TypeError: can't multiply sequence by non-int "
        "of type 'str'; check the options against the class's constructor"
    )
    assert isinstance(parse({"class": f"{SAMPLES}:Repeater", "config": {"count": 3}}, ctx).agent, Repeater)


def test_constructor_value_error(ctx: BuildContext) -> None:
    assert error_of({"class": f"{SAMPLES}:Greeter", "config": {"greeting": ""}}, ctx) == (
        "agents.yaml: agents[0].config: Greeter refused its options: greeting must not be empty; "
        "give it some text; correct the value it names"
    )


# ---------------------------------------------------------------- settings


def test_settings_errors_have_full_key_paths(ctx: BuildContext) -> None:
    message = error_of(
        {"class": f"{SAMPLES}:Greeter", "limits": {"max_partz": 5, "max_parts": -1}, "delegation": 5}, ctx, 1
    )
    assert message.splitlines() == [
        "agents.yaml: agents[1].limits.max_parts: input should be greater than 0, got -1; "
        "set max_parts to a valid value (parts in one message)",
        "agents.yaml: agents[1].limits.max_partz: unknown key 'max_partz'; did you mean 'max_parts'? "
        "allowed keys: max_message_bytes, max_parts, max_text_part_bytes, max_data_part_bytes, max_nesting_depth",
        "agents.yaml: agents[1].delegation: expected a mapping, got 5; "
        "write delegation as a mapping of keys such as max_call_depth, allow_cycles, timeout_s, allow",
    ]


def test_settings_value_from_env_that_does_not_parse(ctx: BuildContext) -> None:
    assert error_of({"class": f"{SAMPLES}:Greeter", "card_interval_s": "soon"}, ctx) == (
        "agents.yaml: agents[0].card_interval_s: input should be a valid number, unable to parse string "
        "as a number, got 'soon'; set card_interval_s to a valid value "
        "(the SAM heartbeat's interval (with sam_heartbeat))"
    )


# ---------------------------------------------------------------- build_agents


def test_duplicate_names_in_one_file(ctx: BuildContext) -> None:
    entries = [
        {"class": f"{SAMPLES}:Greeter"},
        {"class": f"{SAMPLES}:Flexible"},
        {"class": f"{SAMPLES}:Flexible", "name": "greeter"},
    ]
    with pytest.raises(ConfigError) as caught:
        build_agents(entries, ctx)
    assert str(caught.value) == (
        "agents.yaml: agents[2].name: agent name 'greeter' is already used by agents[0]; "
        "give each agent a unique name: with 'name:' one class can run under several names"
    )


def test_build_agents_reports_the_first_bad_entry(ctx: BuildContext) -> None:
    with pytest.raises(ConfigError, match=r"^agents\.yaml: agents\[1\]\.class: required key is missing"):
        build_agents([{"class": f"{SAMPLES}:Greeter"}, {}], ctx)


def test_build_agents_makes_services(ctx: BuildContext) -> None:
    entries = [{"class": f"{SAMPLES}:Greeter"}, {"class": f"{SAMPLES}:Flexible", "card_interval_s": 2}]
    services = build_agents(entries, ctx)
    assert all(isinstance(service, AgentService) and isinstance(service, Component) for service in services)
    assert [(service.name, service.kind) for service in services] == [("greeter", "agent"), ("flexible", "agent")]
    first, second = services
    assert isinstance(first, AgentService) and isinstance(second, AgentService)
    assert isinstance(first.agent, Greeter) and first.namespace == "mesh"
    assert second.settings.card_interval_s == 2.0


def test_config_file_to_services_through_the_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for module in list(sys.modules):
        if module.split(".")[0] == "gateways":
            monkeypatch.delitem(sys.modules, module)
    path = tmp_path / "team.yaml"
    path.write_text(
        "namespace: team\n"
        "agents:\n"
        "  - class: agents.builtin.echo:EchoAgent\n"
        f"  - class: {SAMPLES}:Greeter\n"
        "    name: hi\n"
        "gateways: []\n"
    )
    services = build_components(load_config(path, environ={}), BrokerSettings())
    assert [(type(s).__name__, s.name) for s in services] == [("AgentService", "echo"), ("AgentService", "hi")]
    assert all(isinstance(s, AgentService) and s.namespace == "team" for s in services)
    # An empty gateways section does not load its factory (whose package may not even exist).
    assert not [module for module in sys.modules if module.split(".")[0] == "gateways"]


HELLO_AGENT = (
    "from agents import Agent\n\nclass Hello(Agent):\n    name = 'hello'\n\n"
    "    async def handle(self, message, ctx):\n        return 'hi'\n"
)


@pytest.mark.parametrize("own", ["agents", "mesh"])
def test_a_user_module_named_like_the_mesh_package_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own: str
) -> None:
    (tmp_path / f"{own}.py").write_text(HELLO_AGENT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    context = BuildContext(broker=BrokerSettings(), namespace="ns", source=tmp_path / "agents.yaml", section="agents")
    message = error_of({"class": f"{own}:Hello"}, context)
    assert f"{tmp_path / (own + '.py')} has the name of the mesh's own package '{own}'" in message
    assert f"rename your file (e.g. my_{own}.py" in message and f"class: ./{own}.py:YourClass" in message


def test_a_module_loads_by_path_whatever_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "agents.py").write_text(HELLO_AGENT)
    monkeypatch.chdir(tmp_path.parent)
    context = BuildContext(broker=BrokerSettings(), namespace="ns", source=tmp_path / "agents.yaml", section="agents")
    assert parse({"class": "./agents.py:Hello"}, context).agent.name == "hello"
    missing = error_of({"class": "./nowhere.py:Hello"}, context)
    assert missing.endswith(
        f"no file {tmp_path / 'nowhere.py'}; check the path: a relative one starts at the config file's folder"
    )


def test_a_syntax_error_in_the_module_is_one_clean_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_syntax_agent.py").write_text("from agents import Agent\n\nclass Hello(Agent)\n    pass\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    context = BuildContext(broker=BrokerSettings(), namespace="ns", source=tmp_path / "agents.yaml", section="agents")
    message = error_of({"class": "broken_syntax_agent:Hello"}, context)
    assert "agents.yaml: agents[0].class: module 'broken_syntax_agent' has a syntax error at " in message
    assert message.endswith("broken_syntax_agent.py:3: expected ':'; fix the syntax there")


def test_a_module_that_raises_while_loading_names_the_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "raising_agent.py").write_text("x = 1\nraise RuntimeError('no config')\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    context = BuildContext(broker=BrokerSettings(), namespace="ns", source=tmp_path / "agents.yaml", section="agents")
    message = error_of({"class": "raising_agent:Hello"}, context)
    assert "module 'raising_agent' raised RuntimeError while loading at " in message
    assert "raising_agent.py:2: no config; fix the module so that importing it succeeds" in message

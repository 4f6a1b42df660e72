"""The ``agents:`` section of a mesh config file: entries -> agent services.

One entry::

    - class: agents.builtin.echo:EchoAgent   # required: 'module:Class', an Agent subclass
      name: echo                             # optional: overrides the class attribute
      description: Repeats what it is told   # optional; likewise version
      config: {greeting: hi}                 # optional: keyword arguments for the constructor
      card_interval_s: 5                     # optional: any AgentSettings field
      limits: {max_parts: 50}
      trust: {signing_key: keys/echo.jwk}     # optional: overrides the file's trust: for this agent

Instead of ``class:``, ``worker: {command: [node, shout.js], cwd: ..., env: ...}`` serves a
worker process in any language (:mod:`agents.a2e`), ``acp: {command: [...], cwd: ...,
env: ..., policy: ...}`` an ACP agent process (:mod:`agents.acp`), ``llm: {model: ...,
instructions: ..., tools: ..., peers: ...}`` an LLM agent (:mod:`agents.llm`), and ``workflow:
{nodes: [...], ...}`` a DAG of agents (:mod:`agents.workflow`), and ``remote: {card_url: ...}``
an HTTP A2A agent through a proxy (:mod:`agents.remote`); ``name:`` is then required.

Registered under the ``mesh.sections`` entry points as ``agents``; :mod:`mesh.config` calls
:func:`build_agents` with the entries of a file. Errors are ``ConfigError`` in the mesh's
``<file>: <key path>: <problem>; <fix>`` form.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agents.agent import CARD_OPTIONS, Agent, UnknownOptionsError, agent_options
from agents.settings import AgentSettings
from agents.usermodules import BUILD_MODULES, user_module
from mesh.component import BuildContext, Component, component_trust
from mesh.config.errors import KeyPart, check_keys, config_error, suggest, validation_error_text
from mesh.errors import ConfigError
from mesh.trust import Trust
from topics import validate_identifier

__all__ = ["AGENT_KEYS", "ENTRY_EXAMPLE", "AgentSpec", "build_agents", "parse_agent_entry"]

ENTRY_EXAMPLE = "class: agents.builtin.echo:EchoAgent"
_CARD_KEYS = CARD_OPTIONS
AGENT_KEYS = ("class", "worker", "acp", "llm", "workflow", "remote", *_CARD_KEYS, "config", "trust")
"""Keys of an entry besides the :class:`AgentSettings` fields."""


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One parsed entry: the agent instance and how the runtime should serve it."""

    agent: Agent
    settings: AgentSettings
    trust: Trust | None = None


def build_agents(entries: Sequence[Any], ctx: BuildContext) -> list[Component]:
    """The ``mesh.config.sections`` factory for ``agents:``: one :class:`AgentService` per entry."""
    token = BUILD_MODULES.set({})
    try:
        specs = [parse_agent_entry(entry, ctx, index) for index, entry in enumerate(entries)]
    finally:
        BUILD_MODULES.reset(token)
    _check_unique_names(specs, ctx)
    # Imported here: the service pulls in the transport, which parsing does not need.
    from agents.service import AgentService

    return [
        AgentService(
            spec.agent,
            broker=ctx.broker_for(spec.agent.name),
            namespace=ctx.namespace,
            settings=spec.settings,
            trust=spec.trust,
            artifacts=ctx.artifacts,
        )
        for spec in specs
    ]


def parse_agent_entry(entry: Any, ctx: BuildContext, index: int) -> AgentSpec:
    """Check one entry, import its class, build the agent and its settings."""
    here: tuple[KeyPart, ...] = (ctx.section, index)
    if not isinstance(entry, Mapping):
        raise config_error(
            ctx.source,
            here,
            f"expected a mapping, got {entry!r}",
            f"write the entry as a mapping with at least '{ENTRY_EXAMPLE}'",
        )
    check_keys(entry, [*AGENT_KEYS, *AgentSettings.model_fields], source=ctx.source, path=here)
    options = _options(entry.get("config"), ctx, here)
    if "worker" in entry:
        agent_class, options["worker"] = _worker(entry, ctx, here)
    elif "acp" in entry:
        agent_class, options["acp"], options["policy"] = _acp(entry, ctx, here)
    elif "llm" in entry:
        agent_class, options["llm"] = _llm(entry, ctx, here)
        options["source"] = ctx.source
    elif "workflow" in entry:
        agent_class, options["graph"], options["store_path"] = _workflow(entry, ctx, here)
        if isinstance(entry.get("store"), str) and entry["store"]:  # shared by its replicas (agents.workflow.pgstore)
            options["store"] = _workflow_store(entry["store"], str(entry["name"]), ctx, here)
    elif "remote" in entry:
        from agents.remote.entry import remote_entry  # only files with remote agents need the a2a-sdk

        agent_class, options["remote"] = remote_entry(entry, ctx.source, here)
    else:
        agent_class = _agent_class(entry.get("class"), ctx, here)
    card = _card_fields(entry, agent_class, ctx, here)
    settings = _settings(entry, ctx, here)
    agent = _construct(agent_class, card, options, ctx, here)
    trust = component_trust(ctx, agent.name, entry.get("trust"), here)
    return AgentSpec(agent=agent, settings=settings, trust=trust)


def _agent_class(spec: Any, ctx: BuildContext, here: tuple[KeyPart, ...]) -> type[Agent]:
    where = (*here, "class")
    form = f"name the agent class as 'module:Class', e.g. '{ENTRY_EXAMPLE}'"
    if spec is None:
        raise config_error(ctx.source, where, "required key is missing", f"add it: {form}")
    module_name, colon, attribute = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not (colon and module_name.strip() and attribute.strip()):
        raise config_error(ctx.source, where, f"{spec!r} is not of the form 'module:Class'", form)
    module_name, attribute = module_name.strip(), attribute.strip()
    module = user_module(module_name, ctx.source, where)
    found: Any = module
    for name in attribute.split("."):  # 'module:Outer.Inner' reaches nested classes
        if not hasattr(found, name):
            public = [n for n in dir(module) if inspect.isclass(getattr(module, n)) and not n.startswith("_")]
            close = suggest(name, public)
            hint = f"did you mean {module_name}:{close}? " if close else ""
            raise config_error(
                ctx.source,
                where,
                f"module {module_name!r} has no attribute {attribute!r}",
                f"{hint}check the class name after the ':'",
            )
        found = getattr(found, name)
    if not (inspect.isclass(found) and issubclass(found, Agent)) or found is Agent:
        what = f"class {found.__name__}" if inspect.isclass(found) else f"a {type(found).__name__}"
        what = "the base class itself" if found is Agent else what
        raise config_error(
            ctx.source,
            where,
            f"{spec!r} is {what}, not a subclass of agents.Agent",
            "point it at your own subclass of agents.Agent (class MyAgent(Agent): ...)",
        )
    return found


def _worker(entry: Mapping[str, Any], ctx: BuildContext, here: tuple[KeyPart, ...]) -> tuple[type[Agent], Any]:
    # Imported here: only files with worker agents need the A2E bridge.
    from agents.a2e.config import parse_worker
    from agents.a2e.worker import WorkerAgent

    if "class" in entry:
        raise config_error(
            ctx.source, (*here, "worker"), "an entry has either 'class:' or 'worker:', not both", "remove one of them"
        )
    return WorkerAgent, parse_worker(entry["worker"], ctx.source, (*here, "worker"))


def _acp(entry: Mapping[str, Any], ctx: BuildContext, here: tuple[KeyPart, ...]) -> tuple[type[Agent], Any, Any]:
    # Imported here: only files with ACP agents need the ACP bridge (and its SDK).
    from agents.acp.agent import AcpAgent
    from agents.acp.config import parse_acp

    for other in ("class", "worker"):
        if other in entry:
            raise config_error(
                ctx.source, (*here, "acp"), f"an entry has either '{other}:' or 'acp:', not both", "remove one of them"
            )
    command, policy = parse_acp(entry["acp"], ctx.source, (*here, "acp"))
    return AcpAgent, command, policy


def _workflow(entry: Mapping[str, Any], ctx: BuildContext, here: tuple[KeyPart, ...]) -> tuple[type[Agent], Any, Any]:
    # Imported here: only files with workflow agents need the workflow engine (and Jinja2).
    from agents.workflow import WorkflowAgent, parse_workflow, workflow_store_path

    for other in ("class", "worker", "acp", "llm"):
        if other in entry:
            raise config_error(
                ctx.source,
                (*here, "workflow"),
                f"an entry has either '{other}:' or 'workflow:', not both",
                "remove one",
            )
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise config_error(ctx.source, (*here, "name"), "a workflow agent needs a name", "add 'name: my-workflow'")
    graph = parse_workflow(entry["workflow"], name=name, source=ctx.source, where=(*here, "workflow"))
    return WorkflowAgent, graph, workflow_store_path(entry, ctx.namespace, name)


def _workflow_store(value: str, name: str, ctx: BuildContext, here: tuple[KeyPart, ...]) -> Any:
    from agents.workflow.pgstore import PostgresWorkflowStore
    from mesh.store import is_postgres_url, parse_store_url

    if not is_postgres_url(value):
        raise config_error(ctx.source, (*here, "store"), "store must be a postgresql:// URL", "or leave store out")
    return PostgresWorkflowStore(parse_store_url(value), namespace=ctx.namespace, agent=name)


def _llm(entry: Mapping[str, Any], ctx: BuildContext, here: tuple[KeyPart, ...]) -> tuple[type[Agent], Any]:
    # The config needs no engine; the agent does (the llm extra), imported only when used.
    from agents.llm.config import INSTALL_HINT, parse_llm

    for other in ("class", "worker", "acp", "workflow"):
        if other in entry:
            raise config_error(
                ctx.source, (*here, "llm"), f"an entry has either '{other}:' or 'llm:', not both", "remove one of them"
            )
    config = parse_llm(entry["llm"], ctx.source, (*here, "llm"))
    try:
        from agents.llm.agent import LlmAgent
    except ImportError as exc:
        raise config_error(
            ctx.source, (*here, "llm"), f"LLM agents need the llm extra ({exc.name or exc} is missing)", INSTALL_HINT
        ) from None
    return LlmAgent, config


def _options(config: Any, ctx: BuildContext, here: tuple[KeyPart, ...]) -> dict[str, Any]:
    where = (*here, "config")
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise config_error(
            ctx.source,
            where,
            f"expected a mapping of constructor options, got {config!r}",
            "write it as config: {option: value, ...}",
        )
    for key in config:
        if not isinstance(key, str) or not key.isidentifier():
            raise config_error(
                ctx.source,
                (*where, key),
                f"option name {key!r} is not a Python identifier",
                "option names become keyword arguments: use letters, digits and '_'",
            )
        if key in _CARD_KEYS:
            raise config_error(
                ctx.source,
                (*where, key),
                f"{key!r} is not a constructor option here",
                f"move it out of config: write '{key}:' at the entry level",
            )
    return dict(config)


def _card_fields(
    entry: Mapping[str, Any], agent_class: type[Agent], ctx: BuildContext, here: tuple[KeyPart, ...]
) -> dict[str, str]:
    card = {key: entry[key] for key in _CARD_KEYS if entry.get(key) is not None}
    for key, value in card.items():
        if not isinstance(value, str):
            raise config_error(
                ctx.source, (*here, key), f"expected a string, got {value!r}", f"quote it: {key}: '{value}'"
            )
    # Checked here, not left to Agent.__init__, to say which key is wrong.
    name = card.get("name") or agent_class.name
    try:
        validate_identifier(name, "agent name")
    except ValueError as exc:
        problem, _, rule = str(exc).partition(": ")
        if "name" in card:
            raise config_error(ctx.source, (*here, "name"), problem, rule) from None
        raise config_error(
            ctx.source,
            (*here, "class"),
            f"no valid agent name: the class attribute {agent_class.__name__}.name is {name!r}",
            f"add 'name: my-agent' to the entry ({rule})",
        ) from None
    return card


def _settings(entry: Mapping[str, Any], ctx: BuildContext, here: tuple[KeyPart, ...]) -> AgentSettings:
    values = {key: value for key, value in entry.items() if key in AgentSettings.model_fields}
    if "emqx" not in entry and ctx.emqx is not None:  # the file's emqx: is every agent's default
        values["emqx"] = dict(ctx.emqx)
    try:
        return AgentSettings.model_validate(values)
    except ValidationError as exc:
        text = validation_error_text(exc, source=ctx.source, prefix=here, model=AgentSettings)
        raise ConfigError(text) from exc


def _construct(
    agent_class: type[Agent],
    card: dict[str, str],
    options: dict[str, Any],
    ctx: BuildContext,
    here: tuple[KeyPart, ...],
) -> Agent:
    where = (*here, "config")
    try:
        inspect.signature(agent_class).bind(**card, **options)
    except TypeError as exc:
        declared = agent_options(agent_class)
        if unknown := [key for key in options if key not in declared]:
            raise _unknown_option(agent_class, card, unknown[0], ctx, where) from exc
        raise config_error(
            ctx.source,
            where,
            f"the options do not fit {agent_class.__name__}'s constructor: {exc}",
            f"its options are: {', '.join(declared) or 'none'}",
        ) from exc
    try:
        return agent_class(**card, **options)
    except UnknownOptionsError as exc:  # passed on by **options up to Agent, which takes none
        raise _unknown_option(agent_class, card, exc.keys[0], ctx, where) from exc
    except TypeError as exc:
        raise config_error(
            ctx.source,
            where,
            f"{agent_class.__name__}({_call_text(card, options)}) raised TypeError: {exc}",
            "check the options against the class's constructor",
        ) from exc
    except ConfigError:
        raise  # already says where and what to do (an LLM agent's model, a tool's import)
    except ValueError as exc:
        raise config_error(
            ctx.source,
            where if options else here,
            f"{agent_class.__name__} refused its options: {exc}",
            "correct the value it names",
        ) from exc


def _unknown_option(
    agent_class: type[Agent], card: Mapping[str, str], key: str, ctx: BuildContext, where: tuple[KeyPart, ...]
) -> ConfigError:
    """``<file>: agents[i].config.<key>: unknown option <key> of agent <name> (<Class>); did you mean ...``"""
    declared = agent_options(agent_class)
    close = suggest(key, declared)
    hint = f"did you mean {close!r}? " if close else ""
    name = card.get("name") or agent_class.name
    return config_error(
        ctx.source,
        (*where, key),
        f"unknown option {key!r} of agent {name!r} ({agent_class.__module__}:{agent_class.__qualname__})",
        f"{hint}{agent_class.__name__}'s options are: {', '.join(declared) or 'none'}",
    )


def _call_text(card: Mapping[str, Any], options: Mapping[str, Any]) -> str:
    # Names only: option values may be secrets substituted from the environment.
    return ", ".join(f"{key}=..." for key in {**card, **options})


def _check_unique_names(specs: Sequence[AgentSpec], ctx: BuildContext) -> None:
    first_index: dict[str, int] = {}
    for index, spec in enumerate(specs):
        name = spec.agent.name
        if name in first_index:
            raise config_error(
                ctx.source,
                (ctx.section, index, "name"),
                f"agent name {name!r} is already used by {ctx.section}[{first_index[name]}]",
                "give each agent a unique name: with 'name:' one class can run under several names",
            )
        first_index[name] = index

"""The ``llm:`` key of an ``agents:`` entry: a model, instructions, tools and peers.

::

    - name: assistant
      llm:
        model: openai:gpt-4.1-mini          # any pydantic-ai model id (anthropic:..., ollama:llama3.2 ...)
        base_url: http://127.0.0.1:11434/v1  # optional: any OpenAI-compatible server
        api_key_env: OPENAI_API_KEY         # optional: the variable holding the key (never the key)
        instructions: You answer briefly.
        peers: [weather, "calc*"]           # agents it may call as tools (fnmatch; default: none)
        tools:
          - python: mytools:word_count      # a function: its signature and docstring are the schema
          - mcp: {command: [uvx, mcp-server-fetch], env: {}}      # an MCP server over stdio
          - mcp: {url: "http://127.0.0.1:8000/mcp", headers: {}} # or over streamable HTTP
        output: {type: object, properties: {answer: {type: string}}}  # optional: a structured answer
        settings: {temperature: 0.2, max_tokens: 2000}
        max_model_calls: 10                 # per task
        max_tool_calls: 20
        max_tokens: 100000                  # per task (input + output; default: no bound)
        approve: [word_count, "mcp:fetch/*", "peer:weather"]  # calls a person approves first
        approval_timeout_s: 600             # no answer that long: the task fails
        budgets: {per_user: {tokens: 200000, period: 1d}, per_agent: {tokens: 1000000, period: 1d}}

Parsing needs no engine: a file with an ``llm:`` agent is checked (and refused with the install
hint) without importing pydantic-ai.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mesh.config.errors import KeyPart, check_keys, config_error, validation_error_text
from mesh.errors import ConfigError

__all__ = ["INSTALL_HINT", "LLM_EXAMPLE", "Budget", "Budgets", "LlmConfig", "McpServer", "parse_llm"]

LLM_EXAMPLE = "llm: {model: 'openai:gpt-4.1-mini', instructions: 'You answer briefly.'}"
INSTALL_HINT = "pip install 'mqtt-agent-mesh[llm]'"
_TOOL_KINDS = ("python", "mcp")
_MCP_KEYS = ("name", "command", "cwd", "env", "url", "headers", "timeout_s")
_PERIOD_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class McpServer(_Strict):
    """One MCP server: ``command`` (stdio) or ``url`` (streamable HTTP)."""

    name: str | None = Field(None, min_length=1, description="its name in approve: patterns (mcp:NAME/TOOL)")
    command: tuple[str, ...] = ()
    cwd: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers (values may be secrets)")
    timeout_s: float = Field(30.0, gt=0, description="timeout of one MCP request")

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class Budget(_Strict):
    """Tokens (input + output) one user, or the agent, may spend per period (``1d``, ``12h``, ``30m``)."""

    tokens: int = Field(gt=0, description="tokens per period")
    period: str = Field("1d", pattern=r"^\d+[smhdw]$", description="a number and s, m, h, d or w")

    @property
    def period_s(self) -> int:
        return int(self.period[:-1]) * _PERIOD_UNITS[self.period[-1]]


class Budgets(_Strict):
    """``budgets:``: durable per user and per agent, kept in the usage store (agents.llm.usage)."""

    per_user: Budget | None = None
    per_agent: Budget | None = None


class LlmConfig(_Strict):
    """What the ``llm:`` mapping says; see the module docstring."""

    model: str = Field(min_length=1, description="a pydantic-ai model id such as 'openai:gpt-4.1-mini'")
    base_url: str | None = Field(None, description="an OpenAI-compatible server's URL, e.g. http://127.0.0.1:11434/v1")
    api_key_env: str | None = Field(None, description="the environment variable holding the API key")
    instructions: str = ""
    peers: tuple[str, ...] = Field((), description="fnmatch patterns of agents it may call as tools")
    python_tools: tuple[str, ...] = ()
    mcp_servers: tuple[McpServer, ...] = ()
    output: dict[str, Any] | None = Field(None, description="a JSON schema of the structured answer")
    settings: dict[str, Any] = Field(default_factory=dict, description="model settings (temperature, max_tokens...)")
    max_model_calls: int = Field(10, gt=0, description="model requests per task")
    max_tool_calls: int = Field(20, ge=0, description="tool calls per task")
    stream: bool = Field(True, description="stream the model's answers (false: for servers that cannot stream)")
    retries: int = Field(3, ge=0, le=10, description="retries of a model request answered 429 or 5xx")
    artifact_tools: bool = Field(
        True, description="offer list_artifacts, load_artifact and save_artifact (the conversation's files)"
    )
    peer_timeout_s: float | None = Field(None, gt=0, description="idle timeout of a peer call (delegation.timeout_s)")
    max_tokens: int | None = Field(None, gt=0, description="tokens (input + output) per task")
    approve: tuple[str, ...] = Field(
        (), description="fnmatch patterns of tools whose calls need a person's approval (mcp:SERVER/TOOL, peer:AGENT)"
    )
    approval_timeout_s: float | None = Field(None, gt=0, description="fail the task when no approval comes this long")
    budgets: Budgets = Field(default_factory=Budgets, description="tokens per user and per agent per period")
    usage_store: str = Field(
        "",
        description="where usage and budget counters are kept: a postgresql:// URL (shared by hosts), a SQLite path, "
        "':memory:' (default: the agent's store: or $MESH_STORE when PostgreSQL, else the state dir)",
    )


_LLM_KEYS = (*(k for k in LlmConfig.model_fields if k not in ("python_tools", "mcp_servers")), "tools")


def parse_llm(value: Any, source: Path, path: Sequence[KeyPart]) -> LlmConfig:
    """The :class:`LlmConfig` of an ``llm:`` mapping; errors name the key and the fix."""
    where = tuple(path)
    if not isinstance(value, Mapping):
        raise config_error(source, where, f"expected a mapping, got {value!r}", f"write it as {LLM_EXAMPLE}")
    check_keys(value, _LLM_KEYS, source=source, path=where)
    if "model" not in value:
        raise config_error(source, (*where, "model"), "required key is missing", "add model: openai:gpt-4.1-mini")
    fields = {k: v for k, v in value.items() if k != "tools"}
    for key in ("peers", "approve"):
        if isinstance(fields.get(key), str):
            fields[key] = [fields[key]]
    python, servers = _tools(value.get("tools"), source, (*where, "tools"))
    try:
        return LlmConfig.model_validate({**fields, "python_tools": python, "mcp_servers": servers})
    except ValidationError as exc:
        raise ConfigError(validation_error_text(exc, source=source, prefix=where, model=LlmConfig)) from exc


def _tools(value: Any, source: Path, where: tuple[KeyPart, ...]) -> tuple[list[str], list[McpServer]]:
    python: list[str] = []
    servers: list[McpServer] = []
    if value is None:
        return python, servers
    if not isinstance(value, list):
        raise config_error(
            source, where, f"expected a list, got {value!r}", "write tools: [{python: mytools:word_count}]"
        )
    for index, entry in enumerate(value):
        here = (*where, index)
        if not isinstance(entry, Mapping) or len(entry) != 1:
            raise config_error(
                source,
                here,
                f"expected a mapping with one key, got {entry!r}",
                "write '- python: module:function' or '- mcp: {command: [...]}'",
            )
        check_keys(entry, _TOOL_KINDS, source=source, path=here)
        if "python" in entry:
            python.append(_python(entry["python"], source, (*here, "python")))
        else:
            servers.append(_mcp(entry["mcp"], source, (*here, "mcp")))
    return python, servers


def _python(spec: Any, source: Path, where: tuple[KeyPart, ...]) -> str:
    module, colon, name = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not (colon and module.strip() and name.strip()):
        raise config_error(
            source, where, f"{spec!r} is not of the form 'module:function'", "write python: mytools:word_count"
        )
    return f"{module.strip()}:{name.strip()}"


def _mcp(value: Any, source: Path, where: tuple[KeyPart, ...]) -> McpServer:
    form = "write mcp: {command: [uvx, mcp-server-fetch]} or mcp: {url: 'http://127.0.0.1:8000/mcp'}"
    if not isinstance(value, Mapping):
        raise config_error(source, where, f"expected a mapping, got {value!r}", form)
    check_keys(value, _MCP_KEYS, source=source, path=where)
    fields = dict(value)
    command = fields.get("command")
    if isinstance(command, str):
        try:
            fields["command"] = shlex.split(command)
        except ValueError as exc:
            raise config_error(
                source, (*where, "command"), f"cannot split {command!r}: {exc}", "balance the quotes"
            ) from None
    if bool(fields.get("command")) == bool(fields.get("url")):
        raise config_error(source, where, "an MCP server needs exactly one of 'command' or 'url'", form)
    if fields.get("cwd") is not None:
        fields["cwd"] = Path(source).resolve().parent / str(fields["cwd"])
    try:
        return McpServer.model_validate(fields)
    except ValidationError as exc:
        raise ConfigError(validation_error_text(exc, source=source, prefix=where, model=McpServer)) from exc

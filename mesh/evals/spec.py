"""An eval file: the cases ``mesh eval FILE.yaml`` runs against the live mesh, and what each expects.

::

    agent: calculator            # the cases' agent unless a case names its own
    concurrency: 4               # cases in flight at once (default 4)
    timeout_s: 60                # per case: the wait for each next event of its task
    cases:
      - name: adds
        input: "2 + 2"           # text; or {text, data: {...}, files: [path, ...]}
        expect: {exact: "4"}

Each key of ``expect`` is one scorer (:mod:`mesh.evals.scorers`); a case passes when every one
of them does. A bad file is refused before anything is sent, with the key path and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mesh.config.errors import config_error, type_name, validation_error_text
from mesh.errors import ConfigError
from topics import validate_identifier

__all__ = ["Case", "CaseInput", "Expect", "Judge", "NumberExpect", "Suite", "ToolExpect", "load_suite"]

_TERMINAL_STATES = ("completed", "failed", "canceled", "rejected", "input-required", "auth-required")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaseInput(_Strict):
    """What a case sends: text, a DataPart and files (paths relative to the eval file)."""

    text: str = ""
    data: dict[str, Any] | None = Field(None, description="a JSON object sent as a DataPart")
    files: tuple[Path, ...] = Field((), description="files attached as FileParts (paths relative to the eval file)")
    metadata: dict[str, Any] | None = Field(None, description="the message's metadata (e.g. {skill: ...})")


class NumberExpect(_Strict):
    """The answer, read as a number, is ``value`` within ``tolerance`` (absolute)."""

    value: float
    tolerance: float = Field(0.0, ge=0, description="the largest difference accepted, e.g. 0.001")


class ToolExpect(_Strict):
    """A tool the agent called: its name, and arguments the call had (a subset of them)."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = Field(None, description="arguments the call had (others may be there too)")


class Judge(_Strict):
    """An LLM judge: an agent of the mesh (an ``llm:`` agent, on any configured model) asked
    whether the answer meets ``criteria``; its answer starts with PASS or FAIL."""

    agent: str = Field(min_length=1, description="the judging agent (an llm: agent of the mesh)")
    criteria: str = Field(min_length=1, description="what a good answer does, in words")


class Expect(_Strict):
    """What a case expects; every key given is checked (see :mod:`mesh.evals.scorers`)."""

    state: str = Field("completed", description=f"the task's final state, one of: {', '.join(_TERMINAL_STATES)}")
    exact: str | None = Field(None, description="the whole answer text (surrounding blanks ignored)")
    contains: tuple[str, ...] = Field((), description="texts the answer contains (a string or a list)")
    regex: str | None = Field(None, description="a Python regular expression the answer matches (re.search)")
    json_schema: dict[str, Any] | None = Field(None, description="a JSON Schema the answer's data (or JSON text) meets")
    python: str | None = Field(None, description="module:function called with the Answer; False or a text fails")
    number: NumberExpect | None = None
    tools: tuple[ToolExpect, ...] = Field((), description="tools the agent called, e.g. [{name: calculator}]")
    max_latency_s: float | None = Field(None, gt=0, description="the longest the answer may take, in seconds")
    max_tokens: int | None = Field(None, gt=0, description="the most tokens (input + output) an LLM answer may use")
    judge: Judge | None = None

    @field_validator("contains", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("state")
    @classmethod
    def _known_state(cls, value: str) -> str:
        if value not in _TERMINAL_STATES:
            raise ValueError(f"unknown state {value!r}; use one of {', '.join(_TERMINAL_STATES)}")
        return value

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression ({exc})") from None
        return value

    @field_validator("python")
    @classmethod
    def _reference(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[\w.]+:[\w.]+", value):
            raise ValueError(f"{value!r} is not of the form module:function")
        return value

    @field_validator("json_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            import jsonschema

            try:
                jsonschema.validators.validator_for(value).check_schema(value)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema ({exc.message})") from None
        return value


class Case(_Strict):
    name: str = Field(min_length=1, description="the case's name, unique in the file")
    agent: str | None = Field(None, description="the agent to ask (default: the file's agent, or --agent)")
    input: CaseInput
    expect: Expect = Field(default_factory=Expect)
    timeout_s: float | None = Field(None, gt=0, description="the wait for each next event (default: the file's)")

    @field_validator("input", mode="before")
    @classmethod
    def _text_input(cls, value: Any) -> Any:
        return {"text": value} if isinstance(value, str) else value


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Path = Field(Path("."), exclude=True)
    agent: str | None = Field(None, description="the agent of every case that names none")
    concurrency: int = Field(4, gt=0, le=64, description="cases in flight at once")
    timeout_s: float = Field(60.0, gt=0, description="the wait for each next event of a case's task")
    cases: tuple[Case, ...] = Field(min_length=1, description="the cases: a list of {name, input, expect}")

    def agent_of(self, case: Case, override: str | None = None) -> str:
        agent = override or case.agent or self.agent
        if agent is None:  # load_suite refuses such a file
            raise ConfigError(f"{self.source}: case {case.name!r} names no agent; add agent: NAME or pass --agent")
        return agent


def load_suite(path: Path, *, agent: str | None = None) -> Suite:
    """Read and check an eval file; ``agent`` (``--agent``) asks every case's questions of that agent."""
    from mesh.config.files import _read_yaml  # the config loader's reader: its YAML errors name line and column

    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise config_error(path, "top level", f"expected a mapping, got {type_name(data)}", "start with 'cases:'")
    try:
        suite = Suite.model_validate({**data, "source": path})
    except ValidationError as exc:
        raise ConfigError(validation_error_text(exc, source=path, model=Suite)) from exc
    seen: set[str] = set()
    for index, case in enumerate(suite.cases):
        if case.name in seen:
            raise config_error(path, ("cases", index, "name"), f"{case.name!r} is taken", "give each case its own name")
        seen.add(case.name)
        target = agent or case.agent or suite.agent
        if target is None:
            raise config_error(
                path, ("cases", index), "no agent to ask", "add agent: NAME to the case or the file, or pass --agent"
            )
        _check_agent_name(target, path, ("cases", index, "agent"))
        if case.expect.judge is not None:
            _check_agent_name(case.expect.judge.agent, path, ("cases", index, "expect", "judge", "agent"))
        for file in case.input.files:
            if not (path.parent / file).is_file():
                raise config_error(
                    path, ("cases", index, "input", "files"), f"no file {file}", "give paths relative to the eval file"
                )
    return suite


def _check_agent_name(name: str, path: Path, where: tuple[str | int, ...]) -> None:
    if "/" in name:  # an EMQX profile agent: org/unit/agent
        return
    try:
        validate_identifier(name, "agent name")
    except ValueError as exc:
        raise config_error(path, where, str(exc).partition("; ")[0], "use the name `mesh agents` lists") from None

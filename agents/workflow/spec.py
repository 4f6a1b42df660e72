"""The ``workflow:`` key of an agent entry: the YAML contract as pydantic models.

A workflow is a list of nodes, each with an ``id`` and exactly one kind key::

    workflow:
      input_schema: {type: object, properties: {topic: {type: string}}, required: [topic]}
      nodes:
        - id: research                 # agent: a delegation to the named agent
          agent: researcher
          input: "Find facts about {{ input.topic }}"
        - id: check                    # switch: the first case whose `when` holds runs its `then`
          switch:
            - {when: "{{ research.output.data.confidence < 0.5 }}", then: ask}
            - {else: write}
        - id: per_source               # map: one run per item, at most max_parallel at once
          map: "{{ research.output.data.sources }}"
          agent: summarizer
          input: "{{ item.url }}"
        - id: refine                   # loop: run, then again while `while` holds (bounded)
          loop: {while: "{{ loop.output.text != 'done' }}", max_iterations: 5}
          tool: mytools:refine         # tool: a Python function 'module:function'
        - id: nested                   # workflow: another workflow agent, by name
          workflow: summary
      output: {report: "{{ write.output.text }}"}

Unknown keys are refused (``extra="forbid"``); :mod:`agents.workflow.graph` checks the graph.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["KIND_KEYS", "LoopSpec", "NodeSpec", "RetrySpec", "SwitchCase", "WorkflowSpec"]

#: The keys that say what a node does; a node has exactly one of the first four, and
#: ``map``/``loop`` wrap one of ``agent``/``tool``/``workflow``.
KIND_KEYS = ("agent", "tool", "workflow", "switch")

_STRICT = ConfigDict(extra="forbid", populate_by_name=True)


class RetrySpec(BaseModel):
    """Run a failed node again: ``attempts`` runs in all, ``backoff_s`` doubling between them."""

    model_config = _STRICT
    attempts: int = Field(2, ge=1, le=20, description="runs in all, the first included (1-20)")
    backoff_s: float = Field(0.5, ge=0, le=300, description="seconds before the 2nd run, doubling after (0-300)")


class SwitchCase(BaseModel):
    """``{when: <condition>, then: <node>}``, or ``{else: <node>}`` as the last case."""

    model_config = _STRICT
    when: str | None = Field(None, description="a template condition, e.g. '{{ a.output.data.n > 3 }}'")
    then: str | None = Field(None, description="the id of the node to run when the condition holds")
    else_: str | None = Field(None, alias="else", description="the id of the node to run when no case held")

    @model_validator(mode="after")
    def _one_form(self) -> SwitchCase:
        if self.else_ is not None:
            if self.when is not None or self.then is not None:
                raise ValueError("an 'else' case has no 'when' or 'then': write it as {else: <node id>}")
        elif self.when is None or self.then is None:
            raise ValueError("a case needs both 'when' and 'then': {when: '{{ ... }}', then: <node id>}")
        return self


class LoopSpec(BaseModel):
    """Run the node's body, then again while ``while`` holds, at most ``max_iterations`` times."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    while_: str = Field(alias="while", description="a template condition on loop.output, loop.index and the rest")
    max_iterations: int = Field(10, ge=1, le=1000, description="the most runs of the body (1-1000)")


class NodeSpec(BaseModel):
    """One node of the graph (see the module docstring)."""

    model_config = _STRICT
    id: str = Field(description="the node's id, unique in the workflow: letters, digits and '_' (a template name)")
    depends_on: list[str] = Field(default_factory=list, description="ids of the nodes that must finish first")
    agent: str | None = Field(None, description="the name of the agent to delegate to")
    tool: str | None = Field(None, description="a Python function as 'module:function'")
    workflow: str | None = Field(None, description="the name of another workflow agent")
    switch: list[SwitchCase] | None = Field(None, description="cases [{when, then}, ..., {else}]")
    map: str | None = Field(None, description="a template giving the list to run the node once per item of")
    loop: LoopSpec | None = Field(None, description="{while: <condition>, max_iterations: N}")
    input: Any = Field(None, description="a template string (text) or a mapping of templates (data)")
    max_parallel: int | None = Field(None, ge=1, le=1000, description="map: the most items run at once")
    max_items: int | None = Field(None, ge=1, le=100_000, description="map: the most items accepted")
    timeout_s: float | None = Field(None, gt=0, description="seconds a node may stay silent (overrides node_timeout_s)")
    retry: RetrySpec | None = Field(None, description="{attempts: N, backoff_s: S}")
    on_error: Literal["fail", "continue"] = Field("fail", description="'fail' (the workflow fails) or 'continue'")

    @property
    def kind(self) -> str:
        """``agent``, ``tool``, ``workflow`` or ``switch`` (set ones, first wins; the graph checks there is one)."""
        return next((key for key in KIND_KEYS if getattr(self, key) is not None), "")

    @property
    def target(self) -> str:
        """The agent, tool or workflow the node runs."""
        return str(getattr(self, self.kind) or "")


class WorkflowSpec(BaseModel):
    """The value of an agent entry's ``workflow:`` key."""

    model_config = _STRICT
    nodes: list[NodeSpec] = Field(min_length=1, max_length=500, description="the graph's nodes (1-500)")
    input_schema: dict[str, Any] | None = Field(None, description="a JSON Schema for the input (object form)")
    output: Any = Field(None, description="a mapping of templates: the workflow's answer")
    node_timeout_s: float = Field(300.0, gt=0, description="seconds a node may stay silent before it fails")
    max_items: int = Field(100, ge=1, le=100_000, description="the most items a map node accepts")
    max_parallel: int = Field(8, ge=1, le=1000, description="the most nodes (and map items) run at once")

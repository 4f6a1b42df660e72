"""Token budgets: per task (max_tokens), per user and per agent per period, durable in the usage store."""

from __future__ import annotations

import re
import time
from pathlib import Path

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from agents.llm.budgets import Meter
from agents.llm.config import parse_llm
from agents.testing import AgentHarness, llm_agent
from mesh.a2a import TaskState
from mesh.telemetry.usage import Counter, SqliteUsageStore, UsageRow, window_of
from tests.agents.llm.scripts import call, scripted


def costly(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """An answer that used 600 input and 400 output tokens."""
    return ModelResponse(parts=[TextPart("ok")], usage=RequestUsage(input_tokens=600, output_tokens=400))


def agent(store: Path, **llm: object) -> object:
    return llm_agent({"model": "test", "usage_store": str(store), "stream": False, **llm}, FunctionModel(costly))


async def test_the_per_user_budget_fails_the_next_task_naming_budget_period_and_reset(tmp_path: Path) -> None:
    budgets = {"per_user": {"tokens": 1500, "period": "1d"}}
    async with AgentHarness(agent(tmp_path / "u.sqlite3", budgets=budgets)) as mesh:  # type: ignore[arg-type]
        first = await mesh.send("one")
        second = await mesh.send("two")  # 1000 of 1500 used: this one's request may go
        third = await mesh.send("three")
    assert first.status.state is second.status.state is TaskState.completed
    assert third.status.state is TaskState.failed
    text = mesh.text(third)
    assert re.fullmatch(
        r"the per_user budget of 1500 tokens per 1d is spent for user '[^']+' \(2000 used\); "
        r"it resets at \d{4}-\d\d-\d\dT00:00:00Z \(llm\.budgets\.per_user\)",
        text,
    ), text


async def test_the_per_agent_budget_is_shared_by_replicas_through_the_store(tmp_path: Path) -> None:
    store = tmp_path / "shared.sqlite3"
    budgets = {"per_agent": {"tokens": 1000, "period": "12h"}}
    async with AgentHarness(agent(store, budgets=budgets)) as mesh:  # type: ignore[arg-type]
        assert (await mesh.send("one")).status.state is TaskState.completed
    async with AgentHarness(agent(store, budgets=budgets)) as other:  # another replica (or a restart)
        refused = await other.send("two")
    assert refused.status.state is TaskState.failed
    assert "the per_agent budget of 1000 tokens per 12h is spent for agent 'assistant' (1000 used)" in other.text(
        refused
    )


async def test_max_tokens_bounds_one_task(tmp_path: Path) -> None:
    model = scripted([call("word_count", {"text": "a b"})], ["done"])

    def word_count(text: str) -> int:
        """Count words."""
        return len(text.split())

    mine = llm_agent({"model": "test", "max_tokens": 20, "usage_store": ":memory:"}, model, tools=[word_count])
    async with AgentHarness(mine) as mesh:
        failed = await mesh.send("count")
    assert failed.status.state is TaskState.failed
    text = mesh.text(failed)
    assert "the task reached a limit" in text and "total_tokens_limit" in text and "llm.max_tokens: 20" in text, text


def test_a_budget_check_reads_the_window_of_now(tmp_path: Path) -> None:
    store = SqliteUsageStore(tmp_path / "w.sqlite3")
    config = parse_llm({"model": "test", "budgets": {"per_agent": {"tokens": 10, "period": "1h"}}}, tmp_path, ())
    counter = Counter("agent", "a", 3600)
    now = time.time()
    store.add(
        UsageRow(at=now - 3600, agent="a", user="u", model="m", requests=1, input_tokens=9, output_tokens=9), (counter,)
    )
    assert store.spent(counter, now) == 0  # last hour's window is over
    store.add(UsageRow(at=now, agent="a", user="u", model="m", requests=1, input_tokens=5, output_tokens=5), (counter,))
    assert store.spent(counter, now) == 10 and window_of(3600, now) % 3600 == 0
    meter = Meter(store=store, agent="a", user="u", model="test")
    meter.budgets.append(("per_agent", config.budgets.per_agent, counter))  # type: ignore[arg-type]
    try:
        meter.check(now)
    except Exception as exc:
        assert "per_agent budget of 10 tokens per 1h" in str(exc)
    else:
        raise AssertionError("the spent budget passed the check")

"""Budgets shared by replicas through PostgreSQL (the agent's ``store:``), and a store out of reach."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid

import pytest
from pydantic_ai.models.function import FunctionModel

from agents.llm.agent import LlmAgent
from agents.settings import AgentSettings
from agents.testing import AgentHarness, llm_agent
from mesh.a2a import TaskState
from mesh.telemetry.pgusage import PgUsageStore
from mesh.telemetry.usage import Counter
from tests.agents.llm.test_llm_budgets import costly
from tests.whole_product_clients import eventually

BUDGETS = {"per_user": {"tokens": 1500, "period": "1d"}}


def replica(**llm: object) -> LlmAgent:
    # usage_store "": the default, which follows the agent's task store.
    return llm_agent({"model": "test", "usage_store": "", "stream": False, **llm}, FunctionModel(costly))


def harness(agent: LlmAgent, namespace: str, store: str) -> AgentHarness:
    return AgentHarness(agent, settings=AgentSettings(store=store), namespace=namespace)


async def test_a_user_over_budget_is_refused_by_a_replica_that_did_not_see_the_spending(postgres_url: str) -> None:
    namespace = f"u{uuid.uuid4().hex[:10]}"
    one, two = replica(budgets=BUDGETS), replica(budgets=BUDGETS)
    async with harness(one, namespace, postgres_url) as first, harness(two, namespace, postgres_url) as second:
        assert (await second.send("a")).status.state is TaskState.completed  # 1000 of 1500, by replica two
        assert isinstance(two._usage.store, PgUsageStore)  # chosen by store: alone
        assert (await first.send("b")).status.state is TaskState.completed  # reads 1000 first: may go, 2000
        store = two._usage.store
        [user] = {r.user for r in await asyncio.to_thread(store.rows, 0.0)}  # whom the budget counts
        counter = Counter("user", user, 86400)

        async def two_sees_it() -> tuple[bool, str]:  # its cached 1000 is read again once older than 1 s
            used = store.spent(counter, time.time())
            return used >= 2000, f"replica two counts {used}"

        await eventually(two_sees_it, timeout=10, what="replica two reads what replica one spent")
        refused = await second.send("c")
    assert refused.status.state is TaskState.failed
    assert "the per_user budget of 1500 tokens per 1d is spent" in second.text(refused)
    assert "(2000 used)" in second.text(refused)


async def test_a_new_replica_reads_the_shared_counter_before_its_first_request(postgres_url: str) -> None:
    namespace = f"u{uuid.uuid4().hex[:10]}"
    budgets = {"per_agent": {"tokens": 1000, "period": "12h"}}
    async with harness(replica(budgets=budgets), namespace, postgres_url) as first:
        assert (await first.send("one")).status.state is TaskState.completed
    async with harness(replica(budgets=budgets), namespace, postgres_url) as other:  # another host, later
        refused = await other.send("two")
    assert refused.status.state is TaskState.failed
    assert "the per_agent budget of 1000 tokens per 12h is spent for agent 'assistant' (1000 used)" in other.text(
        refused
    )


async def test_the_task_answers_when_the_shared_store_is_out_of_reach(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = replica(budgets=BUDGETS)
    with caplog.at_level(logging.WARNING):
        async with harness(agent, "test", f"postgresql://mesh@127.0.0.1:{port}/mesh") as mesh:
            answered = await mesh.send("hi")
            store = agent._usage.store
    assert answered.status.state is TaskState.completed and mesh.text(answered) == "ok"
    assert isinstance(store, PgUsageStore) and store.lost == 1  # counted, and logged
    assert "unreachable" in caplog.text and "tasks go on" in caplog.text, caplog.text
    assert "1 usage row(s) not written" in caplog.text, caplog.text

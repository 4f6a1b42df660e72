"""Scheduled runs in their user's chat history (the real scheduler, broker, agent and gateway): a
schedule with ``user: ada`` shows in Ada's conversations and nobody else's, each run once, on the
machine's record and on a PostgreSQL one that two gateways share."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from agents.builtin.calculator import CalculatorAgent
from gateways.http.server import HttpGateway
from gateways.http.settings import HttpGatewaySettings
from mesh.broker import BrokerSettings
from mesh.schedules import ManualClock, ScheduleSpec
from mesh.schedules.pgstore import PostgresScheduleStore
from mesh.schedules.scheduler import Scheduler
from mesh.store import parse_store_url
from tests.conftest import ServeAgent
from tests.gateways.chat.test_http import BASIC, signed_in
from tests.gateways.conftest import StartGateway

START = datetime(2026, 12, 3, 7, 0, 30, tzinfo=UTC)
SPEC = ScheduleSpec.model_validate(
    {"name": "sums", "agent": "calculator", "message": "2 + 2", "every": "1m", "user": "ada"}
)


async def tick(scheduler: Scheduler, clock: ManualClock, minute: int) -> None:
    """Move the clock to 07:``minute`` and wait for the scheduler's run of it to end."""
    count = len(scheduler.outcomes)
    await clock.set(START.replace(minute=minute, second=0))
    async with asyncio.timeout(30), scheduler.ran:
        await scheduler.ran.wait_for(lambda: len(scheduler.outcomes) > count)
    assert scheduler.outcomes[-1][1].outcome in ("completed", None), scheduler.outcomes


async def listed(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    response = await client.get("/chat/api/conversations")
    assert response.status_code == 200, response.text
    conversations: list[dict[str, Any]] = response.json()["conversations"]
    return conversations


def answer_text(turn: dict[str, Any]) -> str:
    [task] = turn["events"]
    return "".join(p.get("text", "") for p in task["status"]["message"]["parts"])


async def test_a_scheduled_run_is_in_its_users_chat_history_once_and_nobody_elses(
    serve_agent: ServeAgent,
    start_gateway: StartGateway,
    broker_settings: BrokerSettings,
    namespace: str,
    tmp_path: Path,
) -> None:
    await serve_agent(CalculatorAgent())
    clock = ManualClock(START)
    scheduler = Scheduler([SPEC], broker=broker_settings, namespace=namespace, source=tmp_path / "m.yaml", clock=clock)
    await scheduler.start()  # the machine's record: the one the gateway reads by default
    try:
        gateway = await start_gateway(wait_for=("calculator",), auth=BASIC)
        ada, bob = await signed_in(gateway.public_url, "ada"), await signed_in(gateway.public_url, "bob")
        await tick(scheduler, clock, 1)
        [conversation] = await listed(ada)
        assert (conversation["agent"], conversation["title"]) == ("calculator", "sums (scheduled)")
        assert await listed(ada) == [conversation]  # listed again: the run is not taken twice
        assert await listed(bob) == []
        turns = (await ada.get(f"/chat/api/conversations/{conversation['id']}")).json()["turns"]
        assert [(t["role"], t.get("text"), t["state"]) for t in turns] == [
            ("user", "2 + 2", None),
            ("agent", None, "completed"),
        ]
        assert answer_text(turns[1]) == "4" and turns[1]["taskId"] == scheduler.outcomes[-1][1].task_id
        # The conversation goes on in the chat: Ada answers on the run's context.
        assert conversation["contextId"] == turns[1]["events"][0]["contextId"]

        await tick(scheduler, clock, 2)
        turns = (await ada.get(f"/chat/api/conversations/{conversation['id']}")).json()["turns"]
        assert len(turns) == 2  # taken when she lists her conversations
        [again] = await listed(ada)
        turns = (await ada.get(f"/chat/api/conversations/{again['id']}")).json()["turns"]
        assert again["id"] == conversation["id"] and [t["role"] for t in turns] == ["user", "agent"] * 2

        # Deleted, it is not filled again with the old runs; the next run starts it anew.
        assert (await ada.delete(f"/chat/api/conversations/{conversation['id']}")).status_code == 204
        assert await listed(ada) == []
        await tick(scheduler, clock, 3)
        [anew] = await listed(ada)
        turns = (await ada.get(f"/chat/api/conversations/{anew['id']}")).json()["turns"]
        assert len(turns) == 2 and answer_text(turns[1]) == "4"
        await ada.aclose()
        await bob.aclose()
    finally:
        await scheduler.stop()


async def test_two_gateways_sharing_a_postgresql_chat_take_each_scheduled_run_once(
    serve_agent: ServeAgent, broker_settings: BrokerSettings, namespace: str, tmp_path: Path, postgres_url: str
) -> None:
    await serve_agent(CalculatorAgent())
    clock = ManualClock(START)
    store = PostgresScheduleStore(parse_store_url(postgres_url), namespace)
    scheduler = Scheduler(
        [SPEC], broker=broker_settings, namespace=namespace, source=tmp_path / "m.yaml", clock=clock, store=store
    )
    await scheduler.start()
    settings = HttpGatewaySettings.model_validate({"port": 0, "auth": BASIC, "chat_store": postgres_url})
    gateways = [
        HttpGateway(settings, broker=broker_settings, namespace=namespace, schedules_store=postgres_url)
        for _ in range(2)
    ]
    try:
        for gateway in gateways:
            await gateway.start()
        clients = [await signed_in(g.public_url, "ada") for g in gateways]
        for minute in (1, 2, 3):
            await tick(scheduler, clock, minute)
        # Both gateways take Ada's runs at once: each run lands once.
        first, second = await asyncio.gather(*(listed(c) for c in clients))
        assert first == second and len(first) == 1
        turns = (await clients[1].get(f"/chat/api/conversations/{first[0]['id']}")).json()["turns"]
        assert [t["role"] for t in turns] == ["user", "agent"] * 3
        assert [t["taskId"] for t in turns[1::2]] == [o.task_id for _, o in scheduler.outcomes]
        for client in clients:
            await client.aclose()
    finally:
        for gateway in gateways:
            await gateway.stop()
        await scheduler.stop()

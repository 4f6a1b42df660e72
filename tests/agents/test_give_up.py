"""An agent whose backend is gone for good leaves the mesh in a background task that is kept
referenced and whose failure is logged, never dropped as "exception was never retrieved"."""

from __future__ import annotations

import asyncio
import logging

import pytest

from agents.agent import Agent


class Idle(Agent):
    name = "idle"

    async def handle(self, message: object, ctx: object) -> str:
        return ""


async def test_give_up_keeps_the_leave_task_and_logs_its_failure(caplog: pytest.LogCaptureFixture) -> None:
    agent = Idle()
    left = asyncio.Event()
    calls = 0

    async def leave() -> None:
        nonlocal calls
        calls += 1
        left.set()
        raise RuntimeError("the broker is gone too")

    agent.leave_mesh = leave
    with caplog.at_level(logging.ERROR, logger="agents.agent"):
        agent.give_up("worker failed 3 times")
        agent.give_up("and again")  # one leave, not two
        leaving = agent._leaving
        assert leaving is not None  # referenced: the loop holds tasks only weakly
        await asyncio.wait([leaving])
        await asyncio.sleep(0)  # the done callback runs on the next loop turn
    assert left.is_set() and calls == 1
    assert "leaving the mesh failed: the broker is gone too" in caplog.text


async def test_give_up_without_a_runtime_says_so(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="agents.agent"):
        Idle().give_up("no worker")
    assert "cannot leave the mesh (no runtime hook)" in caplog.text

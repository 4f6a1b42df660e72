"""Background tasks are kept until they end and their failures are logged, never left as
"Task exception was never retrieved"."""

from __future__ import annotations

import asyncio
import logging

import pytest

from mesh.background import BackgroundTasks

log = logging.getLogger("tests.background")


async def test_a_failing_background_task_is_logged_with_its_owner(caplog: pytest.LogCaptureFixture) -> None:
    background = BackgroundTasks(log, "the owner")
    release = asyncio.Event()

    async def fail() -> None:
        await release.wait()
        raise ValueError("broken on purpose")

    with caplog.at_level(logging.ERROR, logger="tests.background"):
        task = background.spawn(fail(), name="failing")
        assert len(background) == 1 and list(background) == [task]  # referenced while it runs
        release.set()
        await asyncio.wait([task])
    assert len(background) == 0
    assert "the owner: background task failing failed: ValueError('broken on purpose')" in caplog.text


async def test_cancel_all_ends_every_task() -> None:
    background = BackgroundTasks(log, "stopping")
    tasks = [background.spawn(asyncio.Event().wait()) for _ in range(3)]
    await background.cancel_all()
    assert all(task.cancelled() for task in tasks) and len(background) == 0

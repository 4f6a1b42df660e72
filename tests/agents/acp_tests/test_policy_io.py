"""The ACP client policy reads and writes files off the event loop: a slow file (a FIFO no
writer has opened yet, a slow disk) does not stop the agent's other work."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from pathlib import Path

from agents.acp.policy import ClientPolicy


def _write_fifo(path: Path, text: str) -> None:
    """Write to the FIFO if a reader has it open; else nothing (never block)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "w") as pipe:
            pipe.write(text)


async def test_a_read_waiting_on_its_file_does_not_stop_the_loop(tmp_path: Path) -> None:
    fifo = tmp_path / "slow.txt"
    os.mkfifo(fifo)
    policy = ClientPolicy(directory=tmp_path)
    # A safety net: a read that blocks the loop is let go after 3 s, so the test fails, not hangs.
    done = threading.Event()
    safety = threading.Thread(target=lambda: (done.wait(3), _write_fifo(fifo, "let go")), daemon=True)
    safety.start()
    try:
        reading = asyncio.create_task(policy.read_text_file({"path": str(fifo)}))
        await asyncio.sleep(0)  # the read starts: on the loop, it would hold it until a writer comes
        assert not reading.done(), "the read ran on the event loop: nothing else ran until it ended"
        while not reading.done():  # the read opens the FIFO in its thread: write once it has
            await asyncio.to_thread(_write_fifo, fifo, "hello from the pipe")
            await asyncio.wait({reading}, timeout=0.05)
        assert reading.result() == {"content": "hello from the pipe"}
    finally:
        done.set()
        safety.join()


async def test_a_write_goes_through_a_thread_too(tmp_path: Path) -> None:
    policy = ClientPolicy(directory=tmp_path, write=True)
    assert await policy.write_text_file({"path": str(tmp_path / "out.txt"), "content": "written"}) == {}
    assert (tmp_path / "out.txt").read_text() == "written"

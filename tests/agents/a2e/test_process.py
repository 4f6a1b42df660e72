"""One worker process without the mesh: answers of unknown types, the shutdown sequence, its pipes."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

import pytest

from agents.a2e import child as child_module
from agents.a2e.messages import GenericMessage, SkillCallRequest, SkillCallResponse, SkillEvent
from agents.a2e.process import PendingCall, WorkerCommand, WorkerProcess

EXAMPLE = Path(__file__).resolve().parent.parents[2] / "agents" / "a2e" / "examples" / "echo_worker.py"

# Answers the handshake, then every other request with an event of an unknown kind and an
# answer of a type nobody registered; ignores SIGTERM and the end of its input, so only
# SIGKILL stops it.
STUBBORN = """
import json, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for line in sys.stdin:
    m = json.loads(line)
    kind = "handshake/resp" if m["type"] == "handshake/req" else "tool/call/resp"
    if kind == "tool/call/resp":
        print(json.dumps({"type": "skill/event", "req_id": m["id"], "kind": "metric", "seq": 0}), flush=True)
    print(json.dumps({"type": kind, "id": "x", "req_id": m["id"], "ok": True}), flush=True)
while True:
    time.sleep(1)
"""


async def test_an_answer_of_an_unknown_type_still_resolves_its_call(caplog: pytest.LogCaptureFixture) -> None:
    worker = WorkerProcess(WorkerCommand.of([sys.executable, "-c", STUBBORN]), name="odd")
    await worker.start(agent_caps=[], timeout=10)
    try:
        call = await worker.open_call(SkillCallRequest(name="anything"))
        answer = await call.result()
        assert isinstance(answer, GenericMessage) and answer.type == "tool/call/resp"
        assert "skipped a skill/event message that fits no event model" in caplog.text
    finally:
        worker.kill("test over")
        await worker.stop()


async def test_a_cooperative_worker_exits_on_shutdown() -> None:
    worker = WorkerProcess(WorkerCommand.of([sys.executable, str(EXAMPLE)]), name="polite")
    answer = await worker.start(agent_caps=["skill"], timeout=10)
    assert answer.ok and answer.max_parallel == 4
    assert await worker.stop() == 0


async def test_shutdown_escalates_to_sigterm_then_sigkill(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(child_module, "CLOSE_WAIT_S", 0.2)
    monkeypatch.setattr(child_module, "TERM_WAIT_S", 0.2)
    worker = WorkerProcess(WorkerCommand.of([sys.executable, "-c", STUBBORN]), name="stubborn")
    await worker.start(agent_caps=[], timeout=10)
    with caplog.at_level(logging.WARNING, logger="agents.a2e.child"):
        assert await worker.stop() == -9
    assert "did not exit within 0.2 s; sending SIGTERM" in caplog.text
    assert "did not exit within 0.2 s; sending SIGKILL" in caplog.text


async def test_a_stdout_held_open_by_the_workers_child_is_closed_when_it_exits() -> None:
    # The sleep inherits the worker's stdout and outlives it: no EOF comes, and after the
    # grace the pipe is closed anyway rather than leaked.
    open_fds = len(os.listdir("/proc/self/fd"))
    command = WorkerCommand.of(["sh", "-c", f'sleep 3 2>/dev/null & exec "{sys.executable}" "{EXAMPLE}"'])
    worker = WorkerProcess(command, name="parent")
    await worker.start(agent_caps=[], timeout=10)
    assert await worker.stop() == 0
    assert len(os.listdir("/proc/self/fd")) == open_fds


async def test_a_pending_call_hands_out_answers_in_order_then_times_out() -> None:
    call = PendingCall("r1", release=None)
    first, second = SkillEvent(req_id="r1", seq=0), SkillCallResponse(req_id="r1")
    call.deliver(first)
    waiting = asyncio.ensure_future(call.next(timeout=5))
    await asyncio.sleep(0)  # the first is there already: no waiting
    assert waiting.done() and waiting.result() is first
    waiting = asyncio.ensure_future(call.next(timeout=5))
    await asyncio.sleep(0)
    assert not waiting.done()
    call.finish(second)
    assert await waiting is second and call.done
    with pytest.raises(TimeoutError):
        await call.next(timeout=0.01)

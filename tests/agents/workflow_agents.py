"""Agents and tools the workflow tests wire into graphs."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agents import Agent, TaskContext
from agents.updates import Reply, Status
from mesh.a2a import Message, get_text_from_message


class Upper(Agent):
    """Answers the text upper-cased; counts its calls by text."""

    name = "upper"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.calls: list[str] = []

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        text = get_text_from_message(message)
        self.calls.append(text)
        return text.upper()


class Facts(Agent):
    """Answers data: a confidence and sources, from the DataPart or text it gets; streams progress."""

    name = "facts"

    async def handle(self, message: Message, ctx: TaskContext) -> Any:
        yield Status("looking it up")
        text = get_text_from_message(message)
        sources = [{"url": f"https://example.org/{i}"} for i in range(3)]
        yield Reply(text=f"facts about {text}", data={"confidence": 0.9 if "sure" in text else 0.1, "sources": sources})


class Meeting(Agent):
    """Holds each call until ``expected`` calls are in at once (proves they run in parallel)."""

    name = "meeting"

    def __init__(self, expected: int = 2, **options: Any) -> None:
        super().__init__(**options)
        self.expected = expected
        self.arrived = 0
        self.all_here = asyncio.Event()
        self.spans: list[tuple[float, float]] = []

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        start = time.monotonic()
        self.arrived += 1
        if self.arrived >= self.expected:
            self.all_here.set()
        await self.all_here.wait()
        self.spans.append((start, time.monotonic()))
        return get_text_from_message(message)


class Gauge(Agent):
    """Answers the item; records the most calls running at once."""

    name = "gauge"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.running = 0
        self.most = 0
        self.seen: list[str] = []

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            for _ in range(3):  # let the others overlap (loop passes, not time)
                await asyncio.sleep(0)
            text = get_text_from_message(message)
            self.seen.append(text)
            return f"item {text}"
        finally:
            self.running -= 1


class Flaky(Agent):
    """Fails its first ``failures`` calls, then answers."""

    name = "flaky"

    def __init__(self, failures: int = 2, **options: Any) -> None:
        super().__init__(**options)
        self.failures = failures
        self.calls = 0

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"call {self.calls} fails")
        return f"ok after {self.calls}"


class Holder(Agent):
    """Works until released or canceled (texts in ``passes`` answer at once); records its tasks."""

    name = "holder"

    def __init__(self, passes: tuple[str, ...] = (), **options: Any) -> None:
        super().__init__(**options)
        self.passes = passes
        self.started: list[str] = []
        self.changed = asyncio.Event()
        self.release = asyncio.Event()
        self.canceled: list[str] = []

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        text = get_text_from_message(message)
        self.started.append(text)
        self.changed.set()
        if text in self.passes:
            return f"passed {text}"
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.canceled.append(text)
            self.changed.set()
            raise
        return f"held {text}"


def count_words(text: str, *, at_least: int = 0) -> dict[str, Any]:
    """A tool: counts the words of ``text`` (called with a mapping input's keys as its arguments)."""
    return {"words": max(at_least, len(text.split()))}


async def grow(payload: Any) -> str:
    """An async tool: appends 'x' to the text."""
    return str(payload) + "x"

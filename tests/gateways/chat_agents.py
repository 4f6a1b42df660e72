"""Agents the chat tests talk to: a scripted LLM agent (tools, questions, gated streaming) and a
file reader that answers with what it was sent and saves a report and an image."""

from __future__ import annotations

import asyncio
import struct
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, DeltaToolCalls, FunctionModel

from agents import Agent, TaskContext
from agents.llm.agent import LlmAgent
from agents.testing import llm_agent
from agents.updates import PartsArtifact
from mesh.a2a import FilePart, FileWithUri, Message, get_text_from_message
from tests.agents.llm.scripts import call, tool_returns, user_texts


def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"{city}: 21 °C, sunny"


class Gate:
    """Holds the ``slow`` answer between its first words and the rest; records when the first
    words left the model (wall clock, comparable with the browser's)."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.first_words_at: float | None = None


def assistant(gate: Gate) -> LlmAgent:
    """``assistant``: by the last user message -

    - ``weather <city>``: calls the ``weather`` tool, then answers with its result;
    - ``ask``: asks the user which city (input-required), then answers with the reply;
    - ``book <city>``: calls the ``book`` tool, which needs the user's approval (``approve:``);
    - ``slow``: streams "First words", waits for ``gate``, then the rest;
    - anything else: every user message of the conversation so far, joined by `` | ``.
    """

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        returns = tool_returns(messages)
        texts = user_texts(messages)
        last = texts[-1] if texts else ""
        if returns:
            if returns[0].tool_name == "ask_user":
                yield f"You chose **{returns[0].content}**."
            elif returns[0].tool_name == "book":
                yield f"Booking: {returns[0].content}"
            else:
                yield f"The weather: {returns[0].content}."
            return
        if last.startswith("weather"):
            yield call("weather", {"city": last.partition(" ")[2] or "Paris"}, "w1")
        elif last.startswith("book"):
            yield call("book", {"city": last.partition(" ")[2] or "Paris"}, "b1")
        elif last == "ask":
            yield call("ask_user", {"question": "Which city?"}, "q1")
        elif last == "slow":
            gate.first_words_at = time.time()
            yield "First words"
            await gate.open.wait()
            yield " and the rest."
        else:
            yield " | ".join(texts)

    model = FunctionModel(stream_function=stream)
    config = {"model": "test", "approve": ["book"], "usage_store": ":memory:"}
    return llm_agent(config, model, name="assistant", tools=[weather, book])


def book(city: str) -> str:
    """Book a trip to a city."""
    return f"booked {city}"


def png(width: int = 48, height: int = 32) -> bytes:
    """A small solid PNG (no imaging library needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x2f\x6f\xdf" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


class Reader(Agent):
    """``reader``: answers with each file it was sent (name, size, first line), and saves a
    report and a picture as artifacts of the task."""

    name = "reader"
    description = "Reads the files you send"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.users: list[str | None] = []

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        self.users.append(ctx.user_id)
        lines = [f"Text: {get_text_from_message(message) or '(none)'}"]
        for part in message.parts:
            if isinstance(part, FilePart) and isinstance(part.file, FileWithUri):
                data = await ctx.load_artifact(part.file.uri)
                first = data.decode(errors="replace").splitlines()[0] if data else ""
                lines.append(f"- got `{part.file.name}`: {len(data)} bytes, first line: {first}")
        await ctx.save_artifact("report.txt", "\n".join(lines).encode(), "text/plain")
        await ctx.save_artifact("picture.png", png(), "image/png")
        if ctx.emit is not None:  # what a hostile agent might send: shown, never run
            evil = FilePart(file=FileWithUri(uri="javascript:alert(1)", name="evil.html"))
            ctx.emit(PartsArtifact("evil", [evil]))
        lines.append("Markup: <b>bold?</b> <img src=x onerror=alert(1)> [click](javascript:alert(1))")
        return "\n".join(lines)


def booker() -> LlmAgent:
    """An LLM agent whose ``book`` tool needs approval: it answers with the tool's result."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        returned = tool_returns(messages)
        if returned:
            yield f"result: {returned[0].content}"
        else:
            yield call("book", {"city": "Oslo"}, "b1")

    def book(city: str) -> str:
        """Book a trip."""
        return f"booked {city}"

    config = {"model": "test", "approve": ["book"], "usage_store": ":memory:"}
    return llm_agent(config, FunctionModel(stream_function=stream), name="booker", tools=[book])

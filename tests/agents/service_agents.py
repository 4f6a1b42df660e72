"""Agents the service tests run on the real broker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from agents import (
    Agent,
    AuthRequired,
    DataArtifact,
    FileArtifact,
    InputRequired,
    MessageOnly,
    Rejected,
    Reply,
    Status,
    TaskContext,
    TextArtifact,
    Update,
)
from mesh.a2a import AgentSkill, Message, get_text_from_message


class Echo(Agent):
    name = "echo"
    description = "echoes"
    skills = (AgentSkill(id="echo", name="Echo", description="echo", tags=["echo"]),)

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        return get_text_from_message(message)


class Streamer(Agent):
    """Emits ``n`` progress steps with artifacts; waits on ``gate`` between steps if set."""

    name = "streamer"

    def __init__(self, *, steps: int = 3, **options: Any) -> None:
        super().__init__(**options)
        self.steps = steps
        self.gate: asyncio.Event | None = None
        self.started = asyncio.Event()
        self.cancelled_seen = asyncio.Event()

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update]:
        self.started.set()
        try:
            for i in range(self.steps):
                yield Status(f"step {i}")
                yield TextArtifact("log", f"line {i}\n", artifact_id="log", append=i > 0)
                if self.gate is not None:
                    await self.gate.wait()
                    self.gate.clear()
            yield DataArtifact("summary", {"steps": self.steps})
            yield FileArtifact("blob.bin", content=b"\x00\x01", mime_type="application/octet-stream")
            yield Reply("done")
        except asyncio.CancelledError:
            self.cancelled_seen.set()
            raise


class Blocker(Agent):
    """Works until canceled; ``started`` fires when a task is running."""

    name = "blocker"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.started = asyncio.Event()
        self.cancellations = 0

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancellations += 1
            assert ctx.is_cancelled
            raise
        return "never"


class Asker(Agent):
    """Generator style: asks for a name, then greets."""

    name = "asker"

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update]:
        answer = yield InputRequired("What is your name?")
        yield Reply(f"Hello, {get_text_from_message(answer)}!")


class Namer(Agent):
    """Stateless two turns: asks for a name until a message says ``name:...`` (so any replica
    continues the task, the one that took it over included)."""

    name = "namer"

    async def handle(self, message: Message, ctx: TaskContext) -> str | InputRequired:
        text = get_text_from_message(message)
        if text.startswith("name:"):
            return f"Hello, {text.removeprefix('name:')}!"
        return InputRequired("What is your name? (answer name:...)")


class TwoStep(Agent):
    """Plain-coroutine style: asks once, then answers using the context history."""

    name = "twostep"

    async def handle(self, message: Message, ctx: TaskContext) -> str | InputRequired:
        if not ctx.history:
            return InputRequired("Which colour?")
        return f"{get_text_from_message(message)} after {len(ctx.history)} earlier messages"


class Broken(Agent):
    name = "broken"

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        raise RuntimeError(f"cannot handle {get_text_from_message(message)!r}")


class Whoami(Agent):
    """Reports what it knows about the caller."""

    name = "whoami"

    async def handle(self, message: Message, ctx: TaskContext) -> Reply:
        return Reply(
            data={
                "user": ctx.user_id,
                "config": ctx.user_config,
                "depth": ctx.call_depth,
                "metadata": ctx.metadata,
                "history": len(ctx.history),
            }
        )


class Decider(Agent):
    """Every ending of the handler API, chosen by the text: ``message`` (a bare Message),
    ``reject``, ``auth`` (auth-required, then done with the next message), else done at once;
    no working state first."""

    name = "decider"
    starts_working = False

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update]:
        text = get_text_from_message(message)
        if text == "message":
            yield MessageOnly("just a message")
        elif text == "reject":
            yield Rejected("not my job")
        elif text == "auth":
            answer = yield AuthRequired("sign in first")
            yield Reply(f"signed in: {get_text_from_message(answer)}")
        else:
            yield Reply(f"done: {text}")


class Relay(Agent):
    """Delegates the text to ``next_agent`` and answers with what it got back."""

    name = "relay"

    def __init__(
        self,
        *,
        next_agent: str,
        forward: bool = False,
        stream: bool = False,
        timeout: float | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.next_agent, self.forward, self.stream, self.timeout = next_agent, forward, stream, timeout

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        task = await ctx.delegate(
            self.next_agent,
            get_text_from_message(message),
            forward=self.forward,
            stream=self.stream,
            timeout=self.timeout,
        )
        answer = get_text_from_message(task.status.message) if task.status.message else ""
        return f"{self.name}<{answer}>"


class FanOut(Agent):
    """Delegates to every peer in ``peers`` at once and joins the answers."""

    name = "fanout"

    def __init__(self, *, peers: list[str], **options: Any) -> None:
        super().__init__(**options)
        self.peers = peers

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        text = get_text_from_message(message)
        tasks = await asyncio.gather(*(ctx.delegate(peer, f"{text} to {peer}") for peer in self.peers))
        return " | ".join(get_text_from_message(t.status.message) for t in tasks if t.status.message)


class Ticker(Agent):
    """Emits a status every ``every_s`` for ``ticks`` times, then answers."""

    name = "ticker"

    def __init__(self, *, ticks: int = 5, every_s: float = 0.1, **options: Any) -> None:
        super().__init__(**options)
        self.ticks, self.every_s = ticks, every_s

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update]:
        for i in range(self.ticks):
            yield Status(f"tick {i}")
            await asyncio.sleep(self.every_s)
        yield Reply("ticked")


class Ledger(Agent):
    """Appends each message's text to the file its metadata names (``ledger``): a record of every
    run that outlives the process. A text starting with ``hang`` then waits forever."""

    name = "ledger"

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        text = get_text_from_message(message)
        with open(ctx.metadata["ledger"], "a", encoding="utf-8") as ledger:
            ledger.write(text + "\n")
        if text.startswith("hang"):
            await asyncio.Event().wait()
        return text


class Stubborn(Agent):
    """Works until canceled, then takes its time to stop: until ``release`` is set."""

    name = "stubborn"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.release = asyncio.Event()

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await self.release.wait()
            raise
        return "never"

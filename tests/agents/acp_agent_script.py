"""An ACP agent written with the official SDK, run by the tests as a mesh agent's subprocess.

The prompt's first word says what to do:

- ``echo TEXT``: a tool call (pending, then completed), then TEXT in two message chunks;
- ``slow N``: N thought chunks, 50 ms apart; a ``session/cancel`` ends the turn ``cancelled``
  and writes ``cancelled`` to ``$ACP_TEST_MARKER``;
- ``permission KIND``: asks permission for a tool call of that kind; answers with the outcome;
- ``read PATH`` / ``write PATH``: asks the client to read / write the file; answers with the
  content, or with ``refused: <the client's error>``;
- ``terminal CMD ARGS...``: runs the command in a terminal of the client; answers with
  ``<exit code>: <output>``, or ``refused: ...``;
- ``count``: how many prompts this session has had (sessions are per A2A context);
- ``crash``: writes to stderr and exits with status 3 in the middle of the turn;
- ``refuse``: ends the turn with ``stopReason: refusal``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    start_tool_call,
    text_block,
    update_agent_message,
    update_agent_thought,
    update_tool_call,
)
from acp.schema import AgentCapabilities, Implementation, PermissionOption, PromptCapabilities, ToolCallUpdate


class ScriptedAgent(Agent):
    def __init__(self) -> None:
        self.prompts: dict[str, int] = {}
        self.cancelled: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, **kw: Any) -> Any:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=False, prompt_capabilities=PromptCapabilities(image=True, embedded_context=True)
            ),
            agent_info=Implementation(name="scripted", version="0.1"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kw: Any) -> Any:
        session_id = uuid.uuid4().hex
        self.prompts[session_id] = 0
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, prompt: list[Any], session_id: str, **kw: Any) -> Any:
        self.prompts[session_id] = self.prompts.get(session_id, 0) + 1
        text = " ".join(getattr(b, "text", "") for b in prompt).strip()
        command, _, rest = text.partition(" ")
        say = self._say(session_id)
        if command == "echo":
            await self._conn.session_update(session_id, start_tool_call("t1", "echo", kind="other", status="pending"))
            await self._conn.session_update(session_id, update_tool_call("t1", status="completed"))
            half = len(rest) // 2
            await say(rest[:half])
            await say(rest[half:])
        elif command == "slow":
            for step in range(int(rest)):
                if session_id in self.cancelled:
                    marker = os.environ.get("ACP_TEST_MARKER")
                    if marker:
                        with open(marker, "w") as out:
                            out.write("cancelled")
                    return PromptResponse(stop_reason="cancelled")
                await self._conn.session_update(session_id, update_agent_thought(text_block(f"step {step}")))
                await asyncio.sleep(0.05)  # the work being cancelled
        elif command == "permission":
            await self._conn.session_update(session_id, start_tool_call("p1", "risky", kind=rest, status="pending"))
            answer = await self._conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id="p1", kind=rest),
                options=[
                    PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
                ],
            )
            outcome = answer.outcome
            await say(getattr(outcome, "option_id", None) or outcome.outcome)
        elif command in ("read", "write"):
            try:
                if command == "read":
                    answer = await self._conn.read_text_file(path=rest, session_id=session_id)
                    await say(answer.content)
                else:
                    await self._conn.write_text_file(content="written", path=rest, session_id=session_id)
                    await say("wrote")
            except RequestError as exc:
                await say(f"refused: {exc}")
        elif command == "terminal":
            argv = rest.split()
            try:
                created = await self._conn.create_terminal(session_id=session_id, command=argv[0], args=argv[1:])
                done = await self._conn.wait_for_terminal_exit(session_id=session_id, terminal_id=created.terminal_id)
                out = await self._conn.terminal_output(session_id=session_id, terminal_id=created.terminal_id)
                await self._conn.release_terminal(session_id=session_id, terminal_id=created.terminal_id)
                await say(f"{done.exit_code}: {out.output.strip()}")
            except RequestError as exc:
                await say(f"refused: {exc}")
        elif command == "count":
            await say(str(self.prompts[session_id]))
        elif command == "crash":
            await say("about to crash")
            print("scripted agent: crashing on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        elif command == "refuse":
            return PromptResponse(stop_reason="refusal")
        else:
            await say(f"unknown command {command!r}")
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kw: Any) -> None:
        self.cancelled.add(session_id)

    def _say(self, session_id: str) -> Any:
        async def say(text: str) -> None:
            await self._conn.session_update(session_id, update_agent_message(text_block(text)))

        return say


if __name__ == "__main__":
    asyncio.run(run_agent(ScriptedAgent()))

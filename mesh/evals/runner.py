"""Run an eval suite against the live mesh: every case (``repeat`` times) as an ordinary task of
its agent, at most ``concurrency`` at once, each answer scored (:mod:`mesh.evals.scorers`).

A case is streamed (``message/stream``) so that what an LLM agent does on the way is seen: its
tool calls come as status updates carrying ``{"type": "tool_call", "function_name", "arguments"}``
DataParts. A case's task left waiting for input is canceled, so an eval leaves nothing hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mesh.a2a import (
    INTERRUPTED_STATES,
    DataPart,
    Message,
    Part,
    Task,
    TaskStatusUpdateEvent,
    TextPart,
    create_data_part,
    create_user_message,
)
from mesh.a2a.exceptions import RpcError
from mesh.client import MeshClient
from mesh.errors import MeshError
from mesh.evals.scorers import Answer, Check, ToolCall, score
from mesh.evals.spec import Case, Judge, Suite

__all__ = ["CaseResult", "run_suite"]


@dataclass(frozen=True, slots=True)
class CaseResult:
    case: Case
    agent: str
    run: int  # 1..repeat
    answer: Answer
    checks: list[Check]

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def label(self) -> str:
        return self.case.name if self.run == 1 else f"{self.case.name}#{self.run}"


async def run_suite(
    client: MeshClient,
    suite: Suite,
    *,
    agent: str | None = None,
    repeat: int = 1,
    concurrency: int | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Every case of ``suite``, ``repeat`` times, in file order in the result."""
    bound = asyncio.Semaphore(concurrency or suite.concurrency)
    beside = str(suite.source.parent.resolve())
    if any(case.expect.python for case in suite.cases) and beside not in sys.path:
        sys.path.insert(0, beside)  # `python: checks:fn` finds checks.py beside the eval file

    async def one(case: Case, run: int) -> CaseResult:
        async with bound:
            target = suite.agent_of(case, agent)
            answer = await ask(client, target, message_of(suite, case), case.timeout_s or suite.timeout_s)

            async def judge(spec: Judge, judged: Case, said: Answer) -> Check:
                return await ask_judge(client, spec, judged, said, suite.timeout_s)

            result = CaseResult(case, target, run, answer, await score(case.expect, case, answer, judge))
        if on_result is not None:
            on_result(result)
        return result

    jobs = [one(case, run) for case in suite.cases for run in range(1, repeat + 1)]
    return list(await asyncio.gather(*jobs))


def message_of(suite: Suite, case: Case) -> Message:
    """The case's message: its text, its data, its files (read relative to the eval file)."""
    from mesh.cli.send_parts import file_parts

    given = case.input
    parts: list[Part] = [TextPart(text=given.text)] if given.text else []
    if given.data is not None:
        parts.append(create_data_part(given.data))
    parts += file_parts([suite.source.parent / path for path in given.files])
    return create_user_message(parts, metadata=given.metadata)


async def ask(client: MeshClient, agent: str, message: Message, idle_timeout: float) -> Answer:
    """Stream ``message`` to ``agent`` and gather the answer; a failed call is an answer with ``error``."""
    started = time.monotonic()
    calls: dict[str, ToolCall] = {}
    final: Task | Message | None = None
    try:
        async for item in client.stream(agent, message, idle_timeout=idle_timeout):
            if isinstance(item, TaskStatusUpdateEvent) and item.status.message is not None:
                _tool_calls(item.status.message.parts, calls)
            elif isinstance(item, Task | Message):
                final = item
    except (MeshError, RpcError, TimeoutError) as exc:
        return Answer(state="error", text="", latency_s=time.monotonic() - started, error=_said(exc))
    latency = time.monotonic() - started
    if final is None:
        return Answer(state="error", text="", latency_s=latency, error="the stream ended without the task")
    if isinstance(final, Message):
        text, data = _content(final.parts)
        return Answer(state="completed", text=text, data=data, latency_s=latency, tool_calls=list(calls.values()))
    for past in final.history or ():
        _tool_calls(past.parts, calls)
    said = final.status.message
    text, data = _content(said.parts) if said is not None else ("", None)
    if not text:  # an answer given as data (a workflow's), else as artifacts only
        text = json.dumps(data, ensure_ascii=False) if data is not None else ""
        text = text or "\n".join(_content(artifact.parts)[0] for artifact in final.artifacts or ())
    if final.status.state in INTERRUPTED_STATES:
        with contextlib.suppress(MeshError, RpcError, TimeoutError):  # leave no task waiting for an answer
            await client.cancel_task(agent, final.id, timeout=idle_timeout)
    return Answer(
        state=final.status.state.value,
        text=text,
        data=data,
        latency_s=latency,
        tool_calls=list(calls.values()),
        tokens=_tokens(said.metadata if said is not None else None),
        task_id=final.id,
    )


def _said(exc: BaseException) -> str:
    if isinstance(exc, RpcError):
        return f"the agent answered with error {exc.code}: {exc.error.message}"
    return str(exc) or type(exc).__name__


def _tool_calls(parts: list[Part], calls: dict[str, ToolCall]) -> None:
    for part in parts:
        if isinstance(part, DataPart) and part.data.get("type") == "tool_call":
            call_id = str((part.metadata or {}).get("tool_call_id") or len(calls))
            arguments = part.data.get("arguments")
            name = str(part.data.get("function_name", ""))
            calls.setdefault(call_id, ToolCall(name, arguments if isinstance(arguments, dict) else {}))


def _content(parts: list[Part]) -> tuple[str, Any]:
    """The text of ``parts`` and their first data (a structured answer's content), tool events left out."""
    text = "".join(part.text for part in parts if isinstance(part, TextPart))
    for part in parts:
        if isinstance(part, DataPart) and part.data.get("type") not in ("tool_call", "tool_result"):
            if part.data.get("type") == "structured_output" and "content" in part.data:
                return text, part.data["content"]
            return text, part.data
    return text, None


def _tokens(metadata: dict[str, Any] | None) -> int | None:
    usage = (metadata or {}).get("llm")
    if not isinstance(usage, dict):
        return None
    counts = [usage.get("inputTokens"), usage.get("outputTokens")]
    return sum(c for c in counts if isinstance(c, int)) if any(isinstance(c, int) for c in counts) else None


_JUDGE_PROMPT = """You judge an agent's answer against criteria. Reply with PASS or FAIL first, then one short reason.

Criteria: {criteria}

The question the agent was asked:
{question}

The agent's answer:
{answer}"""


async def ask_judge(client: MeshClient, judge: Judge, case: Case, answer: Answer, timeout: float) -> Check:
    """The judge agent's verdict: its answer's first word (PASS / FAIL), or a structured
    ``{"pass": bool, "reason": str}``."""
    prompt = _JUDGE_PROMPT.format(criteria=judge.criteria, question=case.input.text, answer=answer.text)
    verdict = await ask(client, judge.agent, create_user_message([TextPart(text=prompt)]), timeout)
    if verdict.error is not None or verdict.state != "completed":
        return Check("judge", False, f"the judge {judge.agent} gave no verdict: {verdict.error or verdict.state}")
    if isinstance(verdict.data, dict) and isinstance(verdict.data.get("pass"), bool):
        return Check("judge", verdict.data["pass"], str(verdict.data.get("reason", "")))
    words = verdict.text.strip().split(None, 1)
    first = words[0].strip(".:!*").upper() if words else ""
    reason = words[1].strip() if len(words) > 1 else ""
    if first in ("PASS", "FAIL"):
        return Check("judge", first == "PASS", reason if first == "FAIL" else "")
    return Check("judge", False, f"the judge {judge.agent} said neither PASS nor FAIL: {verdict.text[:80]!r}")

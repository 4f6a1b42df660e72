"""A mesh call's answers as E2A frames: events as ``a2a.stream_event`` frames, then exactly one
final frame, the answer (``a2a.task`` / ``a2a.message`` / ``e2a.complete``) or an ``e2a.error``
whose ``code`` is the JSON-RPC code a client sees (the README's table)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

from gateways.errors import TIMEOUT
from mesh.a2a import ErrorCode, RpcError
from mesh.calls import Answer, Call
from mesh.e2a import E2AResponse, ResponseSequencer
from mesh.errors import AgentUnavailableError, CallTimeoutError, MeshError

__all__ = ["answer_frames"]

_BRANCHES = {
    "status-update": "status_update",
    "artifact-update": "artifact_update",
    "task": "task",
    "message": "message",
}


async def answer_frames(
    sequencer: ResponseSequencer, call: Call, observe: Callable[[dict[str, Any]], None]
) -> AsyncGenerator[E2AResponse, None]:
    """The call's answers as E2A frames; ``observe`` sees every Task and event on the way."""
    try:
        while True:
            answer = await call.next()
            if answer.final:
                break
            result = answer.json
            if isinstance(result, dict):
                observe(result)
                branch = _BRANCHES.get(str(result.get("kind")), "status_update")
                yield sequencer.a2a_stream_event(branch, result)
    except CallTimeoutError as exc:
        reason = "the request's timeout ran out" if exc.reason == "deadline" else f"nothing came for {exc.waited_s:g} s"
        final = sequencer.error(
            TIMEOUT,
            f"Timeout: agent {call.agent!r} did not finish task {exc.task_id!r} ({reason})"
            + ("; the task was canceled" if exc.canceled else ""),
            {"errorType": "Timeout", "agentName": call.agent, "taskId": exc.task_id},
        )
    except RpcError as exc:  # the agent's error answer, or a malformed answer
        final = sequencer.error(exc.code, exc.error.message, exc.data)
    except AgentUnavailableError as exc:  # nobody listens on its topic, or it went away
        final = sequencer.error(
            int(ErrorCode.AGENT_GONE),
            str(exc),
            {"errorType": "AgentGone", "agentName": call.agent, "taskId": call.task_id, "reason": exc.reason},
        )
    except MeshError as exc:  # the request could not be delivered
        final = sequencer.error(-32603, f"the request to agent {call.agent!r} failed: {exc}")
    else:
        final = _final(sequencer, answer, observe)
    yield final


def _final(sequencer: ResponseSequencer, answer: Answer, observe: Callable[[dict[str, Any]], None]) -> E2AResponse:
    result = answer.json
    if isinstance(result, dict) and result.get("kind") == "task":
        observe(result)
        return sequencer.finish("a2a.task", result)
    if isinstance(result, dict) and result.get("kind") == "message":
        return sequencer.finish("a2a.message", result)
    return sequencer.complete(result)

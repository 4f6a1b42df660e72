"""A gateway call to an EMQX "A2A over MQTT" profile agent as E2A frames (:mod:`mesh.profile.requester`).

The same frames :func:`gateways.answers.answer_frames` makes of a mesh call: events, then one
final frame (the Task or Message, or an error).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

from pydantic import ValidationError

from gateways.answers import _BRANCHES
from gateways.errors import TIMEOUT
from mesh.a2a import ErrorCode, Message, Method, RpcError, Task
from mesh.calls import CallOptions
from mesh.e2a import E2AResponse, ResponseSequencer
from mesh.errors import AgentUnavailableError, CallTimeoutError, MeshError
from mesh.profile.requester import ProfileRequester

__all__ = ["profile_frames"]


async def profile_frames(
    requester: ProfileRequester,
    sequencer: ResponseSequencer,
    agent: str,
    method: str,
    params: dict[str, Any],
    options: CallOptions,
    observe: Callable[[dict[str, Any]], None],
) -> AsyncGenerator[E2AResponse, None]:
    """The frames of one call to the profile agent ``agent`` (``org/unit/agent``), final last."""
    message = params.get("message")
    if isinstance(message, dict) and not message.get("taskId"):
        message["taskId"] = str(uuid.uuid4())  # the profile's requester names the task
    try:
        model = next(m for m in Method if m == method).params.model_validate(params)
        async with asyncio.timeout(options.deadline_s):
            async for item in requester.items(agent, method, model, auth_token=options.auth_token):
                result = item.to_wire_dict()
                if isinstance(item, Task):
                    observe(result)
                    final = sequencer.finish("a2a.task", result)
                    break
                if isinstance(item, Message):
                    final = sequencer.finish("a2a.message", result)
                    break
                observe(result)
                yield sequencer.a2a_stream_event(_BRANCHES.get(str(result.get("kind")), "status_update"), result)
            else:
                final = sequencer.error(-32603, f"agent {agent!r} ended its answer without a task or message")
    except (TimeoutError, CallTimeoutError):
        timeout = {"errorType": "Timeout", "agentName": agent}
        final = sequencer.error(TIMEOUT, f"Timeout: agent {agent!r} did not finish in time", timeout)
    except RpcError as exc:
        final = sequencer.error(exc.code, exc.error.message, exc.data)
    except AgentUnavailableError as exc:
        gone = {"errorType": "AgentGone", "agentName": agent, "reason": exc.reason}
        final = sequencer.error(int(ErrorCode.AGENT_GONE), str(exc), gone)
    except (MeshError, ValueError, ValidationError) as exc:
        final = sequencer.error(-32603, f"the request to agent {agent!r} failed: {exc}")
    yield final

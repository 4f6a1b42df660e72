"""The errors a gateway answers itself, before or instead of an agent's answer.

Their codes are the JSON-RPC codes HTTP and ACP clients see, in the server range -32000..-32099
(the README's error table); ``data.errorType`` names each:

    code    errorType       raised when
    -32000  AgentNotFound   no agent of that name on the mesh (HTTP 404)
    -32030  Timeout         the request's deadline or idle timeout ran out (the task is canceled)

One builder per error, so every edge (JSON-RPC, REST, gRPC, ACP, the card routes) words it the
same way.
"""

from __future__ import annotations

from typing import Any

from mesh.a2a import ErrorCode
from mesh.errors import MeshError

__all__ = ["AGENT_NOT_FOUND", "TIMEOUT", "GatewayError", "agent_not_found_error", "agent_not_found_text"]

#: JAF's "agent not found" (its -32000 is outside A2A's codes).
AGENT_NOT_FOUND = -32000
#: The mesh's timeout; not A2A's -32006 (an invalid agent response).
TIMEOUT = int(ErrorCode.TIMEOUT)


class GatewayError(MeshError):
    """A request the gateway refuses before it reaches the mesh; ``code`` is its JSON-RPC code."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data or {}


def agent_not_found_text(name: str, available: list[str]) -> tuple[str, dict[str, Any]]:
    """The message and data of "no agent ``name``": the same words on every edge."""
    listing = sorted(available)
    return (
        f"agent {name!r} is not on the mesh; available agents: {', '.join(listing) or 'none'}",
        {"errorType": "AgentNotFound", "agentName": name, "availableAgents": listing},
    )


def agent_not_found_error(name: str, available: list[str]) -> GatewayError:
    """-32000: no agent ``name`` on the mesh."""
    message, data = agent_not_found_text(name, available)
    return GatewayError(AGENT_NOT_FOUND, message, data)

"""Agent cards: what an agent is, what it can do and how to reach it."""

from __future__ import annotations

from typing import Any

from .base import A2AModel
from .security import SecurityScheme


class AgentProvider(A2AModel):
    """The organization that runs an agent."""

    organization: str
    url: str


class AgentInterface(A2AModel):
    """One more transport + URL an agent is reachable at (``JSONRPC``, ``GRPC``, ``HTTP+JSON``)."""

    transport: str
    url: str


class AgentExtension(A2AModel):
    """A protocol extension the agent supports; ``required`` ones clients must understand."""

    uri: str
    description: str | None = None
    params: dict[str, Any] | None = None
    required: bool | None = None


class AgentCapabilities(A2AModel):
    """Optional protocol features the agent supports."""

    streaming: bool | None = None
    push_notifications: bool | None = None
    state_transition_history: bool | None = None
    extensions: list[AgentExtension] | None = None


class AgentSkill(A2AModel):
    """One thing the agent can do."""

    id: str
    name: str
    description: str
    tags: list[str]
    examples: list[str] | None = None
    input_modes: list[str] | None = None
    output_modes: list[str] | None = None
    security: list[dict[str, list[str]]] | None = None


class AgentCardSignature(A2AModel):
    """A JWS signature (RFC 7515, JSON serialization) over the card."""

    protected: str
    signature: str
    header: dict[str, Any] | None = None


class AgentCard(A2AModel):
    """The self-description an agent publishes on its discovery topic."""

    name: str
    description: str
    version: str
    url: str
    capabilities: AgentCapabilities
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[AgentSkill]
    protocol_version: str = "0.3.0"
    preferred_transport: str = "JSONRPC"
    additional_interfaces: list[AgentInterface] | None = None
    provider: AgentProvider | None = None
    icon_url: str | None = None
    documentation_url: str | None = None
    security_schemes: dict[str, SecurityScheme] | None = None
    security: list[dict[str, list[str]]] | None = None
    supports_authenticated_extended_card: bool | None = None
    signatures: list[AgentCardSignature] | None = None

"""The cards an HTTP gateway shows: per agent over HTTP, its own on the mesh."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from gateways.http.a2a_v1 import served_card
from gateways.http.protection import AuthConfig
from mesh.a2a import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
)
from mesh.registry import GATEWAY_ROLE_EXTENSION

SCHEME_NAME = "gateway"


def http_card(
    card: AgentCard,
    url: str,
    auth: AuthConfig,
    versions: Collection[str] = ("1.0", "0.3"),
    *,
    grpc_url: str | None = None,
) -> dict[str, Any]:
    """An agent's mesh card as an HTTP client needs it: the gateway's URL, the members of the
    A2A ``versions`` served (a 1.0-only card is strictly 1.0), and the authentication the
    gateway asks for."""
    updates: dict[str, Any] = {"url": url, "preferred_transport": "JSONRPC"}
    scheme = _security_scheme(auth)
    if scheme is not None:
        updates["security_schemes"] = {SCHEME_NAME: scheme}
        updates["security"] = [{SCHEME_NAME: []}]
    return served_card(
        card.model_copy(update=updates),
        url_v1=url if "1.0" in versions else None,
        url_v0_3=url if "0.3" in versions else None,
        more_v1=[
            {"url": f"{url}/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            # One gRPC server for every agent: the tenant names the agent.
            *(
                [{"url": grpc_url, "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": card.name}]
                if grpc_url
                else []
            ),
        ],
    )


def _grpc_interface(grpc_url: str | None, agent: str) -> list[dict[str, str]]:
    """The gRPC interface, if served: one server for every agent, the tenant names the agent."""
    if grpc_url is None:
        return []
    return [{"url": grpc_url, "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": agent}]


def gateway_card(gateway_id: str, namespace: str, public_url: str) -> AgentCard:
    """The gateway's own card on the mesh discovery topic (SAM's gateway-role extension)."""
    return AgentCard(
        name=gateway_id,
        description=f"A2A HTTP gateway at {public_url} to the agents of namespace {namespace!r}",
        version="1.0.0",
        url=f"{public_url}/a2a",
        preferred_transport="JSONRPC",
        capabilities=AgentCapabilities(
            streaming=True,
            extensions=[
                AgentExtension(
                    uri=GATEWAY_ROLE_EXTENSION,
                    params={"gateway_id": gateway_id, "gateway_type": "http", "namespace": namespace},
                )
            ],
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[],
    )


def _security_scheme(auth: AuthConfig) -> HTTPAuthSecurityScheme | APIKeySecurityScheme | None:
    if auth.mode == "bearer":
        return HTTPAuthSecurityScheme(scheme="bearer", description="a token the gateway was given")
    if auth.mode == "basic":
        return HTTPAuthSecurityScheme(scheme="basic", description="a user of the gateway")
    if auth.mode == "api_key":
        return APIKeySecurityScheme.model_validate(
            {"name": "X-API-Key", "in": "header", "description": "a key the gateway was given"}
        )
    return None

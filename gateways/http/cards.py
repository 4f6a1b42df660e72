"""The cards an HTTP gateway shows: per agent over HTTP (one per A2A version), its own on the mesh."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateways.http.a2a_v1 import served_card
from gateways.http.protection import AuthConfig
from gateways.http.settings import A2AVersion
from mesh.a2a import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
)
from mesh.discovery.registry import GATEWAY_ROLE_EXTENSION

SCHEME_NAME = "gateway"


#: The well-known path of A2A 0.2 (0.3 and 1.0 use ``/.well-known/agent-card.json``).
CARD_PATH_0_2 = "/.well-known/agent.json"


def card_version(asked: str | None, path: str, served: Sequence[A2AVersion]) -> A2AVersion:
    """The A2A version of the card a client gets, one of the ``served`` versions.

    The version it names (``A2A-Version`` header or query parameter: ``1.x`` is 1.0, ``0.x``
    0.3), else 0.3 at A2A 0.2's well-known path, else the gateway's first (``a2a_versions``
    order: ``["1.0", "0.3"]`` gives a client that names none the 1.0 card, which also lists the
    JSONRPC 0.3 interface; ``["0.3", "1.0"]`` the 0.3 card). A version not served: the first.
    """
    named = (asked or "").strip()
    wanted: A2AVersion | None = "1.0" if named.startswith("1") else "0.3" if named.startswith("0") else None
    if wanted is None and path.rstrip("/") == CARD_PATH_0_2:
        wanted = "0.3"
    return wanted if wanted is not None and wanted in served else served[0]


def http_card(
    card: AgentCard,
    url: str,
    auth: AuthConfig,
    versions: Sequence[A2AVersion] = ("1.0", "0.3"),
    *,
    version: A2AVersion | None = None,
    grpc_url: str | None = None,
) -> dict[str, Any]:
    """An agent's mesh card as an HTTP client of A2A ``version`` (default: the first of the
    ``versions`` served) needs it: the gateway's URL and the authentication it asks for. The 1.0
    card is strictly 1.0 (listing the JSONRPC 0.3 interface if 0.3 is served); the 0.3 card is
    the 0.3 one."""
    version = version or card_version(None, "", versions)
    updates: dict[str, Any] = {"url": url, "preferred_transport": "JSONRPC"}
    scheme = _security_scheme(auth)
    if scheme is not None:
        updates["security_schemes"] = {SCHEME_NAME: scheme}
        updates["security"] = [{SCHEME_NAME: []}]
    return served_card(
        card.model_copy(update=updates),
        url_v1=url if version == "1.0" else None,
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

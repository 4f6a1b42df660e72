"""How an HTTP gateway is configured: one entry of a config file's ``gateways:`` section.

```yaml
gateways:
  - kind: http
    id: web                      # gateway id on the mesh (its card topic, its response topics)
    host: 127.0.0.1
    port: 8080                   # 0 picks a free port
    public_url: https://a2a.example.com   # what cards advertise (default http://host:port)
    default_agent: orchestrator  # served at POST /a2a and /.well-known/agent-card.json
    auth: {mode: bearer, tokens: [${A2A_TOKEN}]}   # + oidc: {issuer, client_id, client_secret_env}
    rate_limit: {requests: 100, window_s: 60, burst: 20}
    concurrency: {max_requests_per_client: 10, max_tasks_per_context: 5}
    limits: {max_message_bytes: 1000000, max_parts: 100}
    timeouts: {default_s: 30, maximum_s: 300, streaming_s: 600}
    cors: {allow_origins: [https://app.example.com]}
    response_log: logs/e2a.ndjson   # one redacted E2A response per line
    read_timeout_s: 10           # a request's head, then its body, must arrive within this
    keep_alive_s: 5              # an idle keep-alive connection is closed after this
    sse_keep_alive_s: 15         # a quiet SSE stream gets a comment line this often
    dashboard: true              # the live dashboard at /ui (behind auth)
    chat: true                   # the chat for people at /chat (sign-in at /signin)
    chat_store: null             # its SQLite file (default: in the state dir), or postgresql://...
    session_ttl_s: 28800         # a browser's sign-in lasts this long
    health_details: false        # /a2a/health tells unauthenticated callers only up or down
    a2a_versions: ["1.0", "0.3"] # the A2A versions served; the first: the card of a client naming none
    card_max_age_s: 300          # Cache-Control max-age of the cards
    grpc_port: 50051             # A2A 1.0 over gRPC too (the grpc extra); 0 picks a free port
```
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from gateways.http.protection import EdgeConfig
from topics import validate_identifier

A2AVersion = Literal["1.0", "0.3"]
ALL_VERSIONS: tuple[A2AVersion, ...] = ("1.0", "0.3")


class HttpGatewaySettings(EdgeConfig):
    """One HTTP gateway: where it listens and what it serves, plus its edge protections
    (:class:`~gateways.http.protection.EdgeConfig`, with the JAF A2A spec's defaults)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["http"] = "http"
    id: str = Field("http", description="the gateway id on the mesh")
    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8080, ge=0, le=65535, description="port to listen on; 0 picks a free one")
    public_url: str | None = Field(None, description="base URL clients use, for the cards (default http://host:port)")
    default_agent: str | None = Field(None, description="agent behind POST /a2a and the well-known card")
    idle_timeout_s: float = Field(300.0, gt=0, description="cancel a mesh task silent this long")
    discovery_ttl_s: float = Field(60.0, gt=0, description="forget an agent card not refreshed this long")
    response_log: str | None = Field(None, description="NDJSON file of the E2A responses (secrets redacted)")
    read_timeout_s: float = Field(10.0, gt=0, description="a request's head, then its body, must arrive within this")
    keep_alive_s: int = Field(5, ge=1, description="close a keep-alive connection idle this many seconds")
    sse_keep_alive_s: float = Field(15.0, gt=0, description="send an SSE comment on a stream quiet this long")
    dashboard: bool = Field(True, description="serve the live dashboard at /ui, behind the gateway's authentication")
    chat: bool = Field(True, description="serve the chat at /chat, with browser sign-in at /signin")
    chat_store: str | None = Field(
        None,
        description="SQLite file of the chat's conversations (default: "
        "<state dir>/<namespace>/gateway-<id>-chat.sqlite), or a postgresql:// URL the gateways of several hosts share",
    )
    session_ttl_s: float = Field(8 * 3600.0, gt=0, description="a browser's sign-in (session cookie) lasts this long")
    health_details: bool = Field(
        False, description="/a2a/health shows the broker, namespace and agents to unauthenticated callers too"
    )

    a2a_versions: list[A2AVersion] = Field(
        default_factory=lambda: list(ALL_VERSIONS),
        min_length=1,
        description="A2A versions served (others: -32009); a card request naming no A2A-Version gets the first's card",
    )
    card_max_age_s: int = Field(300, ge=0, description="Cache-Control max-age of the agent cards served")
    grpc_port: int | None = Field(
        None, ge=0, le=65535, description="serve A2A 1.0 over gRPC on this port (needs the grpc extra); 0: a free one"
    )

    @field_validator("id", "default_agent")
    @classmethod
    def _identifier(cls, value: str | None) -> str | None:
        return None if value is None else validate_identifier(value, "gateway id or agent name")

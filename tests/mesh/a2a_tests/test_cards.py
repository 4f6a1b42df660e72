"""Agent cards, security schemes and push notification configs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from mesh.a2a import (
    AgentCard,
    APIKeyLocation,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    MutualTLSSecurityScheme,
    OAuth2SecurityScheme,
    OpenIdConnectSecurityScheme,
    SecurityScheme,
    TaskPushNotificationConfig,
    format_validation_error,
)

FULL_CARD: dict[str, Any] = {
    "name": "research_agent",
    "description": "Finds and summarises sources",
    "version": "1.2.0",
    "url": "mqtt://acme/ai/a2a/v1/agent/request/research_agent",
    "protocolVersion": "0.3.0",
    "preferredTransport": "JSONRPC",
    "additionalInterfaces": [{"transport": "HTTP+JSON", "url": "https://a.example/v1"}],
    "provider": {"organization": "Acme", "url": "https://acme.example"},
    "iconUrl": "https://acme.example/icon.png",
    "documentationUrl": "https://acme.example/docs",
    "capabilities": {
        "streaming": True,
        "pushNotifications": False,
        "stateTransitionHistory": True,
        "extensions": [{"uri": "urn:acme:ext", "description": "d", "params": {"level": 2}, "required": False}],
    },
    "securitySchemes": {
        "apiKey": {"type": "apiKey", "name": "X-API-Key", "in": "header", "description": "key"},
        "bearer": {"type": "http", "scheme": "Bearer", "bearerFormat": "JWT"},
        "oauth": {
            "type": "oauth2",
            "description": "OAuth",
            "oauth2MetadataUrl": "https://auth.example/.well-known/oauth-authorization-server",
            "flows": {
                "implicit": {
                    "authorizationUrl": "https://auth.example/authorize",
                    "scopes": {"read": "Read"},
                    "refreshUrl": "https://auth.example/r",
                },
                "password": {"tokenUrl": "https://auth.example/token", "scopes": {}},
                "clientCredentials": {
                    "tokenUrl": "https://auth.example/token",
                    "scopes": {"write": "Write"},
                },
                "authorizationCode": {
                    "authorizationUrl": "https://auth.example/authorize",
                    "tokenUrl": "https://auth.example/token",
                    "scopes": {"read": "Read"},
                },
            },
        },
        "oidc": {
            "type": "openIdConnect",
            "openIdConnectUrl": "https://auth.example/.well-known/openid-configuration",
        },
        "mtls": {"type": "mutualTLS"},
    },
    "security": [{"oauth": ["read"]}, {"apiKey": [], "mtls": []}],
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain", "application/json"],
    "skills": [
        {
            "id": "search",
            "name": "Search",
            "description": "Web search",
            "tags": ["search"],
            "examples": ["find papers on MQTT"],
            "inputModes": ["text/plain"],
            "outputModes": ["application/json"],
            "security": [{"bearer": []}],
        }
    ],
    "supportsAuthenticatedExtendedCard": False,
    "signatures": [{"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "c2ln", "header": {"kid": "1"}}],
}


def test_full_card_round_trips() -> None:
    card = AgentCard.model_validate(FULL_CARD)
    assert json.loads(card.to_json_bytes()) == FULL_CARD
    assert card.to_wire_dict() == FULL_CARD


def test_security_schemes_are_typed_by_type() -> None:
    schemes = AgentCard.model_validate(FULL_CARD).security_schemes
    assert schemes is not None
    assert [type(s) for s in schemes.values()] == [
        APIKeySecurityScheme,
        HTTPAuthSecurityScheme,
        OAuth2SecurityScheme,
        OpenIdConnectSecurityScheme,
        MutualTLSSecurityScheme,
    ]
    api_key = schemes["apiKey"]
    assert isinstance(api_key, APIKeySecurityScheme) and api_key.in_ is APIKeyLocation.header
    oauth = schemes["oauth"]
    assert isinstance(oauth, OAuth2SecurityScheme)
    assert oauth.flows.client_credentials is not None
    assert oauth.flows.client_credentials.scopes == {"write": "Write"}


def test_api_key_location_is_in_on_the_wire() -> None:
    scheme = APIKeySecurityScheme(name="k", in_=APIKeyLocation.query)
    assert scheme.to_wire_dict() == {"type": "apiKey", "name": "k", "in": "query"}
    assert APIKeySecurityScheme.model_validate({"name": "k", "in_": "cookie"}).in_ == "cookie"


def test_card_defaults() -> None:
    card = AgentCard(
        name="a",
        description="d",
        version="1",
        url="u",
        capabilities={},
        default_input_modes=[],
        default_output_modes=[],
        skills=[],
    )
    assert card.to_wire_dict() == {
        "name": "a",
        "description": "d",
        "version": "1",
        "url": "u",
        "capabilities": {},
        "defaultInputModes": [],
        "defaultOutputModes": [],
        "skills": [],
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
    }


@pytest.mark.parametrize(
    ("scheme", "message"),
    [
        (
            {"type": "saml"},
            "securitySchemes.x.type: unknown type 'saml'; expected 'apiKey', 'http'",
        ),
        ({"name": "k"}, "securitySchemes.x.type: missing; expected"),
        (
            {"type": "apiKey", "name": "k", "in": "body"},
            "securitySchemes.x.in: Input should be 'header', 'query' or 'cookie' (got 'body')",
        ),
        (
            {"type": "oauth2", "flows": {"password": {"scopes": {}}}},
            "securitySchemes.x.flows.password.tokenUrl: Field required",
        ),
    ],
)
def test_bad_security_schemes_name_the_field(scheme: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        AgentCard.model_validate({**FULL_CARD, "securitySchemes": {"x": scheme}})
    assert format_validation_error(info.value).startswith(message)


def test_security_scheme_adapter() -> None:
    adapter = TypeAdapter(SecurityScheme)
    assert isinstance(adapter.validate_python({"type": "mutualTLS"}), MutualTLSSecurityScheme)


def test_push_config_round_trips() -> None:
    source = {
        "taskId": "t1",
        "pushNotificationConfig": {
            "url": "https://hooks.example/t1",
            "id": "cfg-1",
            "token": "tok",
            "authentication": {"schemes": ["Bearer"], "credentials": "secret"},
        },
    }
    config = TaskPushNotificationConfig.model_validate(source)
    assert config.push_notification_config.authentication is not None
    assert config.to_wire_dict() == source

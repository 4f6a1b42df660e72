"""Security schemes an agent card declares (OpenAPI 3.0 style), discriminated by ``type``."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from .base import A2AModel
from .validation import discriminator, read_field, tag


class APIKeyLocation(StrEnum):
    """Where an API key is sent (the ``in`` member of an API key scheme)."""

    header = "header"
    query = "query"
    cookie = "cookie"


class APIKeySecurityScheme(A2AModel):
    """An API key in a header, query parameter or cookie named ``name``."""

    type: Literal["apiKey"] = "apiKey"
    name: str
    in_: APIKeyLocation
    description: str | None = None


class HTTPAuthSecurityScheme(A2AModel):
    """HTTP authentication (``Basic``, ``Bearer``...)."""

    type: Literal["http"] = "http"
    scheme: str
    bearer_format: str | None = None
    description: str | None = None


class ImplicitOAuthFlow(A2AModel):
    """The OAuth 2.0 implicit flow."""

    authorization_url: str
    scopes: dict[str, str]
    refresh_url: str | None = None


class PasswordOAuthFlow(A2AModel):
    """The OAuth 2.0 resource owner password flow."""

    token_url: str
    scopes: dict[str, str]
    refresh_url: str | None = None


class ClientCredentialsOAuthFlow(A2AModel):
    """The OAuth 2.0 client credentials flow."""

    token_url: str
    scopes: dict[str, str]
    refresh_url: str | None = None


class AuthorizationCodeOAuthFlow(A2AModel):
    """The OAuth 2.0 authorization code flow."""

    authorization_url: str
    token_url: str
    scopes: dict[str, str]
    refresh_url: str | None = None


class OAuthFlows(A2AModel):
    """The OAuth 2.0 flows a scheme supports."""

    implicit: ImplicitOAuthFlow | None = None
    password: PasswordOAuthFlow | None = None
    client_credentials: ClientCredentialsOAuthFlow | None = None
    authorization_code: AuthorizationCodeOAuthFlow | None = None


class OAuth2SecurityScheme(A2AModel):
    """OAuth 2.0."""

    type: Literal["oauth2"] = "oauth2"
    flows: OAuthFlows
    oauth2_metadata_url: str | None = None
    description: str | None = None


class OpenIdConnectSecurityScheme(A2AModel):
    """OpenID Connect discovery."""

    type: Literal["openIdConnect"] = "openIdConnect"
    open_id_connect_url: str
    description: str | None = None


class MutualTLSSecurityScheme(A2AModel):
    """Mutual TLS (added in A2A 0.3)."""

    type: Literal["mutualTLS"] = "mutualTLS"
    description: str | None = None


_SCHEMES = (
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    OAuth2SecurityScheme,
    OpenIdConnectSecurityScheme,
    MutualTLSSecurityScheme,
)

#: Any security scheme, discriminated by ``type``.
SecurityScheme = Annotated[
    Annotated[APIKeySecurityScheme, tag(APIKeySecurityScheme)]
    | Annotated[HTTPAuthSecurityScheme, tag(HTTPAuthSecurityScheme)]
    | Annotated[OAuth2SecurityScheme, tag(OAuth2SecurityScheme)]
    | Annotated[OpenIdConnectSecurityScheme, tag(OpenIdConnectSecurityScheme)]
    | Annotated[MutualTLSSecurityScheme, tag(MutualTLSSecurityScheme)],
    discriminator(
        {cls.model_fields["type"].default: cls for cls in _SCHEMES},
        read=read_field("type"),
        field="type",
        expected="'apiKey', 'http', 'oauth2', 'openIdConnect' or 'mutualTLS'",
    ),
]

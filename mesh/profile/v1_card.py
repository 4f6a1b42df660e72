"""The card served for a mesh agent in A2A 1.0 (and/or 0.3): one function, for every edge.

The HTTP gateway serves it at its well-known URLs; agents serving the EMQX "A2A over MQTT"
profile publish it on their profile discovery topic with the profile's binding
(:mod:`mesh.profile.emqx`). Both call :func:`served_card`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from pydantic import ValidationError

from mesh.a2a import AgentCard, InvalidAgentResponse
from mesh.a2a.validation import format_validation_error
from mesh.profile.v1 import JSON

__all__ = ["served_card"]

# ---------------------------------------------------------------- agent card

_SCHEME_WRAPPERS: Final = {
    "apiKey": ("apiKeySecurityScheme", ("description", "in", "name")),
    "http": ("httpAuthSecurityScheme", ("description", "scheme", "bearerFormat")),
    "oauth2": ("oauth2SecurityScheme", ("description", "flows", "oauth2MetadataUrl")),
    "openIdConnect": ("openIdConnectSecurityScheme", ("description", "openIdConnectUrl")),
    "mutualTLS": ("mtlsSecurityScheme", ("description",)),
}
# 1.0 OAuthFlows is a oneof: one flow is served, the first of these the agent declares.
_FLOW_PREFERENCE: Final = ("authorizationCode", "clientCredentials", "deviceCode", "implicit", "password")
# 0.3 card members the served card replaces or cannot keep.
_REPLACED: Final = (
    "url",
    "preferredTransport",
    "protocolVersion",
    "additionalInterfaces",
    "signatures",  # they sign the agent's card, not this one (its URLs differ)
    "supportsAuthenticatedExtendedCard",  # the mesh has no extended-card method
)


def _scheme(legacy: JSON) -> JSON:
    """A 0.3 security scheme with its 1.0 form added: ``{"httpAuthSecurityScheme": {...}, "type": ...}``."""
    wrapper, fields = _SCHEME_WRAPPERS[legacy["type"]]
    if "flows" in legacy:
        flow = next((name for name in _FLOW_PREFERENCE if name in legacy["flows"]), None)
        legacy = {**legacy, "flows": {flow: legacy["flows"][flow]} if flow else {}}
    v1 = {("location" if key == "in" else key): legacy[key] for key in fields if key in legacy}
    return {wrapper: v1, **legacy}


def _requirements(security: list[dict[str, list[str]]]) -> list[JSON]:
    return [{"schemes": {name: {"list": scopes} for name, scopes in req.items()}} for req in security]


def served_card(
    card_0_3: AgentCard | Mapping[str, Any],
    *,
    url_v1: str | None,
    url_v0_3: str | None,
    more_v1: Iterable[Mapping[str, str]] = (),
    binding_v1: str = "JSONRPC",
    version_v1: str = "1.0",
) -> JSON:
    """The card served for a mesh agent: the A2A 1.0 card, or (``url_v1`` None) the 0.3 card.

    ``url_v1`` / ``url_v0_3`` are the JSON-RPC URLs of each version, ``None`` for a version not
    served; ``more_v1`` are further 1.0 interfaces (other bindings) to list; ``binding_v1`` and
    ``version_v1`` name the first 1.0 interface's ``protocolBinding`` and ``protocolVersion``.

    - ``url_v1`` set: a strict 1.0 card (it validates against a2a-sdk's ``AgentCard`` with
      unknown members refused, and the A2A 1.0 JSON schema): ``supportedInterfaces`` (the 1.0
      ones, then a JSONRPC 0.3 one at ``url_v0_3`` if set: how 1.0 lists several versions),
      security schemes in their 1.0 form, ``securityRequirements``; no 0.3 member (``url``,
      ``preferredTransport``, ``protocolVersion``, ``additionalInterfaces``, ``security``,
      ``capabilities.stateTransitionHistory``...).
    - ``url_v1`` None: the 0.3 card (``url``, ``preferredTransport``, ``protocolVersion``
      "0.3.0", ``additionalInterfaces``), as a2a-sdk's 0.3 ``AgentCard`` reads it.

    Which one a client gets is the server's choice (the HTTP gateway: by the version the client
    asks for). The agent's own URLs and signatures are dropped, extended cards are not
    advertised, and an OAuth scheme keeps one flow (1.0 allows one).
    """
    try:
        parsed = card_0_3 if isinstance(card_0_3, AgentCard) else AgentCard.model_validate(card_0_3)
    except ValidationError as exc:
        raise InvalidAgentResponse(f"invalid agent card: {format_validation_error(exc)}") from None
    legacy = parsed.to_wire_dict()
    for key in _REPLACED:
        legacy.pop(key, None)
    legacy["capabilities"].pop("extendedAgentCard", None)
    interfaces: list[JSON] = []
    if url_v1 is not None:
        interfaces.append({"url": url_v1, "protocolBinding": binding_v1, "protocolVersion": version_v1})
        interfaces.extend(dict(i) for i in more_v1)
    if url_v0_3 is not None:
        interfaces.append({"url": url_v0_3, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"})
    card: JSON = {"supportedInterfaces": interfaces, **legacy} if url_v1 is not None else legacy
    if url_v1 is None and url_v0_3 is not None:
        card |= {
            "url": url_v0_3,
            "preferredTransport": "JSONRPC",
            "protocolVersion": "0.3.0",
            "additionalInterfaces": [{"url": url_v0_3, "transport": "JSONRPC"}],
        }
    if url_v1 is None:
        return card
    if "securitySchemes" in card:
        card["securitySchemes"] = {name: _scheme(s) for name, s in card["securitySchemes"].items()}
    if "security" in card:
        card["securityRequirements"] = _requirements(card["security"])
    for skill in card["skills"]:
        if "security" in skill:
            skill["securityRequirements"] = _requirements(skill["security"])
    _strip_0_3(card)
    return card


def _strip_0_3(card: JSON) -> None:
    """Leave only 1.0 members: strict 1.0 readers refuse the others."""
    card.pop("security", None)
    card["capabilities"].pop("stateTransitionHistory", None)
    for skill in card["skills"]:
        skill.pop("security", None)
    for name, scheme in card.get("securitySchemes", {}).items():
        card["securitySchemes"][name] = {key: value for key, value in scheme.items() if key.endswith("SecurityScheme")}

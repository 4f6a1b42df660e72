"""Reading the cards the registry receives, in both dialects: a card, or why it is refused.

The mesh's cards are A2A 0.3 cards on ``{ns}/a2a/v1/discovery/...``. The EMQX profile's
(``$a2a/v1/discovery/+/+/+``, A2A 1.0 cards with ``a2a-status``) are read as 0.3 by
:func:`mesh.profile.v1_results.card_from_v1`, each named ``{org}/{unit}/{agent}``; a card marked
``a2a-status=offline`` (its will, or a clean stop) or cleared removes its entry. With a trust
store, unsigned profile cards are refused. A broker that refuses their subscription (rules made
without the profile) leaves the registry SAM-only, with a warning.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from mesh.a2a import AgentCard
from mesh.errors import short_repr
from mesh.profile.emqx import DialectClaim, dialect_claim
from topics import validate_identifier

__all__ = ["card_problem", "read_card", "read_profile_card"]


def read_card(payload: bytes, *, keep_data: bool) -> tuple[AgentCard, Any] | str:
    """The card in ``payload`` and, with ``keep_data``, its JSON (what a signature is checked
    on); or why it is malformed."""
    try:
        if keep_data:
            data = json.loads(payload)
            return AgentCard.model_validate(data), data
        return AgentCard.model_validate_json(payload), None
    except ValidationError as exc:
        return f"malformed card: {exc.errors()[0]['msg']}"
    except (ValueError, RecursionError):
        return "malformed card: not a JSON object"


def card_problem(topic_name: str | None, card: AgentCard, *, trusted_only: bool) -> str | None:
    """Why a card on the topic of ``topic_name`` (None: a bare heartbeat) must be refused whatever
    the keys, or None."""
    if topic_name is not None and card.name != topic_name:
        return f"the card names itself {short_repr(card.name)}; a card is accepted only on its own name's topic"
    try:
        validate_identifier(card.name, "agent name")
    except ValueError as exc:
        return str(exc)
    if trusted_only and topic_name is None:
        return "with a trust store, cards are accepted only on their own card topic, not as bare heartbeats"
    return None


def read_profile_card(name: str, payload: bytes) -> tuple[AgentCard, DialectClaim | None] | str:
    """The profile card of ``name`` (``org/unit/agent``) read as a mesh card, with what it says of
    the agent's mesh dialect; or why it is not an A2A 1.0 card."""
    from mesh.profile.v1_results import card_from_v1

    try:
        data = json.loads(payload)
        interfaces = data.get("supportedInterfaces") or [{}]
        url = interfaces[0].get("url") if isinstance(interfaces[0], dict) else None
        # Named as the registry names it: delegation and the orchestrator call it by that name.
        card = card_from_v1(data, url=url if isinstance(url, str) else "mqtt://").model_copy(update={"name": name})
    except (ValueError, TypeError, AttributeError, IndexError, RecursionError, ValidationError) as exc:
        return f"not an A2A 1.0 card ({short_repr(str(exc), 80)})"
    capabilities = data.get("capabilities")
    claim = dialect_claim(capabilities.get("extensions")) if isinstance(capabilities, dict) else None
    return card, claim

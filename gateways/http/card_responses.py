"""Agent cards over HTTP with the caching A2A 1.0 asks for (spec 8.6): ``Cache-Control`` with
a max-age, a strong ``ETag`` (304 to an ``If-None-Match`` that names it) and ``Last-Modified``.

A card's ETag is a hash of the bytes served, so it changes exactly when the card does; its
Last-Modified is when this gateway first served those bytes for that URL (or when discovery
first saw the agent, for the first one).

With a signing key (the gateway's, under trust: a secured ``mesh up``) every card served is
signed as the agents sign theirs (a JWS over the RFC 8785 card, ``kid`` the gateway's id): the
card describes the gateway's URL and security schemes, which the gateway vouches for. Each
distinct card is signed once.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from email.utils import formatdate
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

if TYPE_CHECKING:
    from mesh.trust.keys import PrivateKey

__all__ = ["CardResponses"]


class CardResponses:
    """Builds card responses for one gateway and remembers when each served card last changed."""

    def __init__(self, max_age_s: int, *, max_remembered: int = 10_000, signing_key: PrivateKey | None = None) -> None:
        self.cache_control = f"public, max-age={max_age_s}"
        self._changed: OrderedDict[str, tuple[str, float]] = OrderedDict()  # url -> (etag, since)
        self._max = max_remembered
        self._key = signing_key
        self._signed: OrderedDict[bytes, bytes] = OrderedDict()  # unsigned body -> signed body

    def respond(self, request: Request, card: dict[str, Any], *, first_seen: float, variant: str = "") -> Response:
        """The card as JSON, or 304 when the client's ``If-None-Match`` names its ETag.

        ``variant`` names which of a URL's cards this is (the A2A version: the ``A2A-Version``
        header picks it, so answers say ``Vary: A2A-Version``); each has its own Last-Modified."""
        body = json.dumps(card, separators=(",", ":"), ensure_ascii=False).encode()
        if self._key is not None:
            body = self._signed_body(card, body, self._key)
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        key = f"{request.url.path.rstrip('/')} {variant}"
        known = self._changed.get(key)
        if known is None or known[0] != etag:
            since = first_seen if known is None else time.time()
            self._changed[key] = known = (etag, since)
            while len(self._changed) > self._max:
                self._changed.popitem(last=False)
        headers = {
            "Cache-Control": self.cache_control,
            "ETag": etag,
            "Last-Modified": formatdate(known[1], usegmt=True),
            "Vary": "A2A-Version",
        }
        if _matches(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    def _signed_body(self, card: dict[str, Any], body: bytes, key: PrivateKey) -> bytes:
        signed = self._signed.get(body)
        if signed is None:
            from mesh.trust.cards import sign_card_object  # the JOSE library, loaded under trust only

            signed = json.dumps(sign_card_object(card, key), separators=(",", ":"), ensure_ascii=False).encode()
            self._signed[body] = signed
            while len(self._signed) > _MAX_SIGNED:
                self._signed.popitem(last=False)
        else:
            self._signed.move_to_end(body)
        return signed


#: Signed cards kept (one per agent and URL form): an agent's card changes rarely.
_MAX_SIGNED = 1024


def _matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` value names ``etag`` (weak comparison, RFC 9110 13.1.2)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))

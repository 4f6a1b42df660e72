"""Agent cards over HTTP with the caching A2A 1.0 asks for (spec 8.6): ``Cache-Control`` with
a max-age, a strong ``ETag`` (304 to an ``If-None-Match`` that names it) and ``Last-Modified``.

A card's ETag is a hash of the bytes served, so it changes exactly when the card does; its
Last-Modified is when this gateway first served those bytes for that URL (or when discovery
first saw the agent, for the first one).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from email.utils import formatdate
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["CardResponses"]


class CardResponses:
    """Builds card responses for one gateway and remembers when each served card last changed."""

    def __init__(self, max_age_s: int, *, max_remembered: int = 10_000) -> None:
        self.cache_control = f"public, max-age={max_age_s}"
        self._changed: OrderedDict[str, tuple[str, float]] = OrderedDict()  # url -> (etag, since)
        self._max = max_remembered

    def respond(self, request: Request, card: dict[str, Any], *, first_seen: float) -> Response:
        """The card as JSON, or 304 when the client's ``If-None-Match`` names its ETag."""
        body = json.dumps(card, separators=(",", ":"), ensure_ascii=False).encode()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        key = request.url.path.rstrip("/")
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
        }
        if _matches(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)


def _matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` value names ``etag`` (weak comparison, RFC 9110 13.1.2)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))

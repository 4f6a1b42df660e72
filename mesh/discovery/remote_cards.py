"""Remote A2A agents' cards, fetched with the official a2a-sdk, and what went wrong reaching them.

Shared by the proxy (:mod:`agents.remote`) and ``mesh add-remote`` (:mod:`mesh.cli.remote_command`):
an error names the URL, the HTTP status and the fix (401: the credentials; 404: the card URL; TLS:
the CA), never a credential.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

if TYPE_CHECKING:
    from a2a.types import a2a_pb2

__all__ = ["CARD_PATH", "RemoteError", "card_location", "describe", "fetch_remote_card"]

CARD_PATH = "/.well-known/agent-card.json"


class RemoteError(Exception):
    """A remote that did not answer usefully: the message names the URL, the status and the fix."""

    def __init__(self, text: str, *, status: int | None = None) -> None:
        super().__init__(text)
        self.status = status


_FIXES = {
    401: "check the credentials in auth: (the key, the token or the client secret)",
    403: "the credentials are valid but lack the right: ask the remote's owner for access",
    404: "check the URL: card_url must be the agent card (usually /.well-known/agent-card.json)",
    429: "the remote limits its callers: lower rate_per_s or max_concurrent",
}


def describe(url: str, exc: BaseException) -> RemoteError:
    """What went wrong reaching ``url``, with the HTTP status and what to do about it."""
    if isinstance(exc, RemoteError):
        return exc
    causes: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and len(causes) < 10:  # the SDK wraps httpx's errors in its own
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    for cause in causes:
        if isinstance(cause, ssl.SSLError):
            return RemoteError(
                f"remote {url}: TLS failed ({cause}); set tls.ca_file to the CA that signed its certificate"
            )
    for cause in causes:
        status = getattr(cause, "status_code", None)
        if isinstance(cause, httpx.HTTPStatusError):
            status = cause.response.status_code
        if isinstance(status, int):
            fix = _FIXES.get(status, "see the remote's logs" if status >= 500 else "check the request")
            return RemoteError(f"remote {url} answered HTTP {status}; {fix}", status=status)
    for cause in causes:
        if isinstance(cause, httpx.TimeoutException | TimeoutError):
            return RemoteError(f"remote {url} did not answer in time; raise timeout_s or check the remote")
        if isinstance(cause, httpx.TransportError | OSError):
            return RemoteError(
                f"remote {url} is unreachable ({type(cause).__name__}: {cause}); check that it runs and the URL"
            )
    return RemoteError(f"remote {url} failed: {type(exc).__name__}: {exc}")


def card_location(card_url: str) -> tuple[str, str]:
    """The base URL and the card path the a2a-sdk card resolver fetches."""
    parts = urlsplit(card_url)
    return f"{parts.scheme}://{parts.netloc}", parts.path or CARD_PATH


async def fetch_remote_card(http: httpx.AsyncClient, card_url: str) -> a2a_pb2.AgentCard:
    """The card at ``card_url`` (A2A 1.0 or 0.3), or a :class:`RemoteError` saying what to fix."""
    from a2a.client import A2ACardResolver  # the a2a-sdk loads only where remote agents are used

    base, path = card_location(card_url)
    try:
        return await A2ACardResolver(http, base, path).get_agent_card()
    except Exception as exc:
        raise describe(card_url, exc) from None

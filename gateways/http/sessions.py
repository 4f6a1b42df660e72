"""Browser sign-in: sessions behind an HTTP-only cookie, with a CSRF token each.

A browser cannot send ``X-API-Key`` or a bearer token by itself, so the gateway signs a person in
once, against its configured authentication (an API key or token pasted into the sign-in page,
or a user name and password, or an OpenID Connect provider: :mod:`gateways.http.oidc`), and
hands the browser a session cookie:

``mesh_session``  HTTP-only, ``SameSite=Strict``, ``Secure`` under TLS, ``Max-Age`` the
                  session's lifetime; the id is a random 256-bit token, kept server-side only
                  as its SHA-256 (a lookup leaks no timing about a valid id).

Each session has its own CSRF token (synchronizer pattern): the pages get it in a ``<meta>``
tag and send it as ``X-CSRF-Token`` on every state-changing request; a cookie-authenticated
request without it is refused (403) by :class:`~gateways.http.edge.CallerBackend` before any
route sees it. The sign-in form itself has no session yet: it carries a double-submit token
(a ``mesh_signin`` cookie and the same value in the form).

Sessions live in this process's memory: a restart signs everyone out (conversations are kept,
:mod:`gateways.chat.store`). At most ``max_sessions`` live at once; the oldest goes first.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from gateways.http.auth import Principal
from gateways.http.protection import EdgeError

__all__ = [
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "SIGNIN_COOKIE",
    "Session",
    "SessionStore",
    "csrf_refused",
    "same_token",
]

SESSION_COOKIE = "mesh_session"
SIGNIN_COOKIE = "mesh_signin"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(slots=True)
class Session:
    """One signed-in browser: who it is, its CSRF token and when it ends (epoch seconds)."""

    principal: Principal
    csrf: str
    expires: float

    def __repr__(self) -> str:  # no token in logs
        return f"Session({self.principal.name!r}, expires={self.expires:.0f})"


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def same_token(given: str | None, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


class SessionStore:
    """The live sessions of one gateway, by the SHA-256 of their ids."""

    def __init__(self, ttl_s: float = 8 * 3600.0, max_sessions: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, principal: Principal) -> tuple[str, Session]:
        """A new session for ``principal``: its id (for the cookie only) and the session."""
        self._purge()
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        session_id = secrets.token_urlsafe(32)
        session = Session(principal, secrets.token_urlsafe(32), time.time() + self.ttl_s)
        self._sessions[_key(session_id)] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of ``session_id``, or None (unknown, or expired: then forgotten)."""
        if not session_id:
            return None
        key = _key(session_id)
        session = self._sessions.get(key)
        if session is not None and session.expires <= time.time():
            del self._sessions[key]
            return None
        return session

    def drop(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(_key(session_id), None)

    def _purge(self) -> None:
        now = time.time()
        for key in [k for k, s in self._sessions.items() if s.expires <= now]:
            del self._sessions[key]


def csrf_refused() -> EdgeError:
    """403: a cookie-authenticated request that changes state came without its CSRF token."""
    return EdgeError(
        f"this request needs the page's CSRF token in the {CSRF_HEADER} header "
        "(requests from another site are refused); reload the page and try again",
        code=-32004,
        error_type="CsrfTokenMissing",
        http_status=403,
    )

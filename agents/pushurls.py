"""Where a push notification may go: a push URL's form, and the public addresses its host
resolves to (SSRF, see :mod:`agents.push`). :func:`non_public_reason` is also the remote
agents' redirect check (:mod:`agents.remote.http`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import NamedTuple
from urllib.parse import urlsplit

from mesh.a2a import InvalidParams

__all__ = [
    "ALLOW_PRIVATE_HINT",
    "PushTarget",
    "check_push_url",
    "non_public_reason",
    "parse_push_url",
    "resolve_push_target",
    "validate_push_url",
]

ALLOW_PRIVATE_HINT = "set allow_private_push_urls: true for this agent to allow it"


class PushTarget(NamedTuple):
    """Where a push URL points: host, port and the request path (with query)."""

    https: bool
    host: str
    port: int
    path: str

    def __str__(self) -> str:
        # For logs: no user info (refused anyway) and no query (it may carry a secret).
        scheme = "https" if self.https else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}{self.path.split('?', 1)[0]}"


def parse_push_url(url: str) -> PushTarget:
    def refuse(problem: str) -> InvalidParams:
        return InvalidParams(f"push URL {problem}", data={"url": url})

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise refuse(f"is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise refuse(f"must use http or https, not {parts.scheme or 'no scheme'!r}")
    if not parts.hostname:
        raise refuse("has no host")
    if parts.username is not None or parts.password is not None:
        raise refuse("must not carry user info; put credentials in authentication")
    https = parts.scheme == "https"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return PushTarget(https, parts.hostname, port or (443 if https else 80), path)


def non_public_reason(address: str) -> str | None:
    """Why ``address`` is not a public unicast address, or ``None`` when it is (also the remote
    agents' redirect check, :mod:`agents.remote.http`)."""
    ip = ipaddress.ip_address(address)
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        # IPv4-mapped (::ffff:a.b.c.d) and 6to4 (2002::/16) forms reach an IPv4 address.
        candidates[:0] = [v4 for v4 in (ip.ipv4_mapped, ip.sixtofour) if v4 is not None]
    for candidate in candidates:
        for kind in ("unspecified", "loopback", "link_local", "multicast", "reserved", "private"):
            if getattr(candidate, f"is_{kind}"):
                return kind.replace("_", "-")
        if not candidate.is_global:  # e.g. 100.64.0.0/10, carrier-grade NAT
            return "non-global"
    return None


def resolve_push_target(target: PushTarget, *, allow_private: bool) -> list[str]:
    """The addresses of the target's host, refused unless all are public (or allowed)."""
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise InvalidParams(
            f"push URL host {target.host!r} does not resolve: {exc}", data={"host": target.host}
        ) from None
    inet = (socket.AF_INET, socket.AF_INET6)
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos if info[0] in inet))
    if not addresses:
        raise InvalidParams(f"push URL host {target.host!r} has no IP address", data={"host": target.host})
    if not allow_private:
        for address in addresses:
            reason = non_public_reason(address)
            if reason is not None:
                raise InvalidParams(
                    f"push URL host {target.host!r} resolves to {address}, a {reason} address;"
                    f" push notifications go to public addresses only: {ALLOW_PRIVATE_HINT}",
                    data={"host": target.host, "address": address},
                )
    return addresses


def validate_push_url(url: str, *, allow_private: bool) -> None:
    """Refuse (``InvalidParams``) a push URL that is not http(s) or reaches a non-public address.

    Resolves the host, so it blocks: from async code, await :func:`check_push_url`.
    """
    resolve_push_target(parse_push_url(url), allow_private=allow_private)


async def check_push_url(url: str, *, allow_private: bool) -> None:
    """:func:`validate_push_url` with the DNS lookup off the event loop."""
    await asyncio.to_thread(validate_push_url, url, allow_private=allow_private)

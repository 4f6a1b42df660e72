"""Who a request is for, as an agent sees it (verified by :mod:`mesh.trust.tokens`, or not).

Apart from the tokens so that an agent without trust never loads the JOSE library.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Identity"]


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a request is for: ``verified`` only when a trusted token says so; ``problem`` says why not."""

    user_id: str | None
    verified: bool = False
    issuer: str | None = None
    scopes: tuple[str, ...] = ()
    expires_at: float | None = None
    problem: str | None = None

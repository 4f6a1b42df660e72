"""Bounds on the work one evaluation may do."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_LIMITS", "Limits"]


@dataclass(frozen=True)
class Limits:
    """Bounds on the work one evaluation may do; the defaults suit a chat calculator.

    Each level of nesting costs the parser four or five Python frames, so keep ``max_depth``
    well below a fifth of :func:`sys.getrecursionlimit`.
    """

    max_length: int = 1000
    max_tokens: int = 500
    max_depth: int = 100
    max_digits: int = 1000  # of an exact result's numerator, and of its denominator


DEFAULT_LIMITS = Limits()

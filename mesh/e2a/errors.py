"""Exceptions raised by the E2A subpackage.

Every exception ``mesh.e2a`` raises on purpose derives from :class:`E2AError`, itself a
``ValueError`` because each one means "this value breaks the E2A contract"::

    E2AError (ValueError)
    ├── E2AValidationError      wire data has a wrong type or a missing required field
    └── E2ASequenceError        a response stream breaks the invariants of spec section 12.3
        └── E2AStreamClosedError    a frame was emitted after the final one

Messages name the bad field or value and say what to do about it.
"""

from __future__ import annotations

from typing import Any

from mesh.errors import short_repr


class E2AError(ValueError):
    """Root of every error the E2A subpackage raises on purpose."""


class E2AValidationError(E2AError):
    """A field of E2A wire data is missing or has the wrong type.

    ``field`` is a dotted path such as ``"E2AEnvelope.params.files[0].uri"``.
    """

    def __init__(self, field: str, expected: str, value: Any) -> None:
        self.field = field
        self.expected = expected
        self.value = value
        super().__init__(
            f"{field}: expected {expected}, got {type(value).__name__} {short_repr(value)}; "
            "fix the producer of this data or drop the field"
        )


class E2ASequenceError(E2AError):
    """Response frames of one request break the ordering or finality invariants."""


class E2AStreamClosedError(E2ASequenceError):
    """A frame was emitted after the request's final frame (``is_final: true``)."""

"""Exceptions of the artifact store.

::

    ArtifactError                    (a MeshError)
    ├── InvalidArtifactName          a name or context id outside the documented characters
    ├── InvalidArtifactUri           not an ``artifact://`` URI, or a malformed one
    ├── ArtifactNotFound             no such artifact (or version) in this namespace
    ├── ArtifactTooLarge             over ``limits.max_artifact_bytes``
    ├── ArtifactStoreFull            the namespace would exceed ``limits.max_namespace_bytes``
    └── ArtifactStoreUnavailable     the store cannot be opened or reached

A refused save never leaves a partial object behind.
"""

from __future__ import annotations

from mesh.errors import MeshError

__all__ = [
    "ArtifactError",
    "ArtifactNotFound",
    "ArtifactStoreFull",
    "ArtifactStoreUnavailable",
    "ArtifactTooLarge",
    "InvalidArtifactName",
    "InvalidArtifactUri",
]


class ArtifactError(MeshError):
    """Root of the artifact store's errors."""


class InvalidArtifactName(ArtifactError, ValueError):
    """A name or context id the store refuses (the message says which characters are allowed)."""


class InvalidArtifactUri(ArtifactError, ValueError):
    """A URI that is not ``artifact://{context_id}/{name}[?version=N]``."""


class ArtifactNotFound(ArtifactError, LookupError):
    """No such artifact in the caller's namespace (or not the caller's)."""


class ArtifactTooLarge(ArtifactError):
    """The artifact is larger than ``limits.max_artifact_bytes``."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class ArtifactStoreFull(ArtifactError):
    """Saving would take the namespace past ``limits.max_namespace_bytes``."""

    def __init__(self, message: str, *, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class ArtifactStoreUnavailable(ArtifactError):
    """The store could not be opened or did not answer."""

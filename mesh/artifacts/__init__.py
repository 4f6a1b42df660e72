"""Artifacts: files too large for a message, stored once and passed around as ``artifact://`` URIs.

The broker carries only the seed's FileParts (``artifact://{context_id}/{name}?version=N``);
the bytes live in a store of the namespace: the embedded :class:`FileStore` (files under the
state directory, metadata in SQLite) or :class:`ObjectStore` (S3, GCS, Azure through obstore,
the ``artifacts-s3`` extra). Agents use it through their task context, gateways turn URIs into
downloads; see docs/artifacts.md.
"""

from mesh.artifacts.errors import (
    ArtifactError,
    ArtifactNotFound,
    ArtifactStoreFull,
    ArtifactStoreUnavailable,
    ArtifactTooLarge,
    InvalidArtifactName,
    InvalidArtifactUri,
)
from mesh.artifacts.parts import file_part, file_part_dict, offload_inline_files, rewrite_artifact_uris
from mesh.artifacts.settings import ARTIFACTS_ENV, ArtifactSettings, open_store, resolve_settings
from mesh.artifacts.store import ArtifactInfo, ArtifactLimits, ArtifactStore, Source, read_all
from mesh.artifacts.uris import ArtifactRef, is_artifact_uri

__all__ = [
    "ARTIFACTS_ENV",
    "ArtifactError",
    "ArtifactInfo",
    "ArtifactLimits",
    "ArtifactNotFound",
    "ArtifactRef",
    "ArtifactSettings",
    "ArtifactStore",
    "ArtifactStoreFull",
    "ArtifactStoreUnavailable",
    "ArtifactTooLarge",
    "InvalidArtifactName",
    "InvalidArtifactUri",
    "Source",
    "file_part",
    "file_part_dict",
    "is_artifact_uri",
    "offload_inline_files",
    "open_store",
    "read_all",
    "resolve_settings",
    "rewrite_artifact_uris",
]
